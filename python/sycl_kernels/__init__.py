"""sycl_kernels: fast SYCL kernels for LLM and diffusion inference on Intel GPUs and the CPU.

The ops and device helpers are imported on first access, so `sycl_kernels.jit`'s
spec and variant modules stay importable without torch (the wheel build uses them).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

_LAZY = {
    "rmsnorm": "sycl_kernels.ops",
    "Device": "sycl_kernels._devices",
    "default_device": "sycl_kernels._devices",
    "devices": "sycl_kernels._devices",
    "KernelCompileError": "sycl_kernels.jit",
    "jit": "sycl_kernels.jit",
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:
    from . import jit as jit
    from ._devices import Device as Device
    from ._devices import default_device as default_device
    from ._devices import devices as devices
    from .jit import KernelCompileError as KernelCompileError
    from .ops import rmsnorm as rmsnorm


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sycl_kernels' has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if name == "jit" else getattr(value, name)
