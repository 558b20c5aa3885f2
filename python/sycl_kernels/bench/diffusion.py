"""sycl_kernels.bench.diffusion: timestep_embedding against diffusers'
get_timestep_embedding (bench, demo).
"""

from __future__ import annotations

import math

import torch

from .. import ops
from .registry import BenchOp, Case, nbytes, register


def timestep_case(device: torch.device, n: int, dim: int) -> Case:
    t = (torch.rand(n, generator=torch.Generator().manual_seed(9)) * 1000).to(device)

    def theirs() -> torch.Tensor:
        # diffusers' get_timestep_embedding with its defaults.
        half = dim // 2
        exponent = -math.log(10000) * torch.arange(half, dtype=torch.float32, device=device)
        emb = torch.exp(exponent / (half - 1.0))
        emb = t[:, None].float() * emb[None, :]
        return torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)

    return Case(lambda: ops.timestep_embedding(t, dim), theirs, nbytes(t) + n * dim * 4)


register(
    BenchOp(
        "timestep_embedding",
        lambda tokens, quick: [(f"{tokens}x256", lambda _, d: timestep_case(d, tokens, 256))],
        demo=("256x256", lambda _, device: timestep_case(device, 256, 256)),
        dtypes=(torch.float32,),
    )
)
