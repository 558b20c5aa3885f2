"""sycl_kernels: fast SYCL kernels for LLM and diffusion inference on Intel GPUs and the CPU.

Importing the package registers the ops as torch.library custom ops
(torch.ops.sycl_kernels.*); the SYCL runtime itself loads on first use.
"""

from . import jit
from ._devices import Device, default_device, devices
from ._runtime import RuntimeLineError
from .jit import JitDisabledError, KernelCompileError
from .ops import (
    act_and_mul,
    apply_rope,
    fused_add_rmsnorm,
    gelu_and_mul,
    gelu_tanh_and_mul,
    gemma_fused_add_rmsnorm,
    gemma_rmsnorm,
    qknorm,
    qknorm_rope,
    rmsnorm,
    silu_and_mul,
    timestep_embedding,
)

__version__ = "0.1.0"

__all__ = [
    "Device",
    "JitDisabledError",
    "KernelCompileError",
    "RuntimeLineError",
    "act_and_mul",
    "apply_rope",
    "default_device",
    "devices",
    "fused_add_rmsnorm",
    "gelu_and_mul",
    "gelu_tanh_and_mul",
    "gemma_fused_add_rmsnorm",
    "gemma_rmsnorm",
    "jit",
    "qknorm",
    "qknorm_rope",
    "rmsnorm",
    "silu_and_mul",
    "timestep_embedding",
]
