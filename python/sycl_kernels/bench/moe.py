"""sycl_kernels.bench.moe: MoE routing, expert alignment and the paged KV store against
their torch eager forms (bench).

moe_topk: softmax + torch.topk + renormalization (Qwen3-MoE's router) at 128 experts,
top-8. moe_align_block_size: a sort-based torch form producing the same padded
layout. store_kv_cache: index_copy_ of the new keys and values into the same flash
layout cache ([blocks * block_size, heads, head_size] view).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import torch

from .. import ops
from .registry import BenchOp, Build, Case, register

_EXPERTS, _TOPK, _BLOCK = 128, 8, 64
_HEADS, _HEAD_SIZE, _CACHE_BLOCK = 8, 128, 16


def _bytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _torch_topk(logits: torch.Tensor) -> torch.Tensor:
    """Qwen3-MoE's router in torch: the renormalized weights of the chosen experts."""
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
    weights, _ = torch.topk(probs, _TOPK, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True)


def routing_case(dtype: torch.dtype, device: torch.device, tokens: int) -> Case:
    """Both sides return the weights of the chosen experts, sorted within each token (bf16
    logits tie often; tied experts have equal weights, whichever is chosen)."""
    logits = torch.randn(tokens, _EXPERTS, generator=_generator(1)).to(device, dtype)
    weights = torch.empty(tokens, _TOPK, device=device)
    ids = torch.empty(tokens, _TOPK, dtype=torch.int32, device=device)

    def ours() -> torch.Tensor:
        ops.moe_topk(logits, _TOPK, renormalize=True, topk_weights=weights, topk_ids=ids)
        return weights.sort(-1).values

    return Case(ours, lambda: _torch_topk(logits).sort(-1).values, _bytes(logits, weights, ids))


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
    return Case(ours, lambda: _torch_align(topk_ids.long()), _bytes(topk_ids) + 4 * size)


def kv_store_case(dtype: torch.dtype, device: torch.device, tokens: int) -> Case:
    """Both sides store into their own cache and return it."""
    blocks = (tokens + _CACHE_BLOCK - 1) // _CACHE_BLOCK * 2
    shape = (blocks, _CACHE_BLOCK, _HEADS, _HEAD_SIZE)
    key = torch.randn(tokens, _HEADS, _HEAD_SIZE, generator=_generator(3)).to(device, dtype)
    value = torch.randn(tokens, _HEADS, _HEAD_SIZE, generator=_generator(4)).to(device, dtype)
    slots = torch.randperm(blocks * _CACHE_BLOCK, generator=_generator(5))[:tokens].to(device)
    ours_k, ours_v = (torch.zeros(shape, dtype=dtype, device=device) for _ in range(2))
    theirs_k, theirs_v = (torch.zeros(shape, dtype=dtype, device=device) for _ in range(2))

    def ours() -> torch.Tensor:
        ops.store_kv_cache(key, value, ours_k, ours_v, slots)
        return ours_k

    def theirs() -> torch.Tensor:
        theirs_k.view(-1, _HEADS, _HEAD_SIZE).index_copy_(0, slots, key)
        theirs_v.view(-1, _HEADS, _HEAD_SIZE).index_copy_(0, slots, value)
        return theirs_k

    return Case(ours, theirs, 2 * _bytes(key, value) + _bytes(slots))


def _shapes(case, label: str, tokens: int, quick: bool) -> Iterable[tuple[str, Build]]:
    return [(f"{tokens}x{label}", lambda dtype, device: case(dtype, device, tokens))]


register(
    BenchOp(
        "moe_topk",
        functools.partial(_shapes, routing_case, f"{_EXPERTS} experts top-{_TOPK}"),
        note="moe_topk: softmax + top-8 + renormalization of 128 experts' logits; the torch "
        "column is torch.softmax, torch.topk and the renormalization; max err compares the "
        "chosen experts' weights.",
    )
)
register(
    BenchOp(
        "moe_align_block_size",
        functools.partial(_shapes, align_case, f"{_TOPK} slots {_EXPERTS} experts b{_BLOCK}"),
        dtypes=(torch.float32,),
        note="moe_align_block_size (int32 ids; the dtype column is unused): the torch "
        "column is a stable sort and a scatter into the same padded layout; max err "
        "compares the blocks of each expert.",
    )
)
register(
    BenchOp(
        "store_kv_cache",
        functools.partial(_shapes, kv_store_case, f"{_HEADS}x{_HEAD_SIZE}"),
        note="store_kv_cache: keys and values into a flash-layout paged cache; the torch column "
        "is index_copy_ into the same cache; bytes: read once and written once.",
    )
)
