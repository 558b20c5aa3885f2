"""The paged KV-cache store (store_kv_cache) and MLA's concat_and_cache_mla against an
index_copy_ reference (tests/references.py paged_store): model-dtype caches bit for
bit, fp8 e4m3 caches bit for bit against torch's clamp and cast of x / scale; vLLM's
flash, interleaved and split layouts, strided sources (slices of a fused qkv), slots
of -1, and slots past the cache (IndexError, nothing written)."""

from __future__ import annotations

import pytest
import sycl_kernels
import torch
from sycl_kernels import _dtypes as dtype_table

from tests import references
from tests.ops import cases

DTYPES = [d.torch_dtype for d in dtype_table.DTYPES]
FP8 = torch.float8_e4m3fn


def _slots(tokens: int, num_slots: int, skipped: int = 2) -> torch.Tensor:
    """Distinct random slots, `skipped` of them -1."""
    slots = torch.randperm(num_slots)[:tokens]
    slots[torch.randperm(tokens)[:skipped]] = -1
    return slots


def _fused_kv(tokens: int, heads: int, head_size: int, dtype: torch.dtype):
    """k and v as slices of a fused [tokens, (q_heads + 2 * heads) * head_size] qkv."""
    qkv = torch.randn(tokens, (4 + 2 * heads), head_size).to(dtype)
    return qkv[:, 4 : 4 + heads], qkv[:, 4 + heads :]


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8) if t.dtype == FP8 else t


def assert_same(got: torch.Tensor, want: torch.Tensor) -> None:
    """Bit for bit (fp8: NaN at the same places, any sign)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype == FP8:
        nan = want.float().isnan()
        assert torch.equal(got.float().isnan(), nan)
        differ = (_bits(got) != _bits(want)) & ~nan
        assert not differ.any(), f"{int(differ.sum())} differ at {differ.nonzero()[:4]}"
    else:
        assert torch.equal(got, want)


def _flash_caches(blocks, block_size, heads, head_size, dtype):
    shape = (blocks, block_size, heads, head_size)
    if dtype == FP8:
        return torch.zeros(shape, dtype=FP8), torch.zeros(shape, dtype=FP8)
    return torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)


FLASH = [
    (torch.float32, 64, 16, 2),
    (torch.float16, 128, 32, 4),
    (torch.bfloat16, 256, 128, 1),
    (torch.bfloat16, 96, 16, 3),
]


@pytest.mark.parametrize(("dtype", "head_size", "block_size", "heads"), FLASH, ids=str)
def test_flash_layout_matches_reference(dtype, head_size, block_size, heads) -> None:
    tokens, blocks = 11, 3
    key, value = _fused_kv(tokens, heads, head_size, dtype)
    key_cache, value_cache = _flash_caches(blocks, block_size, heads, head_size, dtype)
    slots = _slots(tokens, blocks * block_size)
    want_k = references.paged_store(key_cache.flatten(0, 1), key, slots)
    want_v = references.paged_store(value_cache.flatten(0, 1), value, slots)
    assert sycl_kernels.store_kv_cache(key, value, key_cache, value_cache, slots) is None
    assert_same(key_cache.flatten(0, 1), want_k)
    assert_same(value_cache.flatten(0, 1), want_v)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fp8_cache_bit_exact(dtype) -> None:
    tokens, heads, head_size, block_size, blocks = 9, 2, 128, 16, 2
    key, value = _fused_kv(tokens, heads, head_size, dtype)
    key = key * 30  # some beyond 448 * k_scale: saturated
    key[0, 0, :4] = torch.tensor([float("inf"), -float("inf"), float("nan"), 1e-6]).to(dtype)
    key_cache, value_cache = _flash_caches(blocks, block_size, heads, head_size, FP8)
    k_scale, v_scale = torch.tensor([0.07]), torch.tensor(0.3)
    slots = _slots(tokens, blocks * block_size, skipped=1)
    slots[0] = 5
    want_k = references.paged_store(key_cache.flatten(0, 1), key, slots, k_scale)
    want_v = references.paged_store(value_cache.flatten(0, 1), value, slots, v_scale)
    sycl_kernels.store_kv_cache(key, value, key_cache, value_cache, slots, k_scale, v_scale)
    assert_same(key_cache.flatten(0, 1), want_k)
    assert_same(value_cache.flatten(0, 1), want_v)
    assert (key_cache.flatten(0, 1)[5, 0, :2].float() == torch.tensor([448.0, -448.0])).all()


def test_interleaved_pages() -> None:
    """vLLM's newer flash layout: K and V of a head side by side, [.., heads, 2 * D]."""
    tokens, heads, head_size, block_size, blocks = 7, 2, 64, 16, 2
    dtype = torch.float16
    key, value = _fused_kv(tokens, heads, head_size, dtype)
    kv = torch.randn(blocks, block_size, heads, 2 * head_size).to(dtype)
    key_cache, value_cache = kv[..., :head_size], kv[..., head_size:]
    slots = _slots(tokens, blocks * block_size)
    want_k = references.paged_store(key_cache.flatten(0, 1), key, slots)
    want_v = references.paged_store(value_cache.flatten(0, 1), value, slots)
    sycl_kernels.store_kv_cache(key, value, key_cache, value_cache, slots)
    assert_same(key_cache.flatten(0, 1), want_k)
    assert_same(value_cache.flatten(0, 1), want_v)


