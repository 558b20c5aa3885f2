"""sycl_kernels: fast SYCL kernels for LLM and diffusion inference on Intel GPUs and the CPU.

Importing the package registers the ops as torch.library custom ops
(torch.ops.sycl_kernels.*); the SYCL runtime itself loads on first use.
"""

from . import jit, ops
from ._devices import Device, default_device, devices
from ._runtime import RuntimeLineError
from .jit import JitDisabledError, KernelCompileError
from .ops import *  # noqa: F403  (the public ops, as sycl_kernels.rmsnorm etc.)

__version__ = "0.1.0"

__all__ = [
    "Device",
    "JitDisabledError",
    "KernelCompileError",
    "RuntimeLineError",
    "default_device",
    "devices",
    "jit",
]
__all__ += ops.__all__
