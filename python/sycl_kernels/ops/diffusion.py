"""sycl_kernels.ops.diffusion: sinusoidal timestep embedding (kernels/diffusion/)."""

from __future__ import annotations

import torch

from ..specs.diffusion import timestep_embedding_spec
from ._checks import check_bool, check_int, check_number, check_tensor
from ._launch import Address, KernelBinding, Launch, bind_kernel, skip
from ._op import op


def _as_float32(t: torch.Tensor, *rest: object) -> tuple:
    """The launch's arguments with t as the contiguous float32 the kernel reads."""
    return (t.to(torch.float32).contiguous(), *rest)


def _bind(
    plan: None,
    t: torch.Tensor,
    dim: int,
    flip_sin_to_cos: bool,
    downscale_freq_shift: float,
    scale: float,
    max_period: float,
) -> KernelBinding | Launch:
    if t.shape[0] == 0:
        return skip
    return bind_kernel(
        timestep_embedding_spec(dim),
        t,
        t.shape[0],
        prepare=_as_float32,
        timesteps=Address("t"),
        flip_sin_to_cos=int(flip_sin_to_cos),
        downscale_freq_shift=float(downscale_freq_shift),
        scale=float(scale),
        max_period=float(max_period),
    )


def _new_output(t: torch.Tensor, dim: int, *_: object) -> torch.Tensor:
    return torch.empty((t.shape[0], dim), dtype=torch.float32, device=t.device)


@op(bind=_bind, new_output=_new_output)
def timestep_embedding(
    t: torch.Tensor,
    dim: int,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000.0,
) -> None:
    """Sinusoidal embeddings of timesteps t [N] -> float32 [N, dim], as diffusers'
    get_timestep_embedding: half = dim // 2, freq_i = exp(-ln(max_period) * i /
    (half - downscale_freq_shift)), rows [sin(scale * t * freq), cos(...)], swapped
    when flip_sin_to_cos; an odd dim ends with a zero column. t of any real dtype
    is converted to float32. Not differentiable: with grad mode on it runs, and
    backward raises a RuntimeError when it reaches the result.
    """
    name = "timestep_embedding"
    check_tensor(name, "t", t)
    if t.dim() != 1:
        raise ValueError(f"{name}(): t has shape {tuple(t.shape)}; expected [N]")
    if t.dtype.is_complex or t.dtype == torch.bool:
        raise TypeError(f"{name}(): t has dtype {t.dtype}; expected a real number dtype")
    check_int(name, "dim", dim, minimum=1)
    check_bool(name, "flip_sin_to_cos", flip_sin_to_cos)
    check_number(name, "downscale_freq_shift", downscale_freq_shift)
    check_number(name, "scale", scale)
    check_number(name, "max_period", max_period, positive=True)
