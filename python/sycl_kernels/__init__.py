"""sycl_kernels: fast SYCL kernels for LLM and diffusion inference on Intel GPUs and the CPU.

Importing the package registers the ops as torch.library custom ops
(torch.ops.sycl_kernels.*); the SYCL runtime itself loads on first use.
"""

import warnings

# torch warns at import when numpy is absent (its tensor conversions initialize it
# there), which a plain `pip install .` leaves out: the package never uses numpy, and
# torch raises its own error if code that does runs without it.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
    import torch  # noqa: F401

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
