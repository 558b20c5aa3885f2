"""The disk cache: atomic, checksummed, per-entry locked, self-healing; and the JIT switches."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from sycl_kernels import _runtime, jit
from sycl_kernels._config import config
from sycl_kernels._dtypes import BY_NAME
from sycl_kernels.jit import cache as cache_module
from sycl_kernels.jit.cache import ENTRY_SUFFIX, disk_cache
from sycl_kernels.specs.norm import rmsnorm_spec

from tests import references

# Hidden sizes outside kernels/variants.toml, so the JIT (not an AOT image) serves them.
UNCACHED_HIDDEN = 4004


def _rmsnorm_checked(hidden: int) -> None:
    x, weight = torch.randn(3, hidden), torch.randn(hidden)
    out = jit.get_kernel(rmsnorm_spec(BY_NAME["fp32"], hidden, "cpu"), _runtime.cpu_queue())
    got = torch.empty_like(x)
    threads = rmsnorm_spec(BY_NAME["fp32"], hidden, "cpu").group_size
    rows = (0, 0, hidden)  # row strides (kernels/common/rows.hpp)
    out.launch(_runtime.cpu_queue(), 3 * threads, threads, x, *rows, weight, got, *rows, 1, 3, 1e-6)
    torch.testing.assert_close(
        got.double(), references.rmsnorm(x, weight, 1e-6), **references.tolerance(torch.float32)
    )


def _forget_loaded() -> None:
    """Drops this process's loaded kernels, so the next lookup goes to the disk."""
    jit.loader._loaded.clear()


def _run(script: str, env: dict[str, str] | None = None) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


STATS_AFTER_RMSNORM = """
import json, sys, time, torch, sycl_kernels
from pathlib import Path
go = Path(sys.argv[1]) if len(sys.argv) > 1 else None
while go is not None and not go.exists():
    time.sleep(0.01)
h = {hidden}
x, w = torch.randn(5, h), torch.randn(h)
got = sycl_kernels.rmsnorm(x, w).double()
x64 = x.double()
ref = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
ok = bool(torch.allclose(got, ref, rtol=1e-5, atol=1e-5))
print(json.dumps({{"ok": ok, **vars(sycl_kernels.jit.stats())}}))
"""


def test_second_process_loads_from_disk(fresh_cache: Path) -> None:
    script = STATS_AFTER_RMSNORM.format(hidden=UNCACHED_HIDDEN)
    first, second = _run(script), _run(script)
    assert first["ok"] and second["ok"]
    assert (first["compiles"], first["disk_hits"]) == (1, 0)
    assert (second["compiles"], second["disk_hits"]) == (0, 1)
    entries = disk_cache().entries()
    assert [e.name for e in entries] == [f"rmsnorm_fp32_h{UNCACHED_HIDDEN}_cpu"]


def test_eight_processes_compile_once(fresh_cache: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = STATS_AFTER_RMSNORM.format(hidden=UNCACHED_HIDDEN + 1)
    processes = [
        subprocess.Popen([sys.executable, "-c", script, str(go)], stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    time.sleep(3)  # let every process import and wait at the start line
    go.touch()
    results = [
        json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in processes
    ]
    assert all(r["ok"] for r in results)
    assert sum(r["compiles"] for r in results) == 1
    assert sum(r["disk_hits"] for r in results) == 7
    leftovers = [  # native/ (jit/native.py) holds entries too
        p.name
        for p in fresh_cache.rglob("*")
        if p.is_file() and not p.name.endswith((ENTRY_SUFFIX, ".lock"))
    ]
    assert leftovers == []


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="truncated"),
        pytest.param(lambda data: os.urandom(len(data)), id="garbage"),
        pytest.param(lambda data: data[:-1] + bytes([data[-1] ^ 0xFF]), id="wrong-checksum"),
        pytest.param(lambda data: b"", id="empty"),
    ],
)
def test_damaged_entry_is_rebuilt(fresh_cache: Path, damage) -> None:
    hidden = UNCACHED_HIDDEN + 2
    _forget_loaded()
    _rmsnorm_checked(hidden)
    (entry,) = disk_cache().entries()
    entry.path.write_bytes(damage(entry.path.read_bytes()))
    _forget_loaded()
    before = jit.stats().compiles
    with pytest.warns(RuntimeWarning, match="deleting corrupt cache entry"):
        _rmsnorm_checked(hidden)
    assert jit.stats().compiles == before + 1
    (rebuilt,) = disk_cache().entries()
    assert cache_module.decode(rebuilt.path.read_bytes())


def test_a_failed_write_leaves_no_trace_and_the_kernel_runs(fresh_cache: Path, monkeypatch) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    _forget_loaded()
    monkeypatch.setattr(cache_module.os, "fsync", disk_full)
    with pytest.warns(RuntimeWarning, match="could not cache .*No space left on device"):
        _rmsnorm_checked(UNCACHED_HIDDEN + 8)
    assert list(fresh_cache.glob("*.img")) == [] and list(fresh_cache.glob("*.tmp")) == []