@pytest.mark.parametrize(("dtype", "x"), [(torch.bfloat16, 8), (FP8, 16)], ids=str)
def test_split_layout(dtype, x) -> None:
    """vLLM's older layout: key [blocks, heads, D / x, block_size, x], value [blocks,
    heads, D, block_size]."""
    tokens, heads, head_size, block_size, blocks = 10, 2, 128, 16, 2
    src = torch.bfloat16
    key, value = _fused_kv(tokens, heads, head_size, src)
    key_cache = torch.zeros(blocks, heads, head_size // x, block_size, x, dtype=dtype)
    value_cache = torch.zeros(blocks, heads, head_size, block_size, dtype=dtype)
    scales = (torch.tensor([0.05]), torch.tensor([0.02])) if dtype == FP8 else (None, None)
    # The same caches in the flash layout's order, [slots, heads, head_size]:
    flat_k = key_cache.permute(0, 3, 1, 2, 4).reshape(-1, heads, head_size)
    flat_v = value_cache.permute(0, 3, 1, 2).reshape(-1, heads, head_size)
    slots = _slots(tokens, blocks * block_size)
    want_k = references.paged_store(flat_k, key, slots, scales[0])
    want_v = references.paged_store(flat_v, value, slots, scales[1])
    sycl_kernels.store_kv_cache(key, value, key_cache, value_cache, slots, *scales)
    assert_same(key_cache.permute(0, 3, 1, 2, 4).reshape(-1, heads, head_size), want_k)
    assert_same(value_cache.permute(0, 3, 1, 2).reshape(-1, heads, head_size), want_v)


@pytest.mark.parametrize(
    ("dtype", "cache_dtype", "block_size"),
    [(torch.bfloat16, torch.bfloat16, 64), (torch.float16, FP8, 16), (torch.float32, None, 32)],
    ids=str,
)
def test_concat_and_cache_mla(dtype, cache_dtype, block_size) -> None:
    tokens, rank, pe_dim, blocks = 6, 512, 64, 2
    cache_dtype = cache_dtype or dtype
    fused = torch.randn(tokens, rank + pe_dim + 32).to(dtype)
    kv_c, k_pe = fused[:, :rank], fused[:, rank + 32 :]  # strided rows
    kv_cache = torch.zeros(blocks, block_size, rank + pe_dim, dtype=cache_dtype)
    scale = torch.tensor([0.01]) if cache_dtype == FP8 else None
    slots = _slots(tokens, blocks * block_size)
    want = references.paged_store(kv_cache.flatten(0, 1), torch.cat([kv_c, k_pe], -1), slots, scale)
    sycl_kernels.concat_and_cache_mla(kv_c, k_pe, kv_cache, slots, scale)
    assert_same(kv_cache.flatten(0, 1), want)


def test_slot_past_the_cache_raises_and_writes_nothing() -> None:
    key, value = torch.randn(3, 2, 64), torch.randn(3, 2, 64)
    key_cache, value_cache = torch.zeros(2, 16, 2, 64), torch.zeros(2, 16, 2, 64)
    for bad in (32, 10**9):
        slots = torch.tensor([0, bad, 1])
        with pytest.raises(IndexError, match="slot_mapping"):
            sycl_kernels.store_kv_cache(key, value, key_cache, value_cache, slots)
        assert not key_cache.any() and not value_cache.any()
    kv_cache = torch.zeros(2, 16, 576)
    with pytest.raises(IndexError, match="slot_mapping"):
        sycl_kernels.concat_and_cache_mla(
            torch.randn(2, 512), torch.randn(2, 64), kv_cache, torch.tensor([31, 32])
        )
    assert not kv_cache.any()


def test_all_slots_skipped_and_no_tokens() -> None:
    key, value = torch.randn(3, 1, 64), torch.randn(3, 1, 64)
    key_cache, value_cache = torch.zeros(1, 16, 1, 64), torch.zeros(1, 16, 1, 64)
    sycl_kernels.store_kv_cache(key, value, key_cache, value_cache, torch.full((3,), -1))
    assert not key_cache.any() and not value_cache.any()
    sycl_kernels.store_kv_cache(
        key[:0], value[:0], key_cache, value_cache, torch.empty(0, dtype=torch.int64)
    )
    assert not key_cache.any()


@pytest.mark.parametrize(
    ("k_scale", "error"),
    [
        (None, ValueError),
        (torch.tensor([1.0], dtype=torch.float16), TypeError),
        (torch.tensor([1.0, 2.0]), ValueError),
        (torch.ones(1, 1), ValueError),
        (0.5, TypeError),
    ],
    ids=["none", "float16", "two", "2d", "float"],
)
def test_fp8_scales_are_checked(k_scale, error) -> None:
    key, value = torch.randn(2, 1, 64), torch.randn(2, 1, 64)
    key_cache = torch.zeros(1, 16, 1, 64, dtype=FP8)
    value_cache = torch.zeros(1, 16, 1, 64, dtype=FP8)
    with pytest.raises(error, match="store_kv_cache"):
        sycl_kernels.store_kv_cache(
            key, value, key_cache, value_cache, torch.tensor([0, 1]), k_scale, torch.ones(1)
        )


def test_model_dtype_cache_refuses_scales_and_mixed_caches() -> None:
    key, value = torch.randn(2, 1, 64), torch.randn(2, 1, 64)
    caches = torch.zeros(1, 16, 1, 64), torch.zeros(1, 16, 1, 64)
    with pytest.raises(ValueError, match="k_scale"):
        sycl_kernels.store_kv_cache(key, value, *caches, torch.tensor([0, 1]), torch.ones(1))
    with pytest.raises(TypeError, match="dtypes"):
        sycl_kernels.store_kv_cache(
            key, value, caches[0], caches[1].to(FP8), torch.tensor([0, 1]), None, torch.ones(1)
        )


# Suite-wide registrations (tests/ops/cases.py).

_KV = f"{cases.FLOAT} zero_dim extra_dim missing_dim last_dim_plus_one last_stride_2"
_SLOTS = f"{cases.INDEX} int32"


def _store_args() -> dict[str, object]:
    return {
        "key": torch.randn(5, 2, 64),
        "value": torch.randn(5, 2, 64),
        "key_cache": torch.zeros(2, 8, 2, 64),
        "value_cache": torch.zeros(2, 8, 2, 64),
        "slot_mapping": torch.tensor([0, 3, -1, 15, 1]),
    }


def _mla_args() -> dict[str, object]:
    return {
        "kv_c": torch.randn(5, 128),
        "k_pe": torch.randn(5, 32),
        "kv_cache": torch.zeros(2, 8, 160),
        "slot_mapping": torch.tensor([0, 3, -1, 15, 1]),
    }


def _opcheck_samples() -> list[tuple[str, tuple]]:
    store = _store_args()
    mla = _mla_args()
    return [
        ("store_kv_cache", (*store.values(), None, None)),
        ("concat_and_cache_mla", (*mla.values(), None)),
    ]


def _once_store(op, dtype: torch.dtype) -> None:
    key, value = _fused_kv(5, 2, 80, dtype)
    key_cache, value_cache = _flash_caches(2, 16, 2, 80, dtype)
    slots = torch.tensor([3, -1, 31, 0, 17])
    want = references.paged_store(key_cache.flatten(0, 1), key, slots)
    op(key, value, key_cache, value_cache, slots)
    assert_same(key_cache.flatten(0, 1), want)


def _once_mla(op, dtype: torch.dtype) -> None:
    kv_c, k_pe = torch.randn(4, 192).to(dtype), torch.randn(4, 48).to(dtype)
    kv_cache = torch.zeros(2, 16, 240, dtype=dtype)
    slots = torch.tensor([3, -1, 31, 0])
    want = references.paged_store(kv_cache.flatten(0, 1), torch.cat([kv_c, k_pe], -1), slots)
    op(kv_c, k_pe, kv_cache, slots)
    assert_same(kv_cache.flatten(0, 1), want)


cases.register(
    cases.OpCase(
        "store_kv_cache",
        _store_args,
        {
            "key": f"{_KV} float16",
            "value": f"{_KV} float16",
            "key_cache": f"{cases.KV_CACHE} float16",
            "value_cache": f"{cases.KV_CACHE} float16",
            "slot_mapping": _SLOTS,
        },
    ),
    cases.OpCase(
        "concat_and_cache_mla",
        _mla_args,
        {
            "kv_c": f"{cases.FLOAT} zero_dim extra_dim missing_dim last_dim_plus_one "
            "last_stride_2 float16",
            "k_pe": f"{cases.FLOAT} zero_dim extra_dim missing_dim last_dim_plus_one "
            "last_stride_2 float16",
            "kv_cache": f"{cases.KV_CACHE} float16",
            "slot_mapping": _SLOTS,
        },
    ),
    opcheck=_opcheck_samples,
    once={
        "store_kv_cache": cases.OnceCase(_once_store),
        "concat_and_cache_mla": cases.OnceCase(_once_mla),
    },
)
