"""sycl_kernels.jit.loader: compile inputs -> device image -> loaded kernel, through every cache.

Lookup order: this process's loaded kernels, the wheel's AOT images, the private
disk cache, the shared read-only caches, and last the device compiler (under the
entry's cross-process lock, after checking the private cache again). An image is
loaded from its cached native binary when there is one (jit/native.py).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import warnings
from dataclasses import dataclass

from .. import _runtime
from .._config import config
from ..specs.spec import KernelSpec
from ..toolchain.compiler import compile_group_out_of_process, compile_out_of_process
from ..toolchain.sources import CompileInputs, compile_inputs
from . import aot, native
from .cache import disk_cache, shared_caches

log = logging.getLogger("sycl_kernels")


class JitDisabledError(RuntimeError):
    """SYCL_KERNELS_JIT=0 and a kernel has neither a bundled nor a cached image."""


@dataclass
class Stats:
    hits: int = 0
    """Kernels found loaded in this process."""
    misses: int = 0
    """Kernels this process had to load."""
    aot_loads: int = 0
    disk_hits: int = 0
    """Images read from a disk cache, private or shared."""
    shared_hits: int = 0
    """Of disk_hits, images read from a shared cache."""
    native_loads: int = 0
    """Kernels loaded from a cached native binary instead of their image (jit/native.py)."""
    shared_native_loads: int = 0
    """Of native_loads, binaries read from a shared cache."""
    compiles: int = 0
    compile_seconds: float = 0.0


_stats = Stats()
# Guards the slow-path counters (several threads may compile at once); `hits`, on
# the hot path, is left unguarded and may undercount under threads.
_stats_lock = threading.Lock()
_loaded: dict[tuple[str, int], object] = {}
_loaded_specs: dict[str, KernelSpec] = {}
_key_locks: dict[str, threading.Lock] = {}
_key_locks_guard = threading.Lock()


def stats() -> Stats:
    """Counters of this process's kernel lookups (a copy)."""
    return Stats(**vars(_stats))


def _key_lock(key: str) -> threading.Lock:
    with _key_locks_guard:
        return _key_locks.setdefault(key, threading.Lock())


def _verbose(message: str, *args: object) -> None:
    if config().verbose:
        if not log.handlers:
            log.addHandler(logging.StreamHandler(sys.stderr))
            log.setLevel(logging.INFO)
        log.info(message, *args)


def _check_jit_enabled(names: str) -> None:
    if not config().jit:
        raise JitDisabledError(
            f"SYCL_KERNELS_JIT=0 but {names} has no prebuilt variant or cached image; "
            "add it to kernels/variants.toml, run python -m sycl_kernels precompile, "
            "or enable the JIT"
        )


def _device_type(queue) -> str:
    return "cpu" if queue.device["type"] == "cpu" else "gpu"


def _count_compiles(kernels: int, seconds: float) -> None:
    with _stats_lock:
        _stats.compiles += kernels
        _stats.compile_seconds += seconds


def compile_image(inputs: CompileInputs, queue) -> bytes:
    """Compiles `inputs` for the queue's device into a device image, in a process of its own."""
    _check_jit_enabled(inputs.name)
    start = time.perf_counter()
    image = compile_out_of_process(inputs, _device_type(queue))
    seconds = time.perf_counter() - start
    _count_compiles(1, seconds)
    _verbose("sycl_kernels: compiled %s in %.2f s", inputs.name, seconds)
    return image


def compile_images(members: list[CompileInputs], queue) -> dict[str, bytes]:
    """Compiles `members` (sharing their options) in one process: name -> image."""
    _check_jit_enabled(", ".join(m.name for m in members))
    start = time.perf_counter()
    images = compile_group_out_of_process(members, _device_type(queue))
    seconds = time.perf_counter() - start
    _count_compiles(len(members), seconds)
    _verbose("sycl_kernels: compiled %d kernels together in %.2f s", len(members), seconds)
    return images


def from_shared_caches(name: str, digest: str) -> bytes | None:
    for cache in shared_caches():
        image = cache.load(name, digest)
        if image is not None:
            with _stats_lock:
                _stats.shared_hits += 1
            return image
    return None