def test_unwritable_cache_dir_degrades_to_memory(tmp_path: Path, monkeypatch) -> None:
    # A path below a regular file cannot be created, even by root.
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SYCL_KERNELS_CACHE_DIR", str(blocker / "cache"))
    config.cache_clear()
    _forget_loaded()
    with pytest.warns(RuntimeWarning, match="is not writable") as warned:
        _rmsnorm_checked(UNCACHED_HIDDEN + 3)
        _forget_loaded()
        _rmsnorm_checked(UNCACHED_HIDDEN + 3)
    assert len([w for w in warned if "not writable" in str(w.message)]) == 1
    config.cache_clear()


def test_in_memory_hit_touches_no_disk(monkeypatch) -> None:
    _rmsnorm_checked(UNCACHED_HIDDEN + 4)

    def no_disk(*args: object) -> None:
        raise AssertionError("a loaded kernel must not go to the disk")

    monkeypatch.setattr(cache_module.DiskCache, "load", no_disk)
    monkeypatch.setattr(jit.loader, "compile_inputs", no_disk)
    before = jit.stats().hits
    _rmsnorm_checked(UNCACHED_HIDDEN + 4)
    assert jit.stats().hits == before + 1


def test_a_held_entry_lock_does_not_block_other_entries(fresh_cache: Path) -> None:
    blocked = rmsnorm_spec(BY_NAME["fp32"], UNCACHED_HIDDEN + 5, "cpu")
    digest = jit.compile_inputs(blocked).digest()
    done = threading.Event()
    with disk_cache().lock(blocked.name, digest, timeout=600):
        worker = threading.Thread(
            target=lambda: (_rmsnorm_checked(UNCACHED_HIDDEN + 6), done.set())
        )
        worker.start()
        assert done.wait(timeout=120), "another entry's compile waited for this lock"
    worker.join()


def test_a_lock_held_past_the_timeout_is_passed_by(fresh_cache: Path, monkeypatch) -> None:
    monkeypatch.setenv("SYCL_KERNELS_LOCK_TIMEOUT", "1")
    config.cache_clear()
    spec = rmsnorm_spec(BY_NAME["fp32"], UNCACHED_HIDDEN + 7, "cpu")
    digest = jit.compile_inputs(spec).digest()
    # Held through another open file: to flock, the same as another process holding it.
    with disk_cache().lock(spec.name, digest, timeout=600):
        start = time.perf_counter()
        with pytest.warns(RuntimeWarning, match="locked by another process for 1 s"):
            _rmsnorm_checked(UNCACHED_HIDDEN + 7)
        assert time.perf_counter() - start < 60
    assert disk_cache().load(spec.name, digest) is not None


@pytest.mark.needs_bundled("rmsnorm_fp32_h4096_cpu")
def test_jit_disabled_names_the_variant(fresh_cache: Path) -> None:
    script = (
        "import json, torch, sycl_kernels\n"
        "sycl_kernels.rmsnorm(torch.randn(2, 4096), torch.randn(4096))\n"
        "try:\n"
        "    sycl_kernels.rmsnorm(torch.randn(2, 4010), torch.randn(4010))\n"
        "except sycl_kernels.jit.JitDisabledError as e:\n"
        "    print(json.dumps({'error': str(e)}))\n"
    )
    result = _run(script, {"SYCL_KERNELS_JIT": "0"})
    assert result["error"].startswith(
        "SYCL_KERNELS_JIT=0 but rmsnorm_fp32_h4010_cpu has no prebuilt"
    )


