"""sycl_kernels.ops.diffusion: sinusoidal timestep embedding (kernels/diffusion/)."""

from __future__ import annotations

import torch

from ..specs.diffusion import timestep_embedding_spec
from ._checks import check_bool, check_int, check_number, check_tensor
from ._launch import Address, KernelBinding, Launch, bind_kernel, skip
from ._op import op
from ._schema import Args


def _as_float32(a: Args) -> tuple:
    """The launch's arguments with t as the contiguous float32 the kernel reads."""
    return a._replace(t=a.t.to(torch.float32).contiguous())


def _bind(plan: None, a: Args) -> KernelBinding | Launch:
    if a.t.shape[0] == 0:
        return skip
    return bind_kernel(
        timestep_embedding_spec(a.dim),
        a.t,
        a.t.shape[0],
        prepare=_as_float32,
        timesteps=Address("t"),
        flip_sin_to_cos=int(a.flip_sin_to_cos),
        downscale_freq_shift=float(a.downscale_freq_shift),
        scale=float(a.scale),
        max_period=float(a.max_period),
    )


def _new_output(a: Args) -> torch.Tensor:
    return torch.empty((a.t.shape[0], a.dim), dtype=torch.float32, device=a.t.device)


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
