"""sycl_kernels.jit.build: compiles a KernelSpec and loads it, keeping loaded kernels in memory."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .. import _runtime
from .sources import build_config, include_tree
from .spec import KernelSpec


class KernelCompileError(RuntimeError):
    """The device compiler rejected a kernel; the message carries the compiler's log."""


@dataclass
class Stats:
    hits: int = 0
    compiles: int = 0
    compile_seconds: float = 0.0


_stats = Stats()
_loaded: dict[tuple[str, int], object] = {}
_lock = threading.Lock()


def stats() -> Stats:
    """Counters of this process's kernel lookups (a copy)."""
    return Stats(**vars(_stats))


def compile_spec(spec: KernelSpec, queue) -> tuple[bytes, str]:
    """Compiles `spec` for the queue's device: (device image, image format)."""
    source = spec.translation_unit()
    headers = sorted(include_tree(source).items())
    options = list(build_config()["device_options"])
    start = time.perf_counter()
    try:
        image, image_format, _log = _runtime.host_module().compile(queue, source, headers, options)
    except _runtime.host_module().CompileError as e:
        raise KernelCompileError(f"{spec.name}: {e}") from None
    _stats.compiles += 1
    _stats.compile_seconds += time.perf_counter() - start
    return image, image_format


def get_kernel(spec: KernelSpec, queue):
    """The loaded kernel for `spec` on the queue's device, compiled on first use."""
    key = (spec.name, queue.address)
    kernel = _loaded.get(key)
    if kernel is not None:
        _stats.hits += 1
        return kernel
    with _lock:
        kernel = _loaded.get(key)
        if kernel is None:
            image, image_format = compile_spec(spec, queue)
            kernel = _runtime.host_module().Kernel(
                queue, image, image_format, spec.name, spec.signature, spec.group_size or 0
            )
            _loaded[key] = kernel
    return kernel
