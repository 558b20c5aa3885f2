"""Independent torch references, written from each op's definition in float64."""

from __future__ import annotations

import math

import torch


def rmsnorm(
    x: torch.Tensor, weight: torch.Tensor | None, eps: float, gemma: bool = False
) -> torch.Tensor:
    """weight None: no scale."""
    x64 = x.double()
    normed = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    if weight is None:
        return normed
    return normed * (weight.double() + 1 if gemma else weight.double())


def fused_add_rmsnorm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float,
    gemma: bool = False,
    rounded_sum: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(new x, new residual): residual + x, and its rmsnorm; rounded_sum normalizes the sum
    rounded to x's dtype instead of the exact one."""
    summed = x.double() + residual.double()
    if rounded_sum:
        summed = summed.to(x.dtype).double()
    return rmsnorm(summed, weight, eps, gemma), summed


def rope(
    positions: torch.Tensor,
    x: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> torch.Tensor:
    """x [tokens, heads, head_dim] rotated by the first rotary_dim columns of each head."""
    rotary_dim = cos_sin_cache.shape[1]
    half = rotary_dim // 2
    cos_sin = cos_sin_cache.double()[positions.long()]
    cos, sin = cos_sin[:, None, :half], cos_sin[:, None, half:]
    x64 = x.double()
    rot, rest = x64[..., :rotary_dim], x64[..., rotary_dim:]
    if is_neox:
        a, b = rot[..., :half], rot[..., half:]
        rotated = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        rotated = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
    return torch.cat([rotated, rest], dim=-1)


def rope_cache(max_position: int, rotary_dim: int, base: float = 10000.0) -> torch.Tensor:
    """float32 [max_position, rotary_dim]: cos of every (position, frequency), then sin."""
    inv_freq = 1.0 / base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    angles = torch.arange(max_position, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).float()


def act_and_mul(op: str, x: torch.Tensor) -> torch.Tensor:
    x64 = x.double()
    d = x.shape[-1] // 2
    a, b = x64[..., :d], x64[..., d:]
    # gelu as a * Phi(a) with Phi from erfc, and 0.5 * (1 + tanh(z)) as sigmoid(2z):
    # 1 + erf and 1 + tanh cancel to 0 far below zero even in float64.
    if op == "silu_and_mul":
        act = a / (1 + torch.exp(-a))
    elif op == "gelu_and_mul":
        act = 0.5 * a * torch.special.erfc(-a / math.sqrt(2))
    else:
        act = a * torch.sigmoid(2 * math.sqrt(2 / math.pi) * (a + 0.044715 * a**3))
    return act * b


def timestep_embedding(
    t: torch.Tensor,
    dim: int,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
) -> torch.Tensor:
    half = dim // 2
    i = torch.arange(half, dtype=torch.float64)
    freq = torch.exp(-math.log(max_period) * i / (half - downscale_freq_shift))
    arg = scale * t.double()[:, None] * freq[None, :]
    first, second = (arg.cos(), arg.sin()) if flip_sin_to_cos else (arg.sin(), arg.cos())
    out = torch.cat([first, second], dim=-1)
    if dim % 2:
        out = torch.nn.functional.pad(out, (0, 1))
    return out


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """assert_close tolerances: fp16/bf16 outputs are rounded to 8 or 11 significant bits."""
    return {
        torch.float32: {"rtol": 1e-5, "atol": 1e-5},
        torch.float16: {"rtol": 1e-2, "atol": 1e-2},
        torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2},
    }[dtype]


def assert_close(got: torch.Tensor, want: torch.Tensor) -> None:
    """got (in its dtype) against a float64 reference, with that dtype's tolerance."""
    torch.testing.assert_close(got.double(), want, **tolerance(got.dtype))
