"""The KV-cache compat calls: vLLM's reshape_and_cache_flash, reshape_and_cache,
concat_and_cache_mla and gather_cache (vllm-xpu-kernels 4543b580 tests/test_cache.py's
shapes and calls: uint8 fp8 caches, 0-d scale tensors, padded tokens past slot_mapping)
and sgl-kernel-xpu's store_cache_xpu (9cf16bf9 tests/test_store_cache_xpu.py's
index_put reference), against tests/references.py paged_store and paged_gather (and
vLLM's own block by block reference for gather_cache)."""

from __future__ import annotations

import pytest
import torch
from sycl_kernels.compat import sgl_kernel, vllm

from tests import references

FP8 = torch.float8_e4m3fn


def _fp8_bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8)


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8", "fp8_e4m3"])
def test_reshape_and_cache_flash(kv_cache_dtype: str) -> None:
    tokens, heads, head_size, block_size, blocks = 8, 2, 128, 16, 3
    dtype = torch.bfloat16
    qkv = torch.randn(tokens + 2, 3, heads, head_size).to(dtype)  # 2 padded tokens
    _, key, value = qkv.unbind(1)
    cache_dtype = dtype if kv_cache_dtype == "auto" else torch.uint8
    key_cache = torch.zeros(blocks, block_size, heads, head_size, dtype=cache_dtype)
    value_cache = torch.zeros_like(key_cache)
    slots = torch.randperm(blocks * block_size)[:tokens]
    slots[3] = -1
    k_scale = (key.float().amax() / 64.0).to(torch.float32)  # 0-d, as vLLM's test
    v_scale = (value.float().amax() / 64.0).to(torch.float32)
    fp8 = kv_cache_dtype != "auto"
    view = (lambda c: c.view(FP8)) if fp8 else (lambda c: c)
    want_k = references.paged_store(
        view(key_cache).flatten(0, 1), key[:tokens], slots, k_scale if fp8 else None
    )
    want_v = references.paged_store(
        view(value_cache).flatten(0, 1), value[:tokens], slots, v_scale if fp8 else None
    )
    result = vllm.reshape_and_cache_flash(
        key, value, key_cache, value_cache, slots, kv_cache_dtype, k_scale, v_scale
    )
    assert result is None
    if fp8:
        assert key_cache.dtype == torch.uint8  # written in place, through a view
        assert torch.equal(key_cache.flatten(0, 1), _fp8_bits(want_k))
        assert torch.equal(value_cache.flatten(0, 1), _fp8_bits(want_v))
    else:
        assert torch.equal(key_cache.flatten(0, 1), want_k)
        assert torch.equal(value_cache.flatten(0, 1), want_v)


