"""Shared fixtures: every test runs on a real SYCL device (the CPU device here)."""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings
from sycl_kernels import jit
from sycl_kernels._config import config
from sycl_kernels.jit import aot, compile_inputs
from sycl_kernels.specs.variants import read_manifest
from sycl_kernels.toolchain.sources import KERNELS_DIR

# Property tests (tests/ops/test_properties.py). Each example may compile a variant
# (~0.7 s), so the number of examples is what bounds their time. "ci", the default
# everywhere, is derandomized: a failure reproduces, and its examples' kernels are the
# same on every run, so they stay in the kept cache and in SUITE_KERNELS (compiled up
# front in groups) instead of ~250 fresh compiles a run. "dev" draws new random
# examples each run and "long" 400: pick one with --hypothesis-profile.
_PROFILE = {"deadline": None, "suppress_health_check": [HealthCheck.function_scoped_fixture]}
settings.register_profile("ci", max_examples=25, derandomize=True, database=None, **_PROFILE)
settings.register_profile("dev", max_examples=25, **_PROFILE)
settings.register_profile("long", max_examples=400, **_PROFILE)
settings.load_profile("ci")


# What the session's up-front compile of recorded kernels did, for the summary.
_RECORDED = pytest.StashKey[str]()


def _record_path(kept: str, config: pytest.Config) -> Path:
    """The record of the kernels this selection of tests loaded, in the kept cache."""
    selection = hashlib.sha256("\0".join(sorted(config.args)).encode()).hexdigest()[:16]
    return Path(kept) / f"test-specs.{selection}.json"


# The kernels a run of the whole suite loads, as `--record-suite-kernels` wrote them
# (gzipped JSON of jit.write_specs): a whole-suite run on a cache without its own
# record (a fresh machine, CI) compiles them up front, in groups of ~0.1 s a kernel,
# rather than each on first use (~0.9 s). Kernels the record lacks (tests added since)
# compile on first use; kernels it has that no test loads any more cost a group slot.
SUITE_KERNELS = Path(__file__).parent / "suite-kernels.json.gz"


def _whole_suite(config: pytest.Config) -> bool:
    """A run of every test file (`python -m pytest`, or of tests/), no -k selection."""
    tests = Path(__file__).parent.resolve()
    return not config.option.keyword and all(
        Path(arg).resolve() in (tests, tests.parent) for arg in config.args
    )


def _read_suite_kernels(tmp: Path) -> list:
    with gzip.open(SUITE_KERNELS, "rb") as f:
        (tmp / "suite-kernels.json").write_bytes(f.read())
    return jit.read_specs(tmp / "suite-kernels.json")


def _precompile_recorded(record: Path, read: Callable[[], list] | None = None) -> str:
    """Compiles the recorded kernels missing from the cache (after a header edit: every
    kernel that includes it) in grouped compiles, instead of one compile per test."""
    if read is None and not record.exists():
        return f"{record.name}: no record yet, kernels compile on first use"
    start = time.perf_counter()
    try:
        done = jit.precompile(read() if read is not None else jit.read_specs(record))
    except (jit.KernelCompileError, OSError, RuntimeError, ValueError) as e:
        return f"{record.name}: recorded kernels not precompiled, they compile on first use ({e})"
    compiled = sum(1 for entry in done if entry.origin == "compiled")
    seconds = time.perf_counter() - start
    return f"{record.name}: {len(done)} recorded kernels, {compiled} compiled in {seconds:.1f} s"


