"""A process SIGKILLed while compiling or publishing a cache entry leaves the cache
usable: the next process compiles or loads a correct entry, never takes a temporary
file for an entry, and is not held up by the dead process's lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sycl_kernels._dtypes import BY_NAME
from sycl_kernels.jit import compile_inputs
from sycl_kernels.jit.cache import ENTRY_SUFFIX, DiskCache, decode
from sycl_kernels.specs.norm import rmsnorm_spec

from tests.jit.test_cache import STATS_AFTER_RMSNORM, _run

HIDDEN = 4020  # outside kernels/variants.toml: served by the JIT and the disk cache
ENTRY = f"rmsnorm_fp32_h{HIDDEN}_cpu"

# Runs rmsnorm on an uncached variant and SIGKILLs itself at the kill point argv[1].
KILLED_CHILD = f"""
import os, signal, sys
from unittest import mock
import torch, sycl_kernels
from sycl_kernels.jit import cache, loader

real_compile, real_replace, real_encode = loader.compile_image, os.replace, cache.encode

def die(*args):
    os.kill(os.getpid(), signal.SIGKILL)

def compile_then_die(inputs, queue):
    real_compile(inputs, queue)
    die()

def half_entry(image):
    data = real_encode(image)
    return data[: len(data) // 2]

def publish_then_die(src, dst):
    real_replace(src, dst)
    die()

patches = {{
    "during_compile": [mock.patch.object(loader, "compile_image", die)],
    "after_compile": [mock.patch.object(loader, "compile_image", compile_then_die)],
    "mid_write": [mock.patch.object(cache, "encode", half_entry), mock.patch("os.fsync", die)],
    "before_publish": [mock.patch("os.replace", die)],
    "after_publish": [mock.patch("os.replace", publish_then_die)],
    "timed": [],
}}[sys.argv[1]]
for patch in patches:
    patch.start()
print("ready", flush=True)
sycl_kernels.rmsnorm(torch.randn(2, {HIDDEN}), torch.randn({HIDDEN}))
"""

# Where each kill point leaves the cache, as the next process finds it.
KILL_POINTS = {
    "during_compile": "nothing written, entry lock held by the dead process",
    "after_compile": "image compiled but not stored, lock held",
    "mid_write": "half an entry in a temporary file, lock held",
    "before_publish": "a whole temporary file not yet renamed, lock held",
    "after_publish": "entry published, lock still held",
}


def _killed_child(point: str, delay: float | None = None) -> int:
    """Runs KILLED_CHILD at `point`; with `delay`, the parent kills it that long after
    it is ready instead. Returns its exit status."""
    with subprocess.Popen(
        [sys.executable, "-c", KILLED_CHILD, point], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        if delay is not None:
            time.sleep(delay)
            child.send_signal(signal.SIGKILL)
        return child.wait(timeout=300)


def _next_process_result(cache_root: Path) -> dict:
    """The next process: correct output, and the only entry it leaves is whole."""
    # A stale lock that blocked would hit _run's timeout before this lock timeout.
    result = _run(
        STATS_AFTER_RMSNORM.format(hidden=HIDDEN), env={"SYCL_KERNELS_LOCK_TIMEOUT": "3600"}
    )
    assert result["ok"], "the next process computed a wrong result"
    entries = DiskCache(cache_root).entries()
    assert [e.name for e in entries] == [ENTRY]
    decode(entries[0].path.read_bytes())
    return result


@pytest.mark.parametrize("point", KILL_POINTS, ids=list(KILL_POINTS))
def test_next_process_after_a_kill(fresh_cache: Path, point: str) -> None:
    status = _killed_child(point)
    assert status == -signal.SIGKILL, f"the child was not killed at {point} (status {status})"
    temporary = [p for p in fresh_cache.iterdir() if p.suffix == ".tmp"]
    assert bool(temporary) == (point in ("mid_write", "before_publish")), temporary
    start = time.monotonic()
    result = _next_process_result(fresh_cache)
    if point == "after_publish":
        assert (result["compiles"], result["disk_hits"]) == (0, 1)
    else:
        assert (result["compiles"], result["disk_hits"]) == (1, 0)
    assert [p for p in fresh_cache.iterdir() if p.suffix == ".tmp"] == [], "leftovers stayed"
    print(f"\n{point} ({KILL_POINTS[point]}): next process in {time.monotonic() - start:.1f} s")


# Three moments, not six: each phase has its own kill point above (KILL_POINTS), so
# these only check that a kill from outside at the start, midway through and near
# the end of the call (a compile takes ~1 s) leaves a cache the next process uses.
@pytest.mark.parametrize("delay", [0.0, 0.5, 1.0])
def test_next_process_after_a_kill_at_a_random_moment(fresh_cache: Path, delay: float) -> None:
    # Killed from outside, somewhere in import, compile, write or publish.
    status = _killed_child("timed", delay)
    result = _next_process_result(fresh_cache)
    assert result["compiles"] + result["disk_hits"] == 1
    found = "compiled" if result["compiles"] else "loaded"
    print(f"\nkilled {delay} s after the call (status {status}); the next process {found} it")


def test_temporary_files_are_never_entries(fresh_cache: Path) -> None:
    fresh_cache.mkdir(parents=True)
    digest = compile_inputs(rmsnorm_spec(BY_NAME["fp32"], HIDDEN, "cpu")).digest()
    for junk in (b"", b"SYKC", os.urandom(4096)):
        # Named as the entry's own temporary files are.
        (fresh_cache / f".{ENTRY}.{digest}{ENTRY_SUFFIX}.{len(junk)}.tmp").write_bytes(junk)
    assert DiskCache(fresh_cache).entries() == []
    result = _next_process_result(fresh_cache)
    assert (result["compiles"], result["disk_hits"]) == (1, 0)
    assert [p for p in fresh_cache.iterdir() if p.suffix == ".tmp"] == []
