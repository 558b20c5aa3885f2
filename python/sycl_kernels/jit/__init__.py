"""sycl_kernels.jit: kernels from the wheel's AOT images or compiled on first use."""

from .build import KernelCompileError, Stats, compile_image, get_kernel, stats
from .sources import CompileInputs, compile_inputs
from .spec import KernelSpec, Param

__all__ = [
    "CompileInputs",
    "KernelCompileError",
    "KernelSpec",
    "Param",
    "Stats",
    "compile_image",
    "compile_inputs",
    "get_kernel",
    "stats",
]