def cached_or_compiled(inputs: CompileInputs, queue, *, shared: bool = True) -> tuple[bytes, str]:
    """The image of `inputs` from a disk cache, else compiled and cached: (image, origin).

    `shared=False` passes the shared caches by (their image did not load).
    """
    cache = disk_cache()
    writable = cache.usable()
    digest = inputs.digest()
    image = cache.load(inputs.name, digest) if writable else None
    if image is None and shared:
        image = from_shared_caches(inputs.name, digest)
    if image is None:
        if not writable:
            return compile_image(inputs, queue), "compiled"
        # The private cache is looked in again, before and under the entry's lock:
        # another process may have published the entry since.
        image, compiled = cache.get_or_create(
            inputs.name, digest, lambda: compile_image(inputs, queue)
        )
        if compiled:
            return image, "compiled"
    with _stats_lock:
        _stats.disk_hits += 1
    return image, "disk"


def load_kernels(inputs: CompileInputs, queue, kernels: list[tuple[str, str, int]]) -> list[object]:
    """Loads `kernels` [(name, signature letters, work-group size or 0)] of one image.

    An image that does not load is dropped (with a warning) and compiled afresh.
    """
    host = _runtime.host_module()

    def kernels_of(bundle) -> list[object]:
        return [
            host.Kernel(bundle, name, signature, group_size)
            for name, signature, group_size in kernels
        ]

    def from_native(image: bytes) -> list[object] | None:
        """The kernels from the cached native binary of `image`, if one loads."""
        key = native.native_key(image, queue)
        found = native.cached_native(inputs.name, key)
        if found is None:
            return None
        binary, private = found
        try:
            loaded = kernels_of(host.Bundle.from_native(queue, binary))
        except (RuntimeError, ValueError) as e:
            native.forget_native(inputs.name, key, e, private)
            return None
        with _stats_lock:
            _stats.native_loads += 1
            _stats.shared_native_loads += not private
        return loaded

    def from_spirv(image: bytes) -> list[object]:
        bundle = host.Bundle(queue, image, inputs.image_format)
        loaded = kernels_of(bundle)
        if config().native_cache:
            native.keep_native(inputs.name, native.native_key(image, queue), bundle)
        return loaded

    def from_image(image: bytes) -> list[object]:
        loaded = from_native(image) if config().native_cache else None
        return loaded if loaded is not None else from_spirv(image)

    image = aot.find_image(inputs)
    if image is not None:
        loaded = from_native(image) if config().native_cache else None
        if loaded is not None:
            return loaded
        try:
            loaded = from_spirv(image)
        except (RuntimeError, ValueError) as e:
            warnings.warn(
                f"sycl_kernels: AOT image of {inputs.name} did not load ({e}); compiling it",
                RuntimeWarning,
                stacklevel=2,
            )
        else:
            with _stats_lock:
                _stats.aot_loads += 1
            return loaded
    image, origin = cached_or_compiled(inputs, queue)
    try:
        return from_image(image)
    except (RuntimeError, ValueError) as e:
        if origin == "compiled":
            raise
        warnings.warn(
            f"sycl_kernels: cached image of {inputs.name} did not load ({e}); recompiling",
            RuntimeWarning,
            stacklevel=2,
        )
        # Removes it if it was the private cache's; a shared cache's stays (never written).
        disk_cache().entry_path(inputs.name, inputs.digest()).unlink(missing_ok=True)
        return from_image(cached_or_compiled(inputs, queue, shared=False)[0])


def get_kernel(spec: KernelSpec, queue):
    """The loaded kernel for `spec` on the queue's device: from memory, the wheel, or compiled."""
    key = (spec.name, queue.address)
    kernel = _loaded.get(key)
    if kernel is not None:
        _stats.hits += 1
        return kernel
    with _key_lock(spec.name):
        kernel = _loaded.get(key)
        if kernel is None:
            with _stats_lock:
                _stats.misses += 1
            inputs = compile_inputs(spec)
            (kernel,) = load_kernels(
                inputs, queue, [(spec.name, spec.signature, spec.group_size or 0)]
            )
            _loaded[key] = kernel
            _loaded_specs[spec.name] = spec
    return kernel


def loaded_specs() -> list[KernelSpec]:
    """The specs of the kernels this process has loaded, to precompile them elsewhere
    (jit.write_specs, then python -m sycl_kernels precompile --specs)."""
    return list(_loaded_specs.values())
