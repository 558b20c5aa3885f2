"""sycl_kernels.bench.norm: the norms against torch's rms_norm (bench, demo).

rmsnorm, gemma_rmsnorm (the norm scaled by 1 + weight) and fused_add_rmsnorm on
[tokens, width] rows; qknorm on q and k viewed from one fused qkv tensor (rope.py's
head cases).
"""

from __future__ import annotations

import functools

import torch

from .. import ops
from .registry import BenchOp, Case, bench_rows, nbytes, register, seeded_randn
from .rope import head_shapes


def _rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-6)


def norm_case(op: str, dtype: torch.dtype, device: torch.device, tokens: int, hidden: int) -> Case:
    x = seeded_randn(tokens, hidden, dtype=dtype, device=device, seed=1)
    w = seeded_randn(hidden, dtype=dtype, device=device, seed=2)
    out = torch.empty_like(x)
    if op == "rmsnorm":
        return Case(lambda: ops.rmsnorm(x, w, out=out), lambda: _rms(x, w), nbytes(x, w, out))
    if op == "gemma_rmsnorm":
        # Gemma's eager form: the norm scaled by (1 + weight).
        return Case(
            lambda: ops.gemma_rmsnorm(x, w, out=out), lambda: _rms(x, 1 + w), nbytes(x, w, out)
        )
    residual = seeded_randn(tokens, hidden, dtype=dtype, device=device, seed=3)
    x_ours, r_ours, x_theirs, r_theirs = x.clone(), residual.clone(), x.clone(), residual.clone()

    def ours() -> torch.Tensor:
        ops.fused_add_rmsnorm(x_ours, r_ours, w)
        return x_ours

    def theirs() -> torch.Tensor:
        r_theirs.add_(x_theirs)
        x_theirs.copy_(_rms(r_theirs, w))
        return x_theirs

    return Case(ours, theirs, nbytes(x, residual, w, x, residual))


for _op in ("rmsnorm", "gemma_rmsnorm", "fused_add_rmsnorm"):
    bench_rows(_op)(functools.partial(norm_case, _op))
register(BenchOp("qknorm", functools.partial(head_shapes, "qknorm")))
