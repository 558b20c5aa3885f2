"""sycl_kernels.bench.moe: MoE expert alignment and the experts' sum against their torch
eager forms (bench, demo).

moe_align_block_size: a sort-based torch form producing the same padded layout, at 128
experts, top-8, blocks of 64. moe_sum: x.sum(dim=1) of the experts' outputs.
"""

from __future__ import annotations

import functools

import torch

from .. import ops
from .registry import BenchOp, Build, Case, nbytes, register

_EXPERTS, _TOPK, _BLOCK = 128, 8, 64
# Qwen3-MoE-30B-A3B's hidden size.
_HIDDEN = 2048


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _torch_align(topk_ids: torch.Tensor) -> torch.Tensor:
    """The padded per-expert layout by a stable sort (sorted slot ids, pad value the
    slot count, and the expert of each block): returns the blocks of each expert (the
    comparison; the order within an expert is the same, stable, on both sides)."""
    flat = topk_ids.flatten()
    n = flat.numel()
    order = torch.sort(flat, stable=True).indices
    counts = torch.bincount(flat, minlength=_EXPERTS)
    padded = (counts + _BLOCK - 1) // _BLOCK * _BLOCK
    starts = (torch.cumsum(padded, 0) - padded).repeat_interleave(counts)
    ranks = torch.arange(n) - (torch.cumsum(counts, 0) - counts).repeat_interleave(counts)
    sorted_ids = torch.full((n + _EXPERTS * (_BLOCK - 1),), n, dtype=torch.int32)
    sorted_ids[starts + ranks] = order.to(torch.int32)
    expert_ids = torch.repeat_interleave(torch.arange(_EXPERTS), padded // _BLOCK)
    return torch.bincount(expert_ids, minlength=_EXPERTS)


def align_case(dtype: torch.dtype, device: torch.device, tokens: int) -> Case:
    topk_ids = torch.randint(0, _EXPERTS, (tokens, _TOPK), generator=_generator(2))
    topk_ids = topk_ids.to(device, torch.int32)

    def ours() -> torch.Tensor:
        _, expert_ids, total = ops.moe_align_block_size(topk_ids, _EXPERTS, _BLOCK)
        blocks = int(total.item()) // _BLOCK
        return torch.bincount(expert_ids[:blocks].long(), minlength=_EXPERTS)

    size = topk_ids.numel() + _EXPERTS * (_BLOCK - 1)
    return Case(ours, lambda: _torch_align(topk_ids.long()), nbytes(topk_ids) + 4 * size)


def moe_sum_case(dtype: torch.dtype, device: torch.device, tokens: int) -> Case:
    x = torch.randn(tokens, _TOPK, _HIDDEN, generator=_generator(6)).to(device, dtype)
    out = torch.empty(tokens, _HIDDEN, dtype=dtype, device=device)

    def ours() -> torch.Tensor:
        return ops.moe_sum(x, out=out)

    return Case(ours, lambda: x.sum(dim=1), nbytes(x, out))


def _shapes(case, label: str, tokens: int, quick: bool) -> list[tuple[str, Build]]:
    return [(f"{tokens}x{label}", lambda dtype, device: case(dtype, device, tokens))]


register(
    BenchOp(
        "moe_align_block_size",
        functools.partial(_shapes, align_case, f"{_TOPK} slots {_EXPERTS} experts b{_BLOCK}"),
        demo=_shapes(align_case, f"{_TOPK} slots {_EXPERTS} experts b{_BLOCK}", 256, quick=True)[0],
        dtypes=(torch.float32,),
        note="moe_align_block_size (int32 ids; the dtype column is unused): the torch "
        "column is a stable sort and a scatter into the same padded layout; max err "
        "compares the blocks of each expert.",
    )
)
register(
    BenchOp(
        "moe_sum",
        functools.partial(_shapes, moe_sum_case, f"{_TOPK}x{_HIDDEN}"),
        note="moe_sum: the top-8 experts' outputs summed per token; the torch column is "
        "x.sum(dim=1).",
    )
)
