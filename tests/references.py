"""Independent torch references, written from each op's definition in float64."""

from __future__ import annotations

import torch


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x64 = x.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * weight.double()


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """assert_close tolerances: fp16/bf16 outputs are rounded to 8 or 11 significant bits."""
    return {
        torch.float32: {"rtol": 1e-5, "atol": 1e-5},
        torch.float16: {"rtol": 1e-2, "atol": 1e-2},
        torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2},
    }[dtype]
