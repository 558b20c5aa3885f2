"""sycl_kernels: fast SYCL kernels for LLM and diffusion inference on Intel GPUs and the CPU."""

from __future__ import annotations

from . import jit
from ._devices import Device, default_device, devices
from .jit import KernelCompileError
from .ops import rmsnorm

__version__ = "0.1.0"

__all__ = ["Device", "KernelCompileError", "default_device", "devices", "jit", "rmsnorm"]
