"""Shared read-only caches (SYCL_KERNELS_SHARED_CACHE_DIRS): read after the private
cache, never written, locked, healed or deleted; what they lack goes to the private one."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sycl_kernels import jit
from sycl_kernels.__main__ import main
from sycl_kernels._config import config
from sycl_kernels._dtypes import BY_NAME
from sycl_kernels.jit.cache import disk_cache
from sycl_kernels.specs.norm import rmsnorm_spec

from tests.jit.test_cache import _forget_loaded, _rmsnorm_checked

SERVED, CORRUPT, MISSING = 4030, 4031, 4032  # outside kernels/variants.toml


def _name(hidden: int) -> str:
    return rmsnorm_spec(BY_NAME["fp32"], hidden, "cpu").name


@pytest.fixture
def use_caches(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Points the private cache and the shared ones at folders, and forgets loaded kernels."""

    def use(private: Path, *shared: Path) -> None:
        monkeypatch.setenv("SYCL_KERNELS_CACHE_DIR", str(private))
        monkeypatch.setenv("SYCL_KERNELS_SHARED_CACHE_DIRS", os.pathsep.join(map(str, shared)))
        config.cache_clear()
        _forget_loaded()

    yield use
    config.cache_clear()


def _snapshot(root: Path) -> dict[Path, tuple[int, int, bytes]]:
    """The mode, mtime and bytes of the folder and of everything in it."""
    return {
        path: (
            path.stat().st_mode,
            path.stat().st_mtime_ns,
            path.read_bytes() if path.is_file() else b"",
        )
        for path in (root, *root.rglob("*"))
    }


def _chmod_tree(root: Path, writable: bool) -> None:
    # Folders before what they hold when opening, after it when closing.
    paths = sorted((root, *root.rglob("*")), reverse=not writable)
    for path in paths:
        if path.is_dir():
            path.chmod(0o755 if writable else 0o555)
        else:
            path.chmod(0o644 if writable else 0o444)


def test_a_read_only_shared_cache_serves_and_is_never_written(
    tmp_path: Path, use_caches, capsys: pytest.CaptureFixture
) -> None:
    shared, private = tmp_path / "shared", tmp_path / "private"
    use_caches(shared)
    _rmsnorm_checked(SERVED)
    spec = rmsnorm_spec(BY_NAME["fp32"], CORRUPT, "cpu")
    corrupt = disk_cache().entry_path(spec.name, jit.compile_inputs(spec).digest())
    corrupt.write_bytes(b"SYKC and not much else")
    _chmod_tree(shared, writable=False)
    # As root the modes stop nothing: comparing the folder before and after does.
    before = _snapshot(shared)
    try:
        use_caches(private, tmp_path / "absent", shared)
        start = jit.stats()
        _rmsnorm_checked(SERVED)
        with pytest.warns(RuntimeWarning, match="skipping corrupt shared cache entry"):
            _rmsnorm_checked(CORRUPT)
        _rmsnorm_checked(MISSING)
        end = jit.stats()
        assert _snapshot(shared) == before
    finally:
        _chmod_tree(shared, writable=True)
    assert (end.shared_hits - start.shared_hits, end.compiles - start.compiles) == (1, 2)
    kernels = {_name(h) for h in (SERVED, CORRUPT, MISSING)}
    assert {e.name for e in disk_cache().entries()} & kernels == {_name(CORRUPT), _name(MISSING)}

    capsys.readouterr()
    assert main(["cache", "ls"]) == 0
    listing = capsys.readouterr().out.splitlines()
    images = [line for line in listing if "kB" in line and "native binary" not in line]
    where = {line.split()[0]: line.split("kB")[1].strip() for line in images}
    assert where[_name(SERVED)] == "shared"
    assert where[_name(MISSING)] == "private"
    # The corrupt shared entry is listed after the private one that serves instead.
    corrupt_lines = [line for line in images if line.startswith(_name(CORRUPT) + " ")]
    assert [line.split("kB")[1].strip() for line in corrupt_lines] == [
        "private",
        "shared (unused: an earlier cache has it)",
    ]
    assert f"in {shared} (shared)" in "\n".join(listing)
