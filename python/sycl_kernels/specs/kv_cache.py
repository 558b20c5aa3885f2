"""sycl_kernels.specs.kv_cache: specs of the paged KV-cache store (kernels/cache/store.hpp)."""

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
            Param("num_heads", "int64_t"),
            Param("num_slots", "int64_t"),
            Param("block_size", "int64_t"),
            *_stream_params("key", "key_cache", "k_scale", t, c),
            *_stream_params("value", "value_cache", "v_scale", t, c),
        ),
        group_size=threads,
    )
