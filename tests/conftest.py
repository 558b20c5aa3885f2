"""Shared fixtures: every test runs on a real SYCL device (the CPU device here)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings
from sycl_kernels._config import config
from sycl_kernels.jit import aot, compile_inputs
from sycl_kernels.jit.sources import KERNELS_DIR
from sycl_kernels.jit.variants import read_manifest

# Property tests (tests/ops/test_properties.py). Each example may compile a variant
# (~0.7 s), so the number of examples is what bounds their time. "ci" is
# derandomized, so a CI failure reproduces; pick one with --hypothesis-profile.
_PROFILE = {"deadline": None, "suppress_health_check": [HealthCheck.function_scoped_fixture]}
settings.register_profile("ci", max_examples=25, derandomize=True, database=None, **_PROFILE)
settings.register_profile("dev", max_examples=25, **_PROFILE)
settings.register_profile("long", max_examples=400, **_PROFILE)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(autouse=True, scope="session")
def _session_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keeps the suite's compiled kernels out of the user's cache (subprocesses inherit it).

    SYCL_KERNELS_TEST_CACHE_DIR names a folder to keep them in across runs (ctest sets
    one in the build tree: a rerun compiles only what changed); tests that need an
    empty cache take `fresh_cache`.
    """
    kept = os.environ.get("SYCL_KERNELS_TEST_CACHE_DIR")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYCL_KERNELS_CACHE_DIR", kept or str(tmp_path_factory.mktemp("kernel-cache")))
        config.cache_clear()
        yield
    config.cache_clear()


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty disk cache for this test only."""
    root = tmp_path / "cache"
    monkeypatch.setenv("SYCL_KERNELS_CACHE_DIR", str(root))
    config.cache_clear()
    yield root
    config.cache_clear()


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


# Test node id -> the variants it needs that the build does not bundle.
_NOT_BUNDLED = pytest.StashKey[dict]()


def _not_bundled(names: tuple[str, ...]) -> list[str]:
    """Of these manifest variants, the ones the build under test has no current image of."""
    specs = {v.spec.name: v.spec for v in read_manifest(KERNELS_DIR / "variants.toml")}
    unknown = [name for name in names if name not in specs]
    if unknown:
        raise pytest.UsageError(f"needs_bundled names variants not in the manifest: {unknown}")
    return [name for name in names if not aot.is_bundled(compile_inputs(specs[name]))]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselects the tests marked needs_bundled(...) whose variants this build does not
    bundle (a subset preset, the dev preset); pytest_terminal_summary lists them."""
    kept, deselected, reasons = [], [], {}
    for item in items:
        marker = item.get_closest_marker("needs_bundled")
        missing = _not_bundled(marker.args) if marker else []
        if missing:
            deselected.append(item)
            reasons[item.nodeid] = missing
        else:
            kept.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept
    config.stash[_NOT_BUNDLED] = reasons


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    reasons = config.stash.get(_NOT_BUNDLED, {})
    if reasons:
        terminalreporter.section("deselected: variants this build does not bundle")
        for nodeid, missing in reasons.items():
            terminalreporter.write_line(f"{nodeid}: {', '.join(missing)}")
