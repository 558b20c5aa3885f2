"""The KV-cache compat calls: vLLM's reshape_and_cache_flash, reshape_and_cache and
concat_and_cache_mla (vllm-xpu-kernels 4543b580 tests/test_cache.py's shapes and
calls: uint8 fp8 caches, 0-d scale tensors, padded tokens past slot_mapping) and
sgl-kernel-xpu's store_cache_xpu (9cf16bf9 tests/test_store_cache_xpu.py's
index_put reference), against tests/references.py paged_store."""

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
