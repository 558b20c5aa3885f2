"""sycl_kernels._config: the one place that reads SYCL_KERNELS_* environment variables."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

DEVICE_CHOICES = ("auto", "cpu", "gpu")


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={value!r} is not a boolean (use 1 or 0)")


@dataclass(frozen=True)
class Config:
    device: str
    """SYCL_KERNELS_DEVICE: the device the CLI runs on (ops follow their tensors)."""
    jit: bool
    """SYCL_KERNELS_JIT: whether kernels without a cached or bundled image may be compiled."""
    verbose: bool
    """SYCL_KERNELS_VERBOSE: log each compile and its time."""
    cache_dir: Path
    """SYCL_KERNELS_CACHE_DIR: the disk cache of compiled images (the private, written one)."""
    shared_cache_dirs: tuple[Path, ...]
    """SYCL_KERNELS_SHARED_CACHE_DIRS: read-only caches consulted after cache_dir, in order
    (os.pathsep-separated)."""
    native_cache: bool
    """SYCL_KERNELS_NATIVE_CACHE: keep the device's native binary of each loaded kernel in
    the cache and load it in later processes (jit/native.py)."""
    lock_timeout: float
    """SYCL_KERNELS_LOCK_TIMEOUT: seconds to wait for another process compiling the same
    kernel before compiling it too (publishing is atomic, so both results are whole)."""

    @classmethod
    def from_env(cls) -> Config:
        device = os.environ.get("SYCL_KERNELS_DEVICE", "auto").strip().lower() or "auto"
        if device not in DEVICE_CHOICES:
            raise ValueError(
                f"SYCL_KERNELS_DEVICE={device!r} is not one of {', '.join(DEVICE_CHOICES)}"
            )
        cache_dir = os.environ.get("SYCL_KERNELS_CACHE_DIR") or platformdirs.user_cache_dir(
            "sycl-kernels"
        )
        lock_timeout = os.environ.get("SYCL_KERNELS_LOCK_TIMEOUT", "").strip() or "600"
        try:
            lock_timeout_seconds = float(lock_timeout)
        except ValueError:
            lock_timeout_seconds = -1.0
        if not lock_timeout_seconds >= 0:
            raise ValueError(
                f"SYCL_KERNELS_LOCK_TIMEOUT={lock_timeout!r} is not a number of seconds >= 0"
            )
        return cls(
            device=device,
            jit=_flag("SYCL_KERNELS_JIT", True),
            verbose=_flag("SYCL_KERNELS_VERBOSE", False),
            cache_dir=Path(cache_dir),
            shared_cache_dirs=tuple(
                Path(folder)
                for folder in os.environ.get("SYCL_KERNELS_SHARED_CACHE_DIRS", "").split(os.pathsep)
                if folder.strip()
            ),
            native_cache=_flag("SYCL_KERNELS_NATIVE_CACHE", True),
            lock_timeout=lock_timeout_seconds,
        )


@functools.cache
def config() -> Config:
    """The configuration read from the environment once; tests call config.cache_clear()."""
    return Config.from_env()