@pytest.fixture(autouse=True, scope="session")
def _session_cache(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[None]:
    """Keeps the suite's compiled kernels out of the user's cache (subprocesses inherit it).

    SYCL_KERNELS_TEST_CACHE_DIR names a folder to keep them in across runs (ctest sets
    one in the build tree): a rerun compiles only what changed, and compiles it up
    front in groups, from the record of the kernels the same selection of tests
    loaded last time. Tests that need an empty cache take `fresh_cache`.
    """
    kept = os.environ.get("SYCL_KERNELS_TEST_CACHE_DIR")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYCL_KERNELS_CACHE_DIR", kept or str(tmp_path_factory.mktemp("kernel-cache")))
        config.cache_clear()
        record = _record_path(kept, pytestconfig) if kept else None
        if record is not None and record.exists():
            pytestconfig.stash[_RECORDED] = _precompile_recorded(record)
        elif _whole_suite(pytestconfig) and SUITE_KERNELS.exists():
            tmp = tmp_path_factory.mktemp("suite-kernels")
            read = functools.partial(_read_suite_kernels, tmp)
            pytestconfig.stash[_RECORDED] = _precompile_recorded(SUITE_KERNELS, read)
        elif record is not None:
            pytestconfig.stash[_RECORDED] = _precompile_recorded(record)
        yield
        if pytestconfig.getoption("record_suite_kernels"):
            _write_suite_kernels()
        elif os.environ.get("CI") and _whole_suite(pytestconfig) and SUITE_KERNELS.exists():
            _check_suite_kernels(_read_suite_kernels(tmp_path_factory.mktemp("suite-record")))
        if record is not None:
            try:
                recorded = jit.read_specs(record)
            except (OSError, ValueError):  # none yet, or unreadable: start it afresh
                recorded = []
            by_name = {spec.name: spec for spec in (*recorded, *jit.loaded_specs())}
            jit.write_specs(record, by_name.values())
    config.cache_clear()


def _check_suite_kernels(recorded: list) -> None:
    """A whole-suite run in CI (the "ci" hypothesis profile: derandomized, so every run
    loads the same kernels) fails where SUITE_KERNELS is not what it loaded: a test
    added or changed since its last refresh would compile on first use, or the record
    would compile kernels no test loads."""
    loaded = {spec.name for spec in jit.loaded_specs()}
    names = {spec.name for spec in recorded}
    missing, unused = sorted(loaded - names), sorted(names - loaded)
    if missing or unused:
        shown = [f"loaded, not recorded: {n}" for n in missing[:5]]
        shown += [f"recorded, not loaded: {n}" for n in unused[:5]]
        pytest.fail(
            f"{SUITE_KERNELS.name} is stale ({len(missing)} kernels this run loaded are not "
            f"in it, {len(unused)} in it were not loaded; e.g. {'; '.join(shown)}). "
            "Refresh it: CI=true python -m pytest --record-suite-kernels",
            pytrace=False,
        )


def _write_suite_kernels() -> None:
    """SUITE_KERNELS from the kernels this run loaded, sorted by name, reproducibly."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "specs.json"
        jit.write_specs(path, sorted(jit.loaded_specs(), key=lambda spec: spec.name))
        with gzip.GzipFile(SUITE_KERNELS, "wb", mtime=0) as f:
            f.write(path.read_bytes())


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-suite-kernels",
        action="store_true",
        help=f"write the kernels this run loads to {SUITE_KERNELS.name} (run the whole suite)",
    )


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty disk cache for this test only."""
    root = tmp_path / "cache"
    monkeypatch.setenv("SYCL_KERNELS_CACHE_DIR", str(root))
    config.cache_clear()
    yield root
    config.cache_clear()


@pytest.fixture
def tuning_override(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """set(tuning): the ops pick that kernel tuning ("gpu" is what XPU tensors get) on
    the CPU device. Each call then checks and binds its launch afresh and keeps none
    (ops/_op.py), so no call finds a launch bound under the other tuning; the test
    fails if no op read the tuning."""
    from sycl_kernels import _runtime

    read: list[str] = []

    def override(tuning: str) -> None:
        monkeypatch.setattr(_runtime, "tuning_of", lambda t: read.append(tuning) or tuning)
        unkept_launches(monkeypatch)

    yield override
    assert read, "no op bound a launch under the overridden tuning"


def unkept_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes every op call check and bind its launch afresh, keeping none (ops/_op.py),
    for a test that swaps what a binding reads (the tuning, the kernel lookup)."""
    from sycl_kernels.ops import _op

    monkeypatch.setattr(_op, "metadata_key", lambda args: None)


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
    if _RECORDED in config.stash:
        terminalreporter.write_line(f"kept kernel cache: {config.stash[_RECORDED]}")
    reasons = config.stash.get(_NOT_BUNDLED, {})
    if reasons:
        terminalreporter.section("deselected: variants this build does not bundle")
        for nodeid, missing in reasons.items():
            terminalreporter.write_line(f"{nodeid}: {', '.join(missing)}")
