"""sycl_kernels.jit.native: device-native binaries of loaded images, cached beside them.

Loading a SPIR-V image makes the device's driver compile it to native code (about
100 ms a kernel on the CPU device, more on a GPU), in every fresh process. After an
image is loaded, its native binary is stored in the `native/` folder of the private
disk cache (the same entry format, jit/cache.py), keyed by the image's SHA-256, the
device, its driver and the SYCL runtime; the next process loads that instead (a
few ms). The `native/` folders of the shared caches are read too, where trusted
(jit/cache.py: a native binary is machine code on the CPU device). A binary that is
missing, foreign or fails to load falls back to the SPIR-V, and a bad private entry
is deleted and written again. OpenCL gives native binaries in every build, Level
Zero where the build found its header (`native_backends()`; docs/jit.md).
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

from .. import _runtime
from .._config import config
from .cache import DiskCache, ReadOnlyCache, disk_cache

NATIVE_FOLDER = "native"
_caches: dict[Path, DiskCache] = {}


def native_cache() -> DiskCache:
    """The native binaries of the private cache (SYCL_KERNELS_CACHE_DIR/native)."""
    root = config().cache_dir / NATIVE_FOLDER
    cache = _caches.get(root)
    if cache is None:
        cache = _caches[root] = DiskCache(root)
    return cache


def _writable(cache: DiskCache) -> bool:
    # The private cache warns once when it is not writable; its folder is not asked twice.
    return disk_cache().usable() and cache.usable()


_shared: dict[tuple[Path, ...], tuple[ReadOnlyCache, ...]] = {}


def shared_native_caches() -> tuple[ReadOnlyCache, ...]:
    """The `native/` folders of the shared caches, each trusted on its own (jit/cache.py)."""
    roots = config().shared_cache_dirs
    caches = _shared.get(roots)
    if caches is None:
        caches = _shared[roots] = tuple(ReadOnlyCache(root / NATIVE_FOLDER) for root in roots)
    return caches


def native_key(image: bytes, queue) -> str:
    """What a native binary depends on: the image, the device, its driver, the runtime."""
    device = queue.device
    key = hashlib.sha256(image)
    for part in (
        device["backend"],
        device["name"],
        device["driver_version"],
        _runtime.host_module().runtime_version(),
    ):
        key.update(b"\0" + str(part).encode())
    return key.hexdigest()


def cached_native(name: str, key: str) -> tuple[bytes, bool] | None:
    """The cached native binary of kernel image `name`: (binary, from the private cache)."""
    private = native_cache()
    if _writable(private):
        binary = private.load(name, key)
        if binary is not None:
            return binary, True
    for cache in shared_native_caches():
        binary = cache.load(name, key)
        if binary is not None:
            return binary, False
    return None


def forget_native(name: str, key: str, error: Exception, private: bool) -> None:
    """A native binary that did not load: warn, and delete it if it is ours to delete."""
    warnings.warn(
        f"sycl_kernels: native binary of {name} did not load ({error}); loading its SPIR-V",
        RuntimeWarning,
        stacklevel=3,
    )
    if private:
        native_cache().entry_path(name, key).unlink(missing_ok=True)


def keep_native(name: str, key: str, bundle) -> None:
    """Stores the native binary of a bundle loaded from SPIR-V, where the backend gives one.

    Without the entry's lock: every writer of it writes the same binary for the same
    key, and publishing is atomic (jit/cache.py).
    """
    cache = native_cache()
    if not _writable(cache):
        return
    binary = bundle.native_binary()
    if not binary:
        return
    try:
        cache.store(name, key, binary, held=False)
    except OSError as e:
        warnings.warn(
            f"sycl_kernels: could not cache the native binary of {name} ({e})",
            RuntimeWarning,
            stacklevel=3,
        )
