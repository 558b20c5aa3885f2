"""sycl_kernels._devices: the SYCL devices the runtime sees, and the one the CLI uses."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import _runtime
from ._config import config


@dataclass(frozen=True)
class Device:
    index: int
    name: str
    type: str
    backend: str
    vendor: str
    driver_version: str
    max_work_group_size: int
    sub_group_sizes: tuple[int, ...]
    system_allocations: bool


def devices() -> list[Device]:
    """Every SYCL device the runtime sees (RuntimeError if the runtime is not installed)."""
    return [
        Device(index=i, **{**d, "sub_group_sizes": tuple(d["sub_group_sizes"])})
        for i, d in enumerate(_runtime.host_module().devices())
    ]


def default_device() -> torch.device:
    """The torch device SYCL_KERNELS_DEVICE selects (auto: xpu when torch has one, else cpu)."""
    choice = config().device
    has_xpu = hasattr(torch, "xpu") and torch.xpu.is_available()
    if choice == "gpu" or (choice == "auto" and has_xpu):
        if not has_xpu:
            raise RuntimeError(
                "SYCL_KERNELS_DEVICE=gpu but torch sees no XPU device "
                "(install a PyTorch XPU build and Intel's GPU driver)"
            )
        return torch.device("xpu")
    _runtime.cpu_queue()
    return torch.device("cpu")