def test_reshape_and_cache_split_layout_and_float_scales() -> None:
    tokens, heads, head_size, block_size, blocks, x = 6, 2, 64, 16, 2, 16
    key, value = torch.randn(tokens, heads, head_size), torch.randn(tokens, heads, head_size)
    key_cache = torch.zeros(blocks, heads, head_size // x, block_size, x, dtype=torch.uint8)
    value_cache = torch.zeros(blocks, heads, head_size, block_size, dtype=torch.uint8)
    slots = torch.tensor([0, 31, -1, 7, 16, 2])
    vllm.reshape_and_cache(key, value, key_cache, value_cache, slots, "fp8", 0.02, 0.5)
    flat_k = key_cache.view(FP8).permute(0, 3, 1, 2, 4).reshape(-1, heads, head_size)
    flat_v = value_cache.view(FP8).permute(0, 3, 1, 2).reshape(-1, heads, head_size)
    empty = torch.zeros_like(flat_k)
    want_k = references.paged_store(empty, key, slots, torch.tensor(0.02))
    want_v = references.paged_store(empty, value, slots, torch.tensor(0.5))
    assert torch.equal(_fp8_bits(flat_k), _fp8_bits(want_k))
    assert torch.equal(_fp8_bits(flat_v), _fp8_bits(want_v))


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
def test_concat_and_cache_mla(kv_cache_dtype: str) -> None:
    tokens, rank, pe_dim, block_size, blocks = 5, 512, 64, 16, 2
    dtype = torch.float16
    kv_c, k_pe = torch.randn(tokens, rank).to(dtype), torch.randn(tokens, pe_dim).to(dtype)
    cache_dtype = dtype if kv_cache_dtype == "auto" else torch.uint8
    kv_cache = torch.zeros(blocks, block_size, rank + pe_dim, dtype=cache_dtype)
    scale = torch.tensor([0.05])
    slots = torch.tensor([4, -1, 31, 0, 17])
    fp8 = kv_cache_dtype == "fp8"
    start = kv_cache.view(FP8) if fp8 else kv_cache
    want = references.paged_store(
        start.flatten(0, 1).clone(), torch.cat([kv_c, k_pe], -1), slots, scale if fp8 else None
    )
    assert vllm.concat_and_cache_mla(kv_c, k_pe, kv_cache, slots, kv_cache_dtype, scale) is None
    got = kv_cache.flatten(0, 1)
    assert torch.equal(got, _fp8_bits(want) if fp8 else want)


def test_vllm_refuses_other_cache_dtypes() -> None:
    key = torch.randn(2, 1, 64)
    cache = torch.zeros(1, 16, 1, 64, dtype=torch.uint8)
    with pytest.raises(ValueError, match="fp8_e5m2"):
        vllm.reshape_and_cache_flash(
            key, key, cache, cache.clone(), torch.tensor([0, 1]), "fp8_e5m2", 1.0, 1.0
        )
    with pytest.raises(TypeError, match="uint8"):
        vllm.reshape_and_cache_flash(
            key, key, cache.float(), cache.float(), torch.tensor([0, 1]), "fp8", 1.0, 1.0
        )
    with pytest.raises(IndexError, match="slot_mapping"):
        vllm.reshape_and_cache_flash(
            key, key, cache, cache.clone(), torch.tensor([0, 16]), "fp8", 1.0, 1.0
        )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_store_cache_xpu(dtype: torch.dtype) -> None:
    tokens, heads, row_dim, cache_size = 9, 3, 256, 64
    kw = torch.randn(tokens, heads, row_dim).to(dtype)
    vw = torch.randn(tokens, heads, row_dim).to(dtype)
    k, v = kw[:, 1], vw[:, 2]  # a head's slice: row stride heads * row_dim
    k_cache = torch.zeros(cache_size, row_dim, dtype=dtype)
    v_cache = torch.zeros_like(k_cache)
    indices = torch.randperm(cache_size)[:tokens].to(torch.int32)  # .long() as sgl's
    indices[2] = -1
    want_k = references.paged_store(k_cache, k, indices.long())
    want_v = references.paged_store(v_cache, v, indices.long())
    assert sgl_kernel.store_cache_xpu(k, v, k_cache, v_cache, indices) is None
    assert torch.equal(k_cache, want_k) and torch.equal(v_cache, want_v)
    empty = torch.empty(0, row_dim, dtype=dtype)
    sgl_kernel.store_cache_xpu(empty, empty, k_cache, v_cache, torch.empty(0, dtype=torch.int64))
    with pytest.raises(IndexError):
        sgl_kernel.store_cache_xpu(k[:1], v[:1], k_cache, v_cache, torch.tensor([cache_size]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.uint8], ids=str)
def test_gather_cache_mla(dtype: torch.dtype) -> None:
    """vllm-xpu-kernels tests/test_cache.py test_gather_cache_mla's shapes and reference
    (block by block torch.cat), uint8 an fp8 cache as vLLM allocates it."""
    entry, block_size, num_blocks, max_seq_len, batch_size = 512 + 64, 16, 1024, 512, 8
    if dtype == torch.uint8:
        src_cache = torch.randint(0, 256, (num_blocks, block_size, entry), dtype=dtype)
    else:
        src_cache = torch.randn(num_blocks, block_size, entry).to(dtype)
    seq_len = torch.randint(0, max_seq_len + 1, (batch_size,))
    seq_len[2] = 0
    cu_seq_lens = torch.zeros(batch_size + 1, dtype=torch.int32)
    cu_seq_lens[1:] = seq_len.cumsum(0)
    block_table = torch.stack([torch.randperm(num_blocks) for _ in range(batch_size)]).int()
    dst = torch.zeros(int(seq_len.sum()), entry, dtype=dtype)
    expected = []
    for b in range(batch_size):
        s = int(seq_len[b])
        if s == 0:
            continue
        tot = (s + block_size - 1) // block_size
        blocks = block_table[b, :tot].tolist()
        rows = [src_cache[blocks[i]] for i in range(tot - 1)]
        rows.append(src_cache[blocks[-1], : s - (tot - 1) * block_size])
        expected.append(torch.cat(rows))
    assert vllm.gather_cache(src_cache, dst, block_table, cu_seq_lens, batch_size) is None
    assert torch.equal(dst, torch.cat(expected))


def test_gather_cache_batch_size_and_block_seq_starts() -> None:
    """Only the first batch_size sequences; seq_starts counts whole blocks (vLLM's
    seq_starts[b] / block_size), the core op's token offset rounded down."""
    block_size, entry = 16, 64
    src_cache = torch.randn(10, block_size, entry)
    block_table = torch.randperm(10).view(2, 5).int()
    block_table = torch.cat([block_table, torch.full((1, 5), 10**6, dtype=torch.int32)])
    cu_seq_lens = torch.tensor([0, 20, 50, 60], dtype=torch.int32)
    seq_starts = torch.tensor([5, 33, 0], dtype=torch.int32)  # blocks 0 and 2
    dst = torch.zeros(60, entry)
    vllm.gather_cache(src_cache, dst, block_table, cu_seq_lens, 2, seq_starts)
    want = references.paged_gather(
        src_cache,
        torch.zeros(60, entry),
        block_table[:2],
        cu_seq_lens[:3],
        torch.tensor([0, 32], dtype=torch.int32),
    )
    assert torch.equal(dst, want)
    assert not dst[50:].any()  # the third sequence is past batch_size
    with pytest.raises(ValueError, match="batch_size"):
        vllm.gather_cache(src_cache, dst, block_table, cu_seq_lens, 4)
    with pytest.raises(IndexError, match="block_table"):
        vllm.gather_cache(src_cache, dst, block_table, cu_seq_lens, 3)
    with pytest.raises(TypeError, match="dtype"):
        vllm.gather_cache(src_cache, dst.half(), block_table, cu_seq_lens, 2)


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
def test_gather_and_maybe_dequant_cache(kv_cache_dtype: str) -> None:
    """vLLM's kernel token by token (token_to_seq, seq_starts a token offset), an fp8
    cache as vLLM allocates it (uint8) dequantized into bf16, or a bf16 copy."""
    block_size, entry, num_blocks, batch = 16, 576, 40, 3
    fp8 = kv_cache_dtype == "fp8"
    values = torch.randn(num_blocks, block_size, entry)
    src_cache = values.to(torch.float8_e4m3fn).view(torch.uint8) if fp8 else values.bfloat16()
    block_table = torch.randperm(num_blocks)[: batch * 6].view(batch, 6).int()
    cu_seq_lens = torch.tensor([0, 17, 17, 52], dtype=torch.int32)
    seq_starts = torch.tensor([3, 0, 40], dtype=torch.int32)
    token_to_seq = torch.repeat_interleave(
        torch.arange(batch, dtype=torch.int32), (cu_seq_lens[1:] - cu_seq_lens[:-1]).long()
    )
    num_tokens = int(cu_seq_lens[-1])
    scale = torch.tensor([0.5])
    dst = torch.full((num_tokens + 4, entry), 7.0, dtype=torch.bfloat16)
    want = dst.clone()
    for t in range(num_tokens):
        b = int(token_to_seq[t])
        pos = t - int(cu_seq_lens[b]) + int(seq_starts[b])
        row = src_cache[int(block_table[b, pos // block_size]), pos % block_size]
        want[t] = (row.view(torch.float8_e4m3fn).float() * 0.5).bfloat16() if fp8 else row
    vllm.gather_and_maybe_dequant_cache(
        src_cache,
        dst,
        block_table,
        cu_seq_lens,
        token_to_seq,
        num_tokens,
        kv_cache_dtype,
        scale,
        seq_starts,
    )
    assert torch.equal(dst, want)  # the rows past num_tokens untouched
    with pytest.raises(ValueError, match="num_tokens"):
        vllm.gather_and_maybe_dequant_cache(
            src_cache,
            dst,
            block_table,
            cu_seq_lens,
            token_to_seq,
            num_tokens + 5,
            kv_cache_dtype,
            scale,
        )
    with pytest.raises(ValueError, match="fp8_e5m2"):
        vllm.gather_and_maybe_dequant_cache(
            src_cache,
            dst,
            block_table,
            cu_seq_lens,
            token_to_seq,
            num_tokens,
            "fp8_e5m2",
            scale,
        )
