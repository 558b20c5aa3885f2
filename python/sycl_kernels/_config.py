"""sycl_kernels._config: the one place that reads SYCL_KERNELS_* environment variables."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

DEVICE_CHOICES = ("auto", "cpu", "gpu")


@dataclass(frozen=True)
class Config:
    device: str
    """SYCL_KERNELS_DEVICE: the device the CLI runs on (ops follow their tensors)."""

    @classmethod
    def from_env(cls) -> Config:
        device = os.environ.get("SYCL_KERNELS_DEVICE", "auto").strip().lower() or "auto"
        if device not in DEVICE_CHOICES:
            raise ValueError(
                f"SYCL_KERNELS_DEVICE={device!r} is not one of {', '.join(DEVICE_CHOICES)}"
            )
        return cls(device=device)


@functools.cache
def config() -> Config:
    """The configuration read from the environment once; tests call config.cache_clear()."""
    return Config.from_env()
