"""sycl_kernels.ops.diffusion: sinusoidal timestep embedding (kernels/diffusion/)."""

from __future__ import annotations

import torch

from ..jit.diffusion import timestep_embedding_spec
from ._checks import check_bool, check_int, check_number, check_tensor
from ._launch import Launch, bind_kernel, skip
from ._op import define_op

_OP = "timestep_embedding"


def _check(
    t: torch.Tensor,
    dim: int,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000.0,
) -> None:
    check_tensor(_OP, "t", t)
    if t.dim() != 1:
        raise ValueError(f"{_OP}(): t has shape {tuple(t.shape)}; expected [N]")
    if t.dtype.is_complex or t.dtype == torch.bool:
        raise TypeError(f"{_OP}(): t has dtype {t.dtype}; expected a real number dtype")
    check_int(_OP, "dim", dim, minimum=1)
    check_bool(_OP, "flip_sin_to_cos", flip_sin_to_cos)
    check_number(_OP, "downscale_freq_shift", downscale_freq_shift)
    check_number(_OP, "scale", scale)
    check_number(_OP, "max_period", max_period, positive=True)


def _bind(
    plan: None,
    t: torch.Tensor,
    dim: int,
    flip_sin_to_cos: bool,
    downscale_freq_shift: float,
    scale: float,
    max_period: float,
) -> Launch:
    if t.shape[0] == 0:
        return skip
    kernel = bind_kernel(timestep_embedding_spec(dim), t, t.shape[0])
    scalars = (
        int(flip_sin_to_cos),
        float(downscale_freq_shift),
        float(scale),
        float(max_period),
    )

    def launch(t, dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period, out) -> None:
        timesteps = t.to(torch.float32).contiguous()
        kernel(timesteps.data_ptr(), out.data_ptr(), *scalars)

    return launch


def _new_output(t: torch.Tensor, dim: int, *_: object) -> torch.Tensor:
    return torch.empty((t.shape[0], dim), dtype=torch.float32, device=t.device)


_timestep_embedding = define_op(_OP, _check, _bind, new_output=_new_output)


def timestep_embedding(
    t: torch.Tensor,
    dim: int,
    flip_sin_to_cos: bool = False,
    downscale_freq_shift: float = 1.0,
    scale: float = 1.0,
    max_period: float = 10000,
) -> torch.Tensor:
    """Sinusoidal embeddings of timesteps t [N] -> float32 [N, dim], as diffusers'
    get_timestep_embedding: half = dim // 2, freq_i = exp(-ln(max_period) * i /
    (half - downscale_freq_shift)), rows [sin(scale * t * freq), cos(...)], swapped
    when flip_sin_to_cos; an odd dim ends with a zero column. t of any real dtype
    is converted to float32. Not differentiable: a t that requires grad raises
    RuntimeError with grad mode on.
    """
    return _timestep_embedding(t, dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period)
