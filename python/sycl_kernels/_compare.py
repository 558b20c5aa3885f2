"""sycl_kernels._compare: an op and its torch counterpart on the same tensors, timed in turn."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._timing import median_seconds
from .ops import rmsnorm


@dataclass(frozen=True)
class Comparison:
    dtype: torch.dtype
    rows: int
    hidden: int
    sycl_seconds: float
    torch_seconds: float
    max_error: float
    """Largest |ours - float64 reference|."""
    bytes_moved: int
    """Each tensor read or written once."""

    @property
    def speedup(self) -> float:
        return self.torch_seconds / self.sycl_seconds


def reference_rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x64 = x.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * weight.double()


def compare_rmsnorm(
    dtype: torch.dtype, rows: int, hidden: int, device: torch.device, repeats: int
) -> Comparison:
    eps = 1e-6
    generator = torch.Generator().manual_seed(rows * hidden)
    x = torch.randn(rows, hidden, generator=generator).to(device=device, dtype=dtype)
    weight = torch.randn(hidden, generator=generator).to(device=device, dtype=dtype)
    out = torch.empty_like(x)
    got = rmsnorm(x, weight, eps, out=out).double()
    error = (got - reference_rmsnorm(x, weight, eps)).abs().max().item()
    # Interleaved per shape, so both see the same machine load.
    ours = median_seconds(lambda: rmsnorm(x, weight, eps, out=out), device, repeats=repeats)
    theirs = median_seconds(
        lambda: torch.nn.functional.rms_norm(x, (hidden,), weight, eps), device, repeats=repeats
    )
    moved = (2 * x.numel() + weight.numel()) * x.element_size()
    return Comparison(dtype, rows, hidden, ours, theirs, error, moved)
