"""sycl_kernels.jit.rope: specs of the rotary embedding kernels (kernels/rope/), QK-norm's too."""

from __future__ import annotations

import functools

from .._dtypes import DType
from .norm import norm_weight
from .spec import KernelSpec, Param

# Work-items per head: one per rotated pair, at most this many: 64 pairs cover a
# rotary width of 128 (the widest in common models) in one step; wider ones loop.
_MAX_GROUP_SIZE = 64

POSITION_TYPES = {"i32": "int32_t", "i64": "int64_t"}


def _head_params(tensor: str) -> tuple[Param, ...]:
    return tuple(Param(f"{tensor}_{dim}_stride", "int64_t") for dim in ("batch", "seq", "head"))


def _cache_type(cache: DType | None) -> str:
    """The cos/sin cache's C++ type: None or float32 is a float32 cache."""
    return "float" if cache is None or cache.size == 4 else cache.cpp_type


def _rope_params(dtype: DType, positions: str, cache_type: str, store_kv: bool) -> list[Param]:
    """The parameters of rope.hpp's rope / rope_store_kv, which qknorm_rope's begin with."""
    t = dtype.cpp_type
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
    return params


def _name_suffix(
    dtype: DType, head_dim: int, rotary_dim: int, neox: bool, positions: str, cache: DType | None
) -> str:
    cache_suffix = "" if _cache_type(cache) == "float" else f"_c{cache.short_name}"
    style = "neox" if neox else "gptj"
    return f"_{dtype.short_name}_d{head_dim}_r{rotary_dim}_{style}_{positions}{cache_suffix}"


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
    cache_type = _cache_type(cache)
    threads = min(_MAX_GROUP_SIZE, 1 << (rotary_dim // 2 - 1).bit_length())
    return KernelSpec(
        name=(
            f"rope{'_kv' if store_kv else ''}"
            f"{_name_suffix(dtype, head_dim, rotary_dim, neox, positions, cache)}"
        ),
        header="rope/rope.hpp",
        function="sycl_kernels::rope_store_kv" if store_kv else "sycl_kernels::rope",
        template_args=(
            dtype.cpp_type,
            cache_type,
            POSITION_TYPES[positions],
            str(head_dim),
            str(rotary_dim),
            str(neox).lower(),
            str(threads),
        ),
        params=tuple(_rope_params(dtype, positions, cache_type, store_kv)),
        group_size=threads,
    )


@functools.cache
def qknorm_rope_spec(
    dtype: DType,
    head_dim: int,
    rotary_dim: int,
    neox: bool,
    positions: str,
    store_kv: bool,
    cache: DType | None = None,
    gemma: bool = False,
    weight: str = "dtype",
) -> KernelSpec:
    """rope_spec's kernel after qknorm_spec's norm (kernels/rope/qknorm_rope.hpp); weight as
    qknorm_spec's (jit.norm.WEIGHT_KINDS)."""
    cache_type = _cache_type(cache)
    weight_type, weight_suffix = norm_weight(dtype, weight)
    # One work-item per rotated pair as rope's, sized by head_dim: every element is
    # normalized, rotated or not.
    threads = min(_MAX_GROUP_SIZE, 1 << (head_dim // 2 - 1).bit_length())
    return KernelSpec(
        name=(
            f"{'gemma_' if gemma else ''}qknorm_rope{'_kv' if store_kv else ''}"
            f"{_name_suffix(dtype, head_dim, rotary_dim, neox, positions, cache)}{weight_suffix}"
        ),
        header="rope/qknorm_rope.hpp",
        function=(
            "sycl_kernels::qknorm_rope_store_kv" if store_kv else "sycl_kernels::qknorm_rope"
        ),
        template_args=(
            dtype.cpp_type,
            weight_type,
            cache_type,
            POSITION_TYPES[positions],
            str(head_dim),
            str(rotary_dim),
            str(neox).lower(),
            str(gemma).lower(),
            str(threads),
        ),
        params=(
            *_rope_params(dtype, positions, cache_type, store_kv),
            Param("q_weight", f"const {weight_type}*"),
            Param("k_weight", f"const {weight_type}*"),
            Param("eps", "float"),
        ),
        group_size=threads,
    )