def test_verbose_logs_compiles(fresh_cache: Path) -> None:
    script = (
        "import torch, sycl_kernels\n"
        "sycl_kernels.rmsnorm(torch.randn(2, 4011), torch.randn(4011))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SYCL_KERNELS_VERBOSE": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert "sycl_kernels: compiled rmsnorm_fp32_h4011_cpu in" in result.stderr


def test_bad_env_values_are_rejected(monkeypatch) -> None:
    monkeypatch.setenv("SYCL_KERNELS_JIT", "maybe")
    config.cache_clear()
    with pytest.raises(ValueError, match="SYCL_KERNELS_JIT='maybe' is not a boolean"):
        config()
    config.cache_clear()


@pytest.mark.parametrize("value", ["soon", "-1", "nan"])
def test_bad_lock_timeouts_are_rejected(monkeypatch, value: str) -> None:
    monkeypatch.setenv("SYCL_KERNELS_LOCK_TIMEOUT", value)
    config.cache_clear()
    with pytest.raises(ValueError, match=r"SYCL_KERNELS_LOCK_TIMEOUT=.* is not a number"):
        config()
    config.cache_clear()


# Publishes one 4 MB entry into argv[2] once argv[3] exists, on a filesystem whose
# locks fail as NFS without lockd fails them: every writer publishes at once.
PUBLISH_WITHOUT_LOCKS = """
import errno, sys, time, types
from pathlib import Path
from unittest import mock
import filelock

# The cache module alone: the package's __init__ imports torch, 3 s a process here.
package = Path(sys.argv[1])
for name, folder in (("sycl_kernels", package), ("sycl_kernels.jit", package / "jit")):
    sys.modules[name] = types.ModuleType(name)
    sys.modules[name].__path__ = [str(folder)]
from sycl_kernels.jit.cache import DiskCache

no_locks = OSError(errno.ENOLCK, "No locks available")
mock.patch.object(filelock.FileLock, "acquire", side_effect=no_locks).start()
cache, go = DiskCache(Path(sys.argv[2])), Path(sys.argv[3])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
with cache.lock("entry", "0123", timeout=600) as held:
    cache.store("entry", "0123", bytes(range(256)) * 16384, held=held)
"""


def test_eight_processes_publishing_one_entry_at_once_leave_one_valid_entry(
    tmp_path: Path,
) -> None:
    root, go = tmp_path / "cache", tmp_path / "go"
    root.mkdir()
    package = Path(cache_module.__file__).parents[1]
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", PUBLISH_WITHOUT_LOCKS, str(package), str(root), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    for writer in writers:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    go.touch()
    for writer in writers:
        stderr = writer.communicate(timeout=120)[1]
        assert writer.returncode == 0, stderr
        assert "cannot lock cache entries" in stderr
    assert [p.name for p in root.iterdir()] == ["entry.0123.img"]
    assert cache_module.DiskCache(root).load("entry", "0123") == bytes(range(256)) * 16384


def test_staging_files_are_host_private_and_only_dead_writers_are_removed(
    tmp_path: Path, monkeypatch
) -> None:
    cache = cache_module.DiskCache(tmp_path)
    entry = cache.entry_path("entry", "0123").name
    host = socket.gethostname()
    finished = subprocess.Popen(["true"])
    finished.wait()
    staging = {
        "dead": f".{entry}.{host}.{finished.pid}.abc.tmp",
        "alive": f".{entry}.{host}.{os.getppid()}.abc.tmp",
        "other host": f".{entry}.node7.example.org.12.abc.tmp",
    }
    for name in staging.values():
        (tmp_path / name).write_bytes(b"half an entry")
    published = []
    real_replace = os.replace

    def replace(src: str, dst: Path) -> None:
        published.append(Path(src).name)
        real_replace(src, dst)

    monkeypatch.setattr(cache_module.os, "replace", replace)

    cache.store("entry", "0123", b"image", held=False)
    assert re.fullmatch(
        rf"\.{re.escape(entry)}\.{re.escape(host)}\.{os.getpid()}\.\w+\.tmp",
        published[0],
    )
    left = sorted(p.name for p in tmp_path.glob(".*.tmp"))
    # Without the lock, another host's writer may be running: only this host's dead one goes.
    assert left == sorted([staging["alive"], staging["other host"]])
    cache.store("entry", "0123", b"image", held=True)
    assert [p.name for p in tmp_path.glob(".*.tmp")] == [staging["alive"]]
    assert cache.load("entry", "0123") == b"image"


def test_a_filesystem_without_locks_publishes_then_verifies(tmp_path: Path, monkeypatch) -> None:
    import filelock

    def no_locks(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(filelock.FileLock, "acquire", no_locks)
    cache = cache_module.DiskCache(tmp_path)
    with pytest.warns(RuntimeWarning, match="cannot lock cache entries") as warned:
        for digest in ("01", "02"):
            with cache.lock("entry", digest, timeout=600) as held:
                assert not held
                cache.store("entry", digest, b"image", held=held)
    assert len(warned) == 1
    assert cache.load("entry", "01") == cache.load("entry", "02") == b"image"
    # A write the filesystem tore is caught by reading the entry back.
    monkeypatch.setattr(cache_module, "encode", lambda image: b"SYKC torn")
    with pytest.raises(OSError, match="failed its check after publishing"):
        cache.store("entry", "03", b"image", held=False)


def test_get_or_create_creates_an_entry_once(tmp_path: Path, monkeypatch) -> None:
    cache = cache_module.DiskCache(tmp_path)
    created = []

    def create() -> bytes:
        created.append("ours")
        return b"ours"

    assert cache.get_or_create("entry", "01", create) == (b"ours", True)
    assert cache.get_or_create("entry", "01", create) == (b"ours", False)
    assert created == ["ours"]

    # Another process publishes the entry while this one waits for its lock.
    real_lock = cache.lock

    @contextlib.contextmanager
    def lock_after_another_process(name: str, digest: str, timeout: float) -> Iterator[bool]:
        cache_module.DiskCache(tmp_path).store(name, digest, b"theirs", held=False)
        with real_lock(name, digest, timeout) as held:
            yield held

    monkeypatch.setattr(cache, "lock", lock_after_another_process)
    assert cache.get_or_create("entry", "02", create) == (b"theirs", False)
    assert created == ["ours"]


def test_get_or_create_returns_an_image_it_cannot_store(tmp_path: Path, monkeypatch) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    cache = cache_module.DiskCache(tmp_path)
    monkeypatch.setattr(cache_module.os, "fsync", disk_full)
    with pytest.warns(RuntimeWarning, match=r"could not cache entry \(.*No space left on device"):
        assert cache.get_or_create("entry", "01", lambda: b"image") == (b"image", True)
    assert cache.entries() == []
