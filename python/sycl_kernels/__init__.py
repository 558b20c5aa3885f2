"""sycl_kernels: fast SYCL kernels for LLM and diffusion inference on Intel GPUs and the CPU.

Importing the package registers the ops as torch.library custom ops
(torch.ops.sycl_kernels.*). The wheel build imports sycl_kernels.jit's spec and
variant modules in an environment without torch, so the ops load only when torch
is importable.
"""

from __future__ import annotations

import importlib.util

__version__ = "0.1.0"

if importlib.util.find_spec("torch") is not None:
    from . import jit
    from ._devices import Device, default_device, devices
    from .jit import JitDisabledError, KernelCompileError
    from .ops import (
        apply_rope,
        fused_add_rmsnorm,
        gelu_and_mul,
        gelu_tanh_and_mul,
        gemma_fused_add_rmsnorm,
        gemma_rmsnorm,
        qknorm,
        rmsnorm,
        silu_and_mul,
        timestep_embedding,
    )

    __all__ = [
        "Device",
        "JitDisabledError",
        "KernelCompileError",
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
        "rmsnorm",
        "silu_and_mul",
        "timestep_embedding",
    ]
