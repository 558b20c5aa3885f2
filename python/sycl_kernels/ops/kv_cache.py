"""sycl_kernels.ops.kv_cache: the paged KV-cache store (vLLM's reshape_and_cache_flash and
reshape_and_cache, SGLang's store_cache) and MLA's concat_and_cache_mla, in place; and its
inverse, gather_cache (vLLM's gather_cache), each sequence's tokens read back through
its block table.

A slot is block * block_size + offset; a negative slot (padding) stores nothing. The
cache holds the model's dtype (a copy, bit for bit) or torch.float8_e4m3fn: then each
value is stored as fp8(clamp(x / scale, -448, 448)), x / scale in float32, rounded to
nearest even as torch's cast (NaN stays NaN): vLLM's convention, dividing by the
scale (vllm-xpu-kernels 4543b580 csrc/quantization/fp8/quant_utils.h
CopyWithScaleOp), read from a float32 tensor of one element on the cache's device.
The gather copies bits, or dequantizes an fp8 cache: float(x) * scale, rounded once.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch

from .. import _runtime
from .._dtypes import FLOAT_DTYPE_NAMES, DType
from ..specs.kv_cache import gather_kv_spec, gather_rows, store_kv_spec, store_rows_per_group
from ._checks import (
    BY_TORCH,
    check_float_dtype,
    check_index_range,
    check_own_memory,
    check_same,
    check_same_device,
    check_shape,
    check_tensor,
    check_unit_last_stride,
)
from ._launch import Address, KernelBinding, Launch, bind_kernel, skip
from ._op import op
from ._schema import Args

_FP8 = torch.float8_e4m3fn


class _Stream(NamedTuple):
    """One source and its cache (store.hpp's CacheStream): the width, the elements
    contiguous in the cache (x), and the strides."""

    width: int
    x: int
    token_stride: int
    head_stride: int
    block_stride: int
    page_stride: int
    cache_head_stride: int
    x_stride: int


class _Plan(NamedTuple):
    dtype: DType
    fp8: bool
    tokens: int
    num_heads: int
    num_slots: int
    block_size: int
    a: _Stream
    b: _Stream


def _check_sources(
    op: str, first: tuple[str, object], second: tuple[str, object], dims: int, shape: str
) -> DType:
    """The two tensors a store writes (key and value, kv_c and k_pe): of one float dtype
    and device, `dims` dimensions each (`shape` names them), unit last stride; their
    dtype."""
    (first_name, a), (second_name, b) = first, second
    check_tensor(op, first_name, a)
    dtype = check_float_dtype(op, first_name, a)
    check_tensor(op, second_name, b)
    check_same(op, second_name, b, first_name, a)
    for name, t in (first, second):
        if t.dim() != dims:
            raise ValueError(f"{op}(): {name} has shape {tuple(t.shape)}; expected {shape}")
        check_unit_last_stride(op, name, t.shape, t.stride())
    return dtype


def _check_slots(
    op: str, slot_mapping: torch.Tensor, like_name: str, like: torch.Tensor, tokens: int
) -> None:
    check_tensor(op, "slot_mapping", slot_mapping)
    if slot_mapping.dtype != torch.int64:
        raise TypeError(
            f"{op}(): slot_mapping has dtype {slot_mapping.dtype}; expected torch.int64"
        )
    check_same_device(op, "slot_mapping", slot_mapping, like_name, like)
    check_shape(op, "slot_mapping", slot_mapping.shape, (tokens,), "one slot a token")
    if tokens > 1 and slot_mapping.stride(0) != 1:
        raise ValueError(
            f"{op}(): slot_mapping has strides {slot_mapping.stride()}; expected contiguous"
        )


def _check_cache_dtype(
    op: str, src_name: str, src: torch.Tensor, caches: tuple[tuple[str, torch.Tensor], ...]
) -> bool:
    """Whether the caches hold fp8 e4m3 (else src's dtype); they must agree."""
    for name, cache in caches:
        check_tensor(op, name, cache)
        check_same_device(op, name, cache, src_name, src)
        if cache.dtype not in (src.dtype, _FP8):
            raise TypeError(
                f"{op}(): {name} has dtype {cache.dtype}; expected {src_name}'s "
                f"{src.dtype} or torch.float8_e4m3fn"
            )
    dtypes = {cache.dtype for _, cache in caches}
    if len(dtypes) > 1:
        raise TypeError(f"{op}(): the caches have dtypes {sorted(map(str, dtypes))}; expected one")
    return caches[0][1].dtype == _FP8


def _check_scales(
    op: str,
    fp8: bool,
    like_name: str,
    like: torch.Tensor,
    scales: tuple[tuple[str, torch.Tensor | None], ...],
) -> None:
    for name, scale in scales:
        if not fp8:
            if scale is not None:
                raise ValueError(
                    f"{op}(): {name} is given but the cache holds {like.dtype}; a scale "
                    "goes with a torch.float8_e4m3fn cache only"
                )
            continue
        if scale is None:
            raise ValueError(f"{op}(): the cache is torch.float8_e4m3fn; pass {name}=")
        check_tensor(op, name, scale)
        if scale.dtype != torch.float32:
            raise TypeError(f"{op}(): {name} has dtype {scale.dtype}; expected torch.float32")
        check_same_device(op, name, scale, like_name, like)
        if scale.dim() > 1 or scale.numel() != 1:
            raise ValueError(
                f"{op}(): {name} has shape {tuple(scale.shape)}; expected one value, () or (1,)"
            )


def _flash_stream(
    op: str, name: str, src: torch.Tensor, cache: torch.Tensor, heads: int, width: int
) -> tuple[_Stream, int, int]:
    """src's stream into cache [blocks, block_size, heads, width] (flash layout) or the
    split layouts: key [blocks, heads, width / x, block_size, x], value [blocks, heads,
    width, block_size] (split=True for the value's 4-D form); (stream, blocks, block_size)."""
    shape, strides = cache.shape, cache.stride()
    check_unit_last_stride(op, name, shape, strides)
    s = src.stride()
    expected = f"[num_blocks, block_size, {heads}, {width}] (key's heads and head size)"
    if cache.dim() != 4 or shape[2:] != (heads, width):
        raise ValueError(f"{op}(): {name} has shape {tuple(shape)}; expected {expected}")
    check_own_memory(op, name, cache)
    stream = _Stream(width, width, s[0], s[1], strides[0], strides[1], strides[2], 0)
    return stream, shape[0], shape[1]


def _split_streams(
    op: str, key, value, key_cache, value_cache, heads: int, width: int
) -> tuple[_Stream, _Stream, int, int]:
    """vLLM's split layout: key_cache [blocks, heads, width / x, block_size, x],
    value_cache [blocks, heads, width, block_size]."""
    ks, vs = key_cache.shape, value_cache.shape
    check_unit_last_stride(op, "key_cache", ks, key_cache.stride())
    check_unit_last_stride(op, "value_cache", vs, value_cache.stride())
    x = ks[4]
    if x < 1 or ks[1] != heads or ks[2] * x != width:
        raise ValueError(
            f"{op}(): key_cache has shape {tuple(ks)}; expected [num_blocks, {heads}, "
            f"{width} / x, block_size, x] (vLLM's split layout)"
        )
    blocks, block_size = ks[0], ks[3]
    check_shape(
        op,
        "value_cache",
        vs,
        (blocks, heads, width, block_size),
        "[num_blocks, heads, head_size, block_size]: vLLM's split layout",
    )
    check_own_memory(op, "key_cache", key_cache)
    check_own_memory(op, "value_cache", value_cache)
    kc, vc = key_cache.stride(), value_cache.stride()
    a = _Stream(width, x, key.stride(0), key.stride(1), kc[0], kc[3], kc[1], kc[2])
    b = _Stream(width, 1, value.stride(0), value.stride(1), vc[0], vc[3], vc[1], vc[2])
    return a, b, blocks, block_size


def _range_check(num_slots: int, what: str, a: Args) -> tuple:
    """The range check of a CPU slot mapping, at each call: a launch's prepare
    (ops/_launch.py)."""
    check_index_range(a.op_name, "slot_mapping", a.slot_mapping, num_slots, what, low=None)
    return a


def _bind(
    plan: _Plan | None,
    a: Args,
    like: torch.Tensor,
    what: str,
    **addresses: object,
) -> KernelBinding | Launch:
    """The store kernel (`what`: where the slots' bound comes from); addresses: its
    pointer parameters not named as the op's arguments."""
    if plan is None:
        return skip
    tuned_for = _runtime.tuning_of(like)
    key, value = plan.a, plan.b
    spec = store_kv_spec(plan.dtype, plan.fp8, key.width, value.width, key.x, value.x, tuned_for)
    prepare = None
    if a.slot_mapping.is_cpu:
        prepare = functools.partial(_range_check, plan.num_slots, what)
    values: dict[str, object] = {}
    for prefix, s in (("key", key), ("value", value)):
        values |= {
            f"{prefix}_token_stride": s.token_stride,
            f"{prefix}_head_stride": s.head_stride,
            f"{prefix}_cache_block_stride": s.block_stride,
            f"{prefix}_cache_page_stride": s.page_stride,
            f"{prefix}_cache_head_stride": s.cache_head_stride,
            f"{prefix}_cache_x_stride": s.x_stride,
        }
    rows = plan.tokens * plan.num_heads
    per_group = store_rows_per_group(tuned_for)
    return bind_kernel(
        spec,
        like,
        -(-rows // per_group),
        prepare=prepare,
        rows=rows,
        rows_per_group=per_group,
        num_heads=plan.num_heads,
        num_slots=plan.num_slots,
        block_size=plan.block_size,
        **values,
        **addresses,
    )


def _bind_store_kv_cache(plan: _Plan | None, a: Args) -> KernelBinding | Launch:
    scales = {}
    if plan is not None and not plan.fp8:  # never read: any valid address
        scales = {"k_scale": Address("key"), "v_scale": Address("key")}
    return _bind(
        plan,
        a,
        a.key,
        "the caches' num_blocks * block_size",
        **scales,
    )


@op(bind=_bind_store_kv_cache, mutates=("key_cache", "value_cache"))
def store_kv_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    k_scale: torch.Tensor | None = None,
    v_scale: torch.Tensor | None = None,
) -> _Plan | None:
    """Writes key and value [tokens, heads, head_size] into the paged caches at
    slot_mapping[token] (block = slot // block_size, offset = slot % block_size), in
    place; a negative slot stores nothing (padding).

    key, value: float32/float16/bfloat16, one shape, any strides with a unit last one
    (slices of a fused qkv tensor). key_cache, value_cache: vLLM's flash layout
    [num_blocks, block_size, heads, head_size] (any strides with a unit last one:
    vLLM's interleaved K/V pages too), or its split layout, key_cache
    [num_blocks, heads, head_size / x, block_size, x] with value_cache
    [num_blocks, heads, head_size, block_size]. slot_mapping: int64 [tokens],
    contiguous.

    The caches hold key's dtype (copied bit for bit) or torch.float8_e4m3fn: then
    k_scale and v_scale (float32, one value, on the caches' device) are required and
    each value is stored as fp8(clamp(x / scale, -448, 448)) (module doc); with a
    model-dtype cache they must be None. On CPU tensors a slot at or past
    num_blocks * block_size raises IndexError before anything is written; on an XPU
    it is not checked (that would wait for the device) and the kernel skips it: it
    stores nothing, never outside the cache.
    """
    name = "store_kv_cache"
    dtype = _check_sources(name, ("key", key), ("value", value), 3, "[tokens, heads, head_size]")
    check_shape(name, "value", value.shape, key.shape, "key.shape")
    tokens, heads, width = key.shape
    caches = (("key_cache", key_cache), ("value_cache", value_cache))
    fp8 = _check_cache_dtype(name, "key", key, caches)
    if key_cache.dim() == 5:
        a, b, blocks, block_size = _split_streams(
            name, key, value, key_cache, value_cache, heads, width
        )
    else:
        a, blocks, block_size = _flash_stream(name, "key_cache", key, key_cache, heads, width)
        b, _, _ = _flash_stream(name, "value_cache", value, value_cache, heads, width)
        check_shape(name, "value_cache", value_cache.shape, key_cache.shape, "key_cache.shape")
    _check_slots(name, slot_mapping, "key_cache", key_cache, tokens)
    _check_scales(name, fp8, "key_cache", key_cache, (("k_scale", k_scale), ("v_scale", v_scale)))
    if tokens == 0 or heads == 0 or width == 0:
        return None
    return _Plan(dtype, fp8, tokens, heads, blocks * block_size, block_size, a, b)


def _bind_mla(plan: _Plan | None, a: Args) -> KernelBinding | Launch:
    if plan is None:
        return skip
    scales = (
        {"k_scale": Address("scale"), "v_scale": Address("scale")}
        if plan.fp8
        else {"k_scale": Address("kv_c"), "v_scale": Address("kv_c")}
    )
    return _bind(
        plan,
        a,
        a.kv_c,
        "kv_cache's num_blocks * block_size",
        key=Address("kv_c"),
        value=Address("k_pe"),
        key_cache=Address("kv_cache"),
        value_cache=Address("kv_cache", plan.a.width * a.kv_cache.element_size()),
        **scales,
    )


@op(bind=_bind_mla, mutates=("kv_cache",))
def concat_and_cache_mla(
    kv_c: torch.Tensor,
    k_pe: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    scale: torch.Tensor | None = None,
) -> _Plan | None:
    """MLA's cache store: kv_c [tokens, kv_lora_rank] and k_pe [tokens, pe_dim]
    written side by side into kv_cache [num_blocks, block_size, kv_lora_rank + pe_dim]
    at slot_mapping[token], in place; a negative slot stores nothing.

    kv_c, k_pe: float32/float16/bfloat16, one dtype, any strides with a unit last one.
    kv_cache: any strides with a unit last one, in kv_c's dtype (a copy) or
    torch.float8_e4m3fn with `scale` (float32, one value): fp8(clamp(x / scale, -448,
    448)), as store_kv_cache. slot_mapping and the range check as store_kv_cache's.
    """
    name = "concat_and_cache_mla"
    dtype = _check_sources(name, ("kv_c", kv_c), ("k_pe", k_pe), 2, "[tokens, width]")
    tokens, rank = kv_c.shape
    check_shape(name, "k_pe", k_pe.shape[:1], (tokens,), "kv_c's tokens")
    pe_dim = k_pe.shape[1]
    fp8 = _check_cache_dtype(name, "kv_c", kv_c, (("kv_cache", kv_cache),))
    shape, strides = kv_cache.shape, kv_cache.stride()
    check_unit_last_stride(name, "kv_cache", shape, strides)
    if kv_cache.dim() != 3 or shape[2] != rank + pe_dim:
        raise ValueError(
            f"{name}(): kv_cache has shape {tuple(shape)}; expected [num_blocks, "
            f"block_size, kv_c's {rank} + k_pe's {pe_dim}]"
        )
    check_own_memory(name, "kv_cache", kv_cache)
    _check_slots(name, slot_mapping, "kv_cache", kv_cache, tokens)
    _check_scales(name, fp8, "kv_cache", kv_cache, (("scale", scale),))
    if rank == 0 or pe_dim == 0:
        raise ValueError(
            f"{name}(): kv_c and k_pe have widths {rank} and {pe_dim}; expected both >= 1"
        )
    if tokens == 0:
        return None
    a = _Stream(rank, rank, kv_c.stride(0), 0, strides[0], strides[1], 0, 0)
    b = _Stream(pe_dim, pe_dim, k_pe.stride(0), 0, strides[0], strides[1], 0, 0)
    return _Plan(dtype, fp8, tokens, 1, shape[0] * shape[1], shape[1], a, b)


# gather_cache: the inverse of the store, vLLM's gather_cache (and the dequantize of its
# gather_and_maybe_dequant_cache).

# The dtypes a cache may hold; the gather copies them as bits.
_GATHER_DTYPES = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    _FP8,
    torch.float8_e5m2,
    torch.uint8,
)
_GATHER_DTYPE_NAMES = ", ".join(map(str, _GATHER_DTYPES))
_INT32 = torch.int32


class _GatherPlan(NamedTuple):
    element_size: int
    dequant: DType | None
    width: int
    rows: int
    batch: int
    num_blocks: int
    block_size: int
    max_blocks: int
    block_table_stride: int
    cache_block_stride: int
    cache_page_stride: int
    dst_token_stride: int


def _check_entry(op: str, name: str, shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
    """An entry (the dimensions after a token's) contiguous: one row of elements."""
    expected = 1
    for size, stride in reversed(list(zip(shape, strides, strict=True))):
        if size > 1 and stride != expected:
            raise ValueError(
                f"{op}(): {name} has entry dimensions {tuple(shape)} with strides "
                f"{tuple(strides)}; expected them contiguous (one row of elements per token)"
            )
        expected *= size


def _check_index(op: str, name: str, t: torch.Tensor, like: torch.Tensor) -> None:
    check_tensor(op, name, t)
    if t.dtype != _INT32:
        raise TypeError(f"{op}(): {name} has dtype {t.dtype}; expected torch.int32")
    check_same_device(op, name, t, "src_cache", like)


def _check_gather_data(num_blocks: int, block_size: int, rows: int, a: Args) -> tuple:
    """The checks of CPU index tensors, which read data, at each call (a launch's
    prepare, ops/_launch.py): cu_seq_lens in [0, rows] and non-decreasing, seq_starts
    non-negative, and every block-table entry a sequence reads in [0, num_blocks).
    Python lists for the per-sequence values (a call's torch ops cost ~1.5 us each on
    a batch of a few hundred); the table entries as lists too while small."""
    op_name = a.op_name
    block_table, cu_seq_lens, seq_starts = a.block_table, a.cu_seq_lens, a.seq_starts
    batch, max_blocks = block_table.shape
    cu = cu_seq_lens.tolist()
    starts = [0] * batch if seq_starts is None else seq_starts.tolist()
    reads = []  # (sequence, first column, last column) of each non-empty sequence
    for b in range(batch):
        length, start = cu[b + 1] - cu[b], starts[b]
        if not (0 <= cu[b + 1] <= rows and 0 <= cu[b] <= rows):
            bad = cu[b] if not 0 <= cu[b] <= rows else cu[b + 1]
            raise IndexError(
                f"{op_name}(): cu_seq_lens holds {bad}; expected values in [0, {rows}] "
                "(dst.shape[0])"
            )
        if length < 0:
            raise ValueError(
                f"{op_name}(): cu_seq_lens decreases at index {b + 1} ({cu[b]} then "
                f"{cu[b + 1]}); expected non-decreasing cumulative sequence lengths"
            )
        if start < 0:
            raise IndexError(f"{op_name}(): seq_starts holds {start}; expected values >= 0")
        if length == 0:
            continue
        last = (start + length - 1) // block_size
        if last >= max_blocks:
            origin = "" if seq_starts is None else f"from seq_starts {start} "
            raise IndexError(
                f"{op_name}(): sequence {b} ({length} tokens by cu_seq_lens {origin}in "
                f"blocks of {block_size}) reads block_table column {last}; block_table "
                f"has {max_blocks} columns"
            )
        reads.append((b, start // block_size, last))
    if not reads:
        return a
    if batch * max_blocks <= 4096:
        table = block_table.tolist()
        ids = [i for b, first, last in reads for i in table[b][first : last + 1]]
        low, high = min(ids), max(ids)
    else:
        b, first, last = (torch.tensor(v) for v in zip(*reads, strict=True))
        columns = torch.arange(max_blocks)
        read = (columns >= first[:, None]) & (columns <= last[:, None])
        low, high = (int(v) for v in torch.aminmax(block_table[b][read]))
    if low < 0 or high >= num_blocks:
        raise IndexError(
            f"{op_name}(): block_table holds {low if low < 0 else high} where a sequence "
            f"reads it; expected block ids in [0, {num_blocks}) (src_cache.shape[0])"
        )
    return a


def _bind_gather(plan: _GatherPlan | None, a: Args) -> KernelBinding | Launch:
    if plan is None:
        return skip
    src_cache = a.src_cache
    tuned_for = _runtime.tuning_of(src_cache)
    spec = gather_kv_spec(plan.element_size, plan.dequant, plan.width, tuned_for)
    prepare = None
    if a.block_table.is_cpu:
        prepare = functools.partial(_check_gather_data, plan.num_blocks, plan.block_size, plan.rows)
    return bind_kernel(
        spec,
        src_cache,
        -(-plan.rows // gather_rows(tuned_for)),
        prepare=prepare,
        rows=plan.rows,
        batch=plan.batch,
        num_blocks=plan.num_blocks,
        block_size=plan.block_size,
        max_blocks=plan.max_blocks,
        block_table_stride=plan.block_table_stride,
        cache_block_stride=plan.cache_block_stride,
        cache_page_stride=plan.cache_page_stride,
        dst_token_stride=plan.dst_token_stride,
    )


@op(bind=_bind_gather, mutates=("dst",))
def gather_cache(
    src_cache: torch.Tensor,
    dst: torch.Tensor,
    block_table: torch.Tensor,
    cu_seq_lens: torch.Tensor,
    seq_starts: torch.Tensor | None = None,
    scale: torch.Tensor | None = None,
) -> _GatherPlan | None:
    """Gathers each sequence's tokens from the paged cache src_cache [num_blocks,
    block_size, *entry] into dst [tokens, *entry], in place: the inverse of the store.

    Sequence b (batch = block_table.shape[0]) fills dst rows cu_seq_lens[b] ..
    cu_seq_lens[b + 1] - 1; its i-th row is its token pos = seq_starts[b] + i (0 + i
    without seq_starts), read at block block_table[b, pos // block_size], page
    pos % block_size. So seq_starts is a token offset: vLLM's
    gather_and_maybe_dequant_cache reads it so, while vLLM's gather_cache rounds it
    down to a whole block (compat.vllm.gather_cache does that rounding). Rows of dst
    outside every sequence are left as they are.

    src_cache: float32/float16/bfloat16/float8_e4m3fn/float8_e5m2/uint8, any block
    and page strides, the entry (dimensions 2..) contiguous (vLLM's MLA cache
    [num_blocks, block_size, kv_lora_rank + pe_dim], or a flash-layout K or V cache
    [num_blocks, block_size, heads, head_size]). dst: entry shape src_cache's, any
    row stride, the entry contiguous; it must not overlap src_cache. block_table:
    int32 [batch, max_blocks], unit column stride; cu_seq_lens: int32 [batch + 1],
    contiguous; seq_starts: int32 [batch], contiguous, or None.

    dst of src_cache's dtype: a copy, bit for bit (scale must be None). A
    torch.float8_e4m3fn cache into float32/float16/bfloat16 dst dequantizes:
    dst = (float(x) * scale) in float32, rounded once to dst's dtype (vLLM's
    gather_and_maybe_dequant_cache), scale float32, one value, on the cache's device.
    Other pairs (a float8_e5m2 or uint8 cache into a float dst) raise TypeError.

    On CPU tensors, cu_seq_lens outside [0, dst.shape[0]] or decreasing, a negative
    seq_starts, a sequence reaching past block_table's columns, or a block id it
    reads outside [0, num_blocks) raises (IndexError; ValueError for a decreasing
    cu_seq_lens) before anything is written. On an XPU they are not checked (that
    would wait for the device): such rows are left unwritten, and nothing is read
    or written out of bounds.
    """
    name = "gather_cache"
    check_tensor(name, "src_cache", src_cache)
    if src_cache.dtype not in _GATHER_DTYPES:
        raise TypeError(
            f"{name}(): src_cache has dtype {src_cache.dtype}; expected one of "
            f"{_GATHER_DTYPE_NAMES}"
        )
    shape, strides = src_cache.shape, src_cache.stride()
    if src_cache.dim() < 3:
        raise ValueError(
            f"{name}(): src_cache has shape {tuple(shape)}; expected [num_blocks, "
            "block_size, *entry]"
        )
    _check_entry(name, "src_cache", shape[2:], strides[2:])
    num_blocks, block_size = shape[0], shape[1]
    if block_size == 0:
        raise ValueError(f"{name}(): src_cache has block_size 0 (shape {tuple(shape)})")
    check_tensor(name, "dst", dst)
    check_same_device(name, "dst", dst, "src_cache", src_cache)
    if dst.dim() != src_cache.dim() - 1 or dst.shape[1:] != shape[2:]:
        raise ValueError(
            f"{name}(): dst has shape {tuple(dst.shape)}; expected [tokens, "
            f"{', '.join(map(str, shape[2:]))}] (src_cache's entry)"
        )
    _check_entry(name, "dst", dst.shape[1:], dst.stride()[1:])
    width = math.prod(shape[2:])
    rows, dst_stride = dst.shape[0], dst.stride(0)
    check_own_memory(name, "dst", dst)
    dequant = None
    if dst.dtype != src_cache.dtype:
        dequant = BY_TORCH.get(dst.dtype)
        if src_cache.dtype != _FP8 or dequant is None:
            raise TypeError(
                f"{name}(): dst has dtype {dst.dtype} but src_cache has {src_cache.dtype}; "
                "expected src_cache's (a copy) or, from a torch.float8_e4m3fn cache, "
                f"one of {FLOAT_DTYPE_NAMES} (dequantized with scale)"
            )
    _check_index(name, "block_table", block_table, src_cache)
    if block_table.dim() != 2:
        raise ValueError(
            f"{name}(): block_table has shape {tuple(block_table.shape)}; expected "
            "[batch, max_blocks]"
        )
    check_unit_last_stride(name, "block_table", block_table.shape, block_table.stride())
    batch, max_blocks = block_table.shape
    _check_index(name, "cu_seq_lens", cu_seq_lens, src_cache)
    check_shape(name, "cu_seq_lens", cu_seq_lens.shape, (batch + 1,), "block_table's batch + 1")
    if batch > 0 and cu_seq_lens.stride(0) != 1:
        raise ValueError(
            f"{name}(): cu_seq_lens has strides {cu_seq_lens.stride()}; expected contiguous"
        )
    if seq_starts is not None:
        _check_index(name, "seq_starts", seq_starts, src_cache)
        check_shape(name, "seq_starts", seq_starts.shape, (batch,), "block_table's batch")
        if batch > 1 and seq_starts.stride(0) != 1:
            raise ValueError(
                f"{name}(): seq_starts has strides {seq_starts.stride()}; expected contiguous"
            )
    if dequant is None and scale is not None:
        raise ValueError(
            f"{name}(): scale is given but dst has src_cache's dtype {dst.dtype} (a copy); "
            "a scale goes with a float dst from a torch.float8_e4m3fn cache only"
        )
    if dequant is not None and scale is None:
        raise ValueError(
            f"{name}(): dst is {dst.dtype} from a torch.float8_e4m3fn cache; pass scale= "
            "(float32, one value) to dequantize"
        )
    _check_scales(name, dequant is not None, "src_cache", src_cache, (("scale", scale),))
    if rows == 0 or batch == 0 or width == 0:
        return None
    return _GatherPlan(
        src_cache.element_size(),
        dequant,
        width,
        rows,
        batch,
        num_blocks,
        block_size,
        max_blocks,
        block_table.stride(0),
        strides[0],
        strides[1],
        dst_stride,
    )
