"""Shared fixtures: every test runs on a real SYCL device (the CPU device here)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings
from sycl_kernels._config import config

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
    """Keeps the suite's compiled kernels out of the user's cache (subprocesses inherit it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYCL_KERNELS_CACHE_DIR", str(tmp_path_factory.mktemp("kernel-cache")))
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
