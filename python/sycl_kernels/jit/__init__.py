"""sycl_kernels.jit: kernels compiled on first use from the package's SYCL headers."""

from .build import KernelCompileError, Stats, compile_spec, get_kernel, stats
from .spec import KernelSpec, Param

__all__ = [
    "KernelCompileError",
    "KernelSpec",
    "Param",
    "Stats",
    "compile_spec",
    "get_kernel",
    "stats",
]
