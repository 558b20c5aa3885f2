"""sycl_kernels.jit.build: turns a KernelSpec into a loaded kernel: AOT image, else compile."""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass

from .. import _runtime
from . import aot
from .sources import CompileInputs, compile_inputs
from .spec import KernelSpec


class KernelCompileError(RuntimeError):
    """The device compiler rejected a kernel; the message carries the compiler's log."""


@dataclass
class Stats:
    hits: int = 0
    aot_loads: int = 0
    compiles: int = 0
    compile_seconds: float = 0.0


_stats = Stats()
_loaded: dict[tuple[str, int], object] = {}
_lock = threading.Lock()


def stats() -> Stats:
    """Counters of this process's kernel lookups (a copy)."""
    return Stats(**vars(_stats))


def compile_image(inputs: CompileInputs, queue) -> bytes:
    """Compiles `inputs` for the queue's device into a device image."""
    host = _runtime.host_module()
    start = time.perf_counter()
    try:
        image, image_format, _log = host.compile(
            queue, inputs.source, list(inputs.headers), list(inputs.options)
        )
    except host.CompileError as e:
        raise KernelCompileError(f"{inputs.name}: {e}") from None
    if image_format != inputs.image_format:
        raise KernelCompileError(
            f"{inputs.name}: the device compiler produced a {image_format} image, "
            f"expected {inputs.image_format}"
        )
    _stats.compiles += 1
    _stats.compile_seconds += time.perf_counter() - start
    return image


def _load(spec: KernelSpec, inputs: CompileInputs, queue):
    host = _runtime.host_module()

    def kernel_from(image: bytes):
        return host.Kernel(
            queue, image, inputs.image_format, spec.name, spec.signature, spec.group_size or 0
        )

    image = aot.find_image(inputs)
    if image is not None:
        try:
            kernel = kernel_from(image)
        except (RuntimeError, ValueError) as e:
            warnings.warn(
                f"sycl_kernels: AOT image of {spec.name} did not load ({e}); compiling it",
                RuntimeWarning,
                stacklevel=3,
            )
        else:
            _stats.aot_loads += 1
            return kernel
    return kernel_from(compile_image(inputs, queue))


def get_kernel(spec: KernelSpec, queue):
    """The loaded kernel for `spec` on the queue's device: from memory, the wheel, or compiled."""
    key = (spec.name, queue.address)
    kernel = _loaded.get(key)
    if kernel is not None:
        _stats.hits += 1
        return kernel
    with _lock:
        kernel = _loaded.get(key)
        if kernel is None:
            kernel = _load(spec, compile_inputs(spec), queue)
            _loaded[key] = kernel
    return kernel
