"""sycl_kernels.jit.rope: specs of the rotary embedding kernels (kernels/rope/rope.hpp)."""

from __future__ import annotations

import functools

from .._dtypes import DType
from .spec import KernelSpec, Param

# Work-items per head: one per rotated pair, at most this many: 64 pairs cover a
# rotary width of 128 (the widest in common models) in one step; wider ones loop.
_MAX_GROUP_SIZE = 64

POSITION_TYPES = {"i32": "int32_t", "i64": "int64_t"}


def _head_params(tensor: str) -> tuple[Param, ...]:
    return tuple(Param(f"{tensor}_{dim}_stride", "int64_t") for dim in ("batch", "seq", "head"))


@functools.cache
def rope_spec(
    dtype: DType,
    head_dim: int,
    rotary_dim: int,
    neox: bool,
    positions: str,
    store_kv: bool,
    cache: DType | None = None,
) -> KernelSpec:
    """cache: the cos/sin cache's dtype; None or float32 is a float32 cache."""
    t = dtype.cpp_type
    cache_type = "float" if cache is None or cache.size == 4 else cache.cpp_type
    params = [
        Param("positions", f"const {POSITION_TYPES[positions]}*"),
        Param("positions_batch_stride", "int64_t"),
        Param("positions_seq_stride", "int64_t"),
        Param("seq_len", "int64_t"),
        Param("q", f"{t}*"),
        *_head_params("q"),
        Param("num_q_heads", "int64_t"),
        Param("k", f"{t}*"),
        *_head_params("k"),
        Param("num_k_heads", "int64_t"),
        Param("cos_sin_cache", f"const {cache_type}*"),
    ]
    if store_kv:
        params += [
            Param("v", f"const {t}*"),
            *_head_params("v"),
            Param("k_cache", f"{t}*"),
            Param("v_cache", f"{t}*"),
            Param("out_loc", "const int64_t*"),
        ]
    style = "neox" if neox else "gptj"
    cache_suffix = "" if cache_type == "float" else f"_c{cache.short_name}"
    threads = min(_MAX_GROUP_SIZE, 1 << (rotary_dim // 2 - 1).bit_length())
    return KernelSpec(
        name=(
            f"rope{'_kv' if store_kv else ''}_{dtype.short_name}_d{head_dim}_r{rotary_dim}"
            f"_{style}_{positions}{cache_suffix}"
        ),
        header="rope/rope.hpp",
        function="sycl_kernels::rope_store_kv" if store_kv else "sycl_kernels::rope",
        template_args=(
            t,
            cache_type,
            POSITION_TYPES[positions],
            str(head_dim),
            str(rotary_dim),
            str(neox).lower(),
            str(threads),
        ),
        params=tuple(params),
        group_size=threads,
    )
