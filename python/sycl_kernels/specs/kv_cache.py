"""sycl_kernels.specs.kv_cache: specs of the paged KV-cache store and gather
(kernels/cache/store.hpp, kernels/cache/gather.hpp)."""

from __future__ import annotations

import functools

from .._dtypes import DType
from .spec import KernelSpec, Param

_FP8 = "sycl_kernels::fp8e4m3"


def _stream_params(src: str, cache: str, scale: str, t: str, c: str) -> tuple[Param, ...]:
    return (
        Param(src, f"const {t}*"),
        Param(f"{src}_token_stride", "int64_t"),
        Param(f"{src}_head_stride", "int64_t"),
        Param(cache, f"{c}*"),
        *(Param(f"{cache}_{dim}_stride", "int64_t") for dim in ("block", "page", "head", "x")),
        Param(scale, "const float*"),
    )


def store_threads(width: int, tuned_for: str) -> int:
    """Work-items of a row's work-group: cpu 16 (one SIMD vector; a work-group of the
    CPU device costs about as much to start as a row's copy), gpu one per element up
    to 256."""
    if tuned_for == "cpu":
        return 16
    return min(256, 1 << (max(1, width) - 1).bit_length())


@functools.cache
def store_kv_spec(
    dtype: DType,
    fp8: bool,
    width_a: int,
    width_b: int,
    x_a: int,
    x_b: int,
    tuned_for: str,
) -> KernelSpec:
    """The store of rows of width_a (key, kv_c) and width_b (value, k_pe) elements of
    `dtype`, into a cache of dtype (or fp8 e4m3, scaled); x_a / x_b: elements
    contiguous in the cache (the width itself for the flash layout)."""
    t = dtype.cpp_type
    c = _FP8 if fp8 else t
    threads = store_threads(max(width_a, width_b), tuned_for)
    split = "" if (x_a, x_b) == (width_a, width_b) else f"_x{x_a}_{x_b}"
    widths = f"d{width_a}" if width_a == width_b else f"d{width_a}_{width_b}"
    return KernelSpec(
        name=(
            f"store_kv_{dtype.short_name}_{'fp8e4m3' if fp8 else 'same'}_{widths}{split}"
            f"_{tuned_for}"
        ),
        header="cache/store.hpp",
        function="sycl_kernels::store_kv",
        template_args=(
            t,
            c,
            str(width_a),
            str(width_b),
            str(x_a),
            str(x_b),
            str(threads),
            str(fp8).lower(),
        ),
        params=(
            Param("slot_mapping", "const int64_t*"),
            Param("rows", "int64_t"),
            Param("rows_per_group", "int64_t"),
            Param("num_heads", "int64_t"),
            Param("num_slots", "int64_t"),
            Param("block_size", "int64_t"),
            *_stream_params("key", "key_cache", "k_scale", t, c),
            *_stream_params("value", "value_cache", "v_scale", t, c),
        ),
        group_size=threads,
    )


# The gather's copy: one unsigned type per element size, bit for bit.
GATHER_COPY_TYPES = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t"}


def gather_rows(tuned_for: str) -> int:
    """Destination rows a work-group gathers one after another: cpu 8 (fewer
    work-groups to start: 8 % faster than one at 256 rows of 576), gpu 1."""
    return 8 if tuned_for == "cpu" else 1


@functools.cache
def gather_kv_spec(
    element_size: int, dequant: DType | None, width: int, tuned_for: str
) -> KernelSpec:
    """The gather of rows of `width` elements (kernels/cache/gather.hpp): a copy of
    elements of `element_size` bytes, or with `dequant` (the destination's dtype)
    fp8 e4m3 values times a scale, rounded to it."""
    if dequant is None:
        c = t = GATHER_COPY_TYPES[element_size]
        types = f"b{8 * element_size}"
    else:
        c, t = _FP8, dequant.cpp_type
        types = f"fp8e4m3_{dequant.short_name}"
    threads = store_threads(width, tuned_for)
    rows = gather_rows(tuned_for)
    return KernelSpec(
        name=f"gather_kv_{types}_d{width}_{tuned_for}",
        header="cache/gather.hpp",
        function="sycl_kernels::gather_kv",
        template_args=(c, t, str(width), str(threads), str(rows), str(dequant is not None).lower()),
        params=(
            Param("src_cache", f"const {c}*"),
            Param("dst", f"{t}*"),
            Param("block_table", "const int32_t*"),
            Param("cu_seq_lens", "const int32_t*"),
            Param("seq_starts", "const int32_t*"),
            Param("scale", "const float*"),
            Param("rows", "int64_t"),
            Param("batch", "int64_t"),
            Param("num_blocks", "int64_t"),
            Param("block_size", "int64_t"),
            Param("max_blocks", "int64_t"),
            Param("block_table_stride", "int64_t"),
            Param("cache_block_stride", "int64_t"),
            Param("cache_page_stride", "int64_t"),
            Param("dst_token_stride", "int64_t"),
        ),
        group_size=threads,
    )


def store_rows_per_group(tuned_for: str) -> int:
    """(token, head) rows a work-group stores one after another: cpu 128 (a work-group
    costs about a row's copy to start; 16 tokens of 8 heads are then one work-group,
    which the launch waits on by polling: 1.2x faster at 16 tokens, 1.25x at 4096
    than a work-group a row), gpu 1."""
    return 128 if tuned_for == "cpu" else 1
