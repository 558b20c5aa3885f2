"""Every row's result depends on that row alone: a batch gives, bit for bit, what each of
its rows gives by itself, and a second call gives the first call's bits (docs/ops.md,
"Reproducibility")."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sycl_kernels
import torch

from tests import references

TOKENS, HIDDEN, HEADS, HEAD_DIM = 37, 1024, (4, 2), 128


def _rows(x: torch.Tensor) -> list[torch.Tensor]:
    """Each row of x as a tensor of its own (a fresh allocation), keeping a leading 1."""
    return [row.clone() for row in x.split(1)]


def _norm(x: torch.Tensor, weight: torch.Tensor) -> list[torch.Tensor]:
    return [sycl_kernels.rmsnorm(x, weight, 1e-6)]


def _fused_add(x: torch.Tensor, weight: torch.Tensor) -> list[torch.Tensor]:
    residual = torch.ones_like(x) + x.flip(-1)
    sycl_kernels.fused_add_rmsnorm(x, residual, weight, 1e-6)
    return [x, residual]


def _silu(x: torch.Tensor, weight: torch.Tensor) -> list[torch.Tensor]:
    return [sycl_kernels.silu_and_mul(x)]


def _heads(op: str) -> Callable[[torch.Tensor, torch.Tensor], list[torch.Tensor]]:
    cache = references.rope_cache(4096, HEAD_DIM)

    def run(x: torch.Tensor, weight: torch.Tensor) -> list[torch.Tensor]:
        heads = x.view(x.shape[0], sum(HEADS), HEAD_DIM)
        q, k = heads[:, : HEADS[0]], heads[:, HEADS[0] :]
        # Each token's position is a function of its values, so a row alone keeps it.
        positions = (x[:, 0].float().abs() * 100).long() % 4096
        if op == "qknorm":
            sycl_kernels.qknorm(q, k, weight, weight, 1e-6)
        elif op == "apply_rope":
            sycl_kernels.apply_rope(positions, q, k, cache, False)
        else:
            sycl_kernels.qknorm_rope(positions, q, k, weight, weight, cache, True)
        return [x]

    return run


OPS = {
    "rmsnorm": (_norm, HIDDEN),
    "fused_add_rmsnorm": (_fused_add, HIDDEN),
    "silu_and_mul": (_silu, 2 * HIDDEN),
    "qknorm": (_heads("qknorm"), sum(HEADS) * HEAD_DIM),
    "apply_rope": (_heads("apply_rope"), sum(HEADS) * HEAD_DIM),
    "qknorm_rope": (_heads("qknorm_rope"), sum(HEADS) * HEAD_DIM),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", OPS)
def test_a_batch_gives_each_row_what_the_row_gives_alone(op: str, dtype: torch.dtype) -> None:
    run, width = OPS[op]
    x = torch.randn(TOKENS, width).to(dtype)
    weight = torch.randn(HEAD_DIM if op.startswith("qknorm") else HIDDEN).to(dtype)
    alone = [run(row, weight) for row in _rows(x)]
    again = x.clone()
    batch = run(x, weight)
    for index, outputs in enumerate(alone):
        for got, want in zip(batch, outputs, strict=True):
            assert torch.equal(got[index : index + 1], want), f"row {index}"
    assert all(torch.equal(a, b) for a, b in zip(run(again, weight), batch, strict=True))
