"""sycl_kernels.bench.moe: MoE routing, expert alignment and the paged KV store against
their torch eager forms (bench).

moe_topk: softmax + torch.topk + renormalization (Qwen3-MoE's router) at 128 experts,
top-8. moe_align_block_size: a sort-based torch form producing the same padded
layout. moe_sum: x.sum(dim=1) of the experts' outputs. store_kv_cache: index_copy_ of
the new keys and values into the same flash layout cache ([blocks * block_size, heads,
head_size] view). gather_cache: index_select
of each sequence's blocks of an MLA cache (entry 512 + 64), flattened to tokens.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import torch

from .. import ops
from .registry import BenchOp, Build, Case, register

_EXPERTS, _TOPK, _BLOCK = 128, 8, 64
# Qwen3-MoE-30B-A3B's hidden size.
_HIDDEN = 2048
_HEADS, _HEAD_SIZE, _CACHE_BLOCK = 8, 128, 16
_MLA_ENTRY, _GATHER_BATCH = 512 + 64, 8


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


def moe_sum_case(dtype: torch.dtype, device: torch.device, tokens: int) -> Case:
    x = torch.randn(tokens, _TOPK, _HIDDEN, generator=_generator(6)).to(device, dtype)
    out = torch.empty(tokens, _HIDDEN, dtype=dtype, device=device)

    def ours() -> torch.Tensor:
        return ops.moe_sum(x, out=out)

    return Case(ours, lambda: x.sum(dim=1), _bytes(x, out))


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


def kv_gather_case(dtype: torch.dtype, device: torch.device, tokens: int) -> Case:
    """min(8, tokens) sequences of tokens // batch tokens each, in distinct blocks of a
    cache of twice the blocks they need; both sides gather into [tokens, entry]."""
    batch = min(_GATHER_BATCH, tokens)
    length = tokens // batch
    per_seq = (length + _CACHE_BLOCK - 1) // _CACHE_BLOCK
    blocks = 2 * batch * per_seq
    cache = torch.randn(blocks, _CACHE_BLOCK, _MLA_ENTRY, generator=_generator(6))
    cache = cache.to(device, dtype)
    table = torch.randperm(blocks, generator=_generator(7))[: batch * per_seq]
    table = table.view(batch, per_seq).to(device, torch.int32)
    cu_seq_lens = torch.arange(batch + 1, dtype=torch.int32, device=device) * length
    dst = torch.empty(batch * length, _MLA_ENTRY, dtype=dtype, device=device)

    def ours() -> torch.Tensor:
        ops.gather_cache(cache, dst, table, cu_seq_lens)
        return dst

    def theirs() -> torch.Tensor:
        rows = cache.index_select(0, table.flatten()).view(batch, -1, _MLA_ENTRY)
        return rows[:, :length].flatten(0, 1)

    return Case(ours, theirs, 2 * _bytes(dst) + _bytes(table, cu_seq_lens))


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
        "moe_sum",
        functools.partial(_shapes, moe_sum_case, f"{_TOPK}x{_HIDDEN}"),
        note="moe_sum: the top-8 experts' outputs summed per token; the torch column is "
        "x.sum(dim=1).",
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
register(
    BenchOp(
        "gather_cache",
        functools.partial(_shapes, kv_gather_case, f"{_MLA_ENTRY} MLA b{_CACHE_BLOCK}"),
        note="gather_cache: 8 sequences' tokens out of a paged MLA cache (512 + 64) through a "
        "block table; the torch column is index_select of their blocks, flattened; bytes: "
        "the tokens read once and written once.",
    )
)
