"""sycl_kernels.ops.diffusion: sinusoidal timestep embedding (kernels/diffusion/)."""

from __future__ import annotations

import torch

from .. import _runtime
from ..jit.diffusion import timestep_embedding_spec
from ._checks import check_bool, check_int, check_number, check_tensor
from ._launch import launch_groups


def _launch(
    t: torch.Tensor,
    dim: int,
    flip_sin_to_cos: bool,
    downscale_freq_shift: float,
    scale: float,
    max_period: float,
) -> torch.Tensor:
    out = torch.empty((t.shape[0], dim), dtype=torch.float32, device=t.device)
    if t.shape[0] == 0:
        return out
    timesteps = t.to(torch.float32).contiguous()
    queue = _runtime.queue_of(t)
    spec = timestep_embedding_spec(dim)
    launch_groups(
        spec,
        queue,
        t.shape[0],
        timesteps.data_ptr(),
        out.data_ptr(),
        int(flip_sin_to_cos),
        float(downscale_freq_shift),
        float(scale),
        float(max_period),
    )
    return out


@torch.library.custom_op("sycl_kernels::timestep_embedding", mutates_args=())
def _timestep_embedding_op(
    t: torch.Tensor,
    dim: int,
    flip_sin_to_cos: bool,
    downscale_freq_shift: float,
    scale: float,
    max_period: float,
) -> torch.Tensor:
    return _launch(t, dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period)


@_timestep_embedding_op.register_fake
def _(t, dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period) -> torch.Tensor:
    return torch.empty((t.shape[0], dim), dtype=torch.float32, device=t.device)


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
    is converted to float32.
    """
    op = "timestep_embedding"
    check_tensor(op, "t", t)
    if t.dim() != 1:
        raise ValueError(f"{op}(): t has shape {tuple(t.shape)}; expected [N]")
    if t.dtype.is_complex or t.dtype == torch.bool:
        raise TypeError(f"{op}(): t has dtype {t.dtype}; expected a real number dtype")
    check_int(op, "dim", dim, minimum=1)
    check_bool(op, "flip_sin_to_cos", flip_sin_to_cos)
    check_number(op, "downscale_freq_shift", downscale_freq_shift)
    check_number(op, "scale", scale)
    check_number(op, "max_period", max_period, positive=True)
    if torch.compiler.is_compiling():
        return _timestep_embedding_op(
            t, dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period
        )
    return _launch(t, dim, flip_sin_to_cos, downscale_freq_shift, scale, float(max_period))
