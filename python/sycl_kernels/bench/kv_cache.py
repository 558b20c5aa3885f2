"""sycl_kernels.bench.kv_cache: the paged KV-cache store and gather against their torch
eager forms (bench, demo).

store_kv_cache: index_copy_ of the new keys and values into the same flash layout
cache ([blocks * block_size, heads, head_size] view). gather_cache: index_select of
each sequence's blocks of an MLA cache (entry 512 + 64), flattened to tokens.
"""

from __future__ import annotations

import functools

import torch

from .. import ops
from .registry import BenchOp, Build, Case, nbytes, register

_HEADS, _HEAD_SIZE, _CACHE_BLOCK = 8, 128, 16
_MLA_ENTRY, _GATHER_BATCH = 512 + 64, 8


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


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

    return Case(ours, theirs, 2 * nbytes(key, value) + nbytes(slots))


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

    return Case(ours, theirs, 2 * nbytes(dst) + nbytes(table, cu_seq_lens))


def _shapes(case, label: str, tokens: int, quick: bool) -> list[tuple[str, Build]]:
    return [(f"{tokens}x{label}", lambda dtype, device: case(dtype, device, tokens))]


register(
    BenchOp(
        "store_kv_cache",
        functools.partial(_shapes, kv_store_case, f"{_HEADS}x{_HEAD_SIZE}"),
        demo=_shapes(kv_store_case, f"{_HEADS}x{_HEAD_SIZE}", 256, quick=True)[0],
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
