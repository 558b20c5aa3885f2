"""sycl_kernels.specs.rope: specs of the rotary embedding kernels (kernels/rope/), QK-norm's too."""

from __future__ import annotations

import functools

from .._dtypes import BY_NAME, DType
from .norm import norm_weight
from .spec import KernelSpec, Param
from .variants import manifest_op

# gpu: work-items per head, one per rotated pair, at most this many: 64 pairs cover a
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
    return [*params, Param("total_heads", "int64_t")]


def _cpu_shape(head_dim: int, rotary_dim: int, tuned_for: str) -> bool:
    """Whether the cpu group shape applies: every loop over a head then takes whole
    steps of 16 work-items (a partial last step risks the OpenCL CPU backend crash
    row_group_size avoids)."""
    return tuned_for == "cpu" and rotary_dim // 2 % 16 == 0 and head_dim % 16 == 0


def heads_per_group(head_dim: int, rotary_dim: int, tuned_for: str) -> int:
    """Heads a work-group of rope.hpp's and qknorm_rope.hpp's kernels takes, one after
    another.

    cpu: 4, with 16 work-items (one SIMD vector): a work-group of the CPU device
    costs about as much to start as a head's work, and qknorm_rope's sum then stays
    in one sub-group (kernels/common/reduce.hpp). Against one head of 64 work-items
    a group (compare.py, 16 to 4096 tokens x (32+8) heads of 128): apply_rope
    0.68-0.92x the time, qknorm_rope 0.72-0.88x fp32 and 0.86-0.92x bf16. 16
    work-items at one head a group gave qknorm_rope only 0.93-0.96x, and 4 heads of
    64 work-items made bf16 qknorm_rope 1.13-1.32x slower.
    gpu, and heads the cpu shape does not divide: 1, with one work-item per pair.
    """
    return 4 if _cpu_shape(head_dim, rotary_dim, tuned_for) else 1


def _group_size(pairs: int, head_dim: int, rotary_dim: int, tuned_for: str) -> int:
    """Work-items of the work-group; a head's widest loop takes `pairs` steps of two
    elements (rope: the rotated pairs; qknorm_rope: every element is normalized)."""
    if _cpu_shape(head_dim, rotary_dim, tuned_for):
        return 16
    return min(_MAX_GROUP_SIZE, 1 << (pairs - 1).bit_length())


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
    cache: DType | None,
    tuned_for: str,
) -> KernelSpec:
    """cache: the cos/sin cache's dtype; None or float32 is a float32 cache."""
    cache_type = _cache_type(cache)
    threads = _group_size(rotary_dim // 2, head_dim, rotary_dim, tuned_for)
    return KernelSpec(
        name=(
            f"rope{'_kv' if store_kv else ''}"
            f"{_name_suffix(dtype, head_dim, rotary_dim, neox, positions, cache)}_{tuned_for}"
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
            str(heads_per_group(head_dim, rotary_dim, tuned_for)),
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
    cache: DType | None,
    tuned_for: str,
    gemma: bool = False,
    weight: str = "dtype",
) -> KernelSpec:
    """rope_spec's kernel after qknorm_spec's norm (kernels/rope/qknorm_rope.hpp); weight as
    qknorm_spec's (specs.norm.WEIGHT_KINDS)."""
    cache_type = _cache_type(cache)
    weight_type, weight_suffix = norm_weight(dtype, weight)
    threads = _group_size(head_dim // 2, head_dim, rotary_dim, tuned_for)
    return KernelSpec(
        name=(
            f"{'gemma_' if gemma else ''}qknorm_rope{'_kv' if store_kv else ''}"
            f"{_name_suffix(dtype, head_dim, rotary_dim, neox, positions, cache)}_{tuned_for}"
            f"{weight_suffix}"
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
            str(heads_per_group(head_dim, rotary_dim, tuned_for)),
        ),
        params=(
            *_rope_params(dtype, positions, cache_type, store_kv),
            Param("q_weight", f"const {weight_type}*"),
            Param("k_weight", f"const {weight_type}*"),
            Param("eps", "float"),
        ),
        group_size=threads,
    )


# The manifest's rope tables (kernels/variants.toml): a dtype by its short name.


@manifest_op("rope")
def _rope_variant(
    dtype: str,
    head_dim: int,
    rotary_dim: int,
    style: str,
    positions: str,
    store_kv: bool,
    tuned_for: str,
    cache: str = "fp32",
) -> KernelSpec:
    """cache: "fp32", or "dtype" for a cos/sin cache in the rows' own dtype."""
    return rope_spec(
        BY_NAME[dtype],
        head_dim,
        rotary_dim,
        style == "neox",
        positions,
        store_kv,
        BY_NAME[dtype if cache == "dtype" else cache],
        tuned_for,
    )


@manifest_op("qknorm_rope")
def _qknorm_rope_variant(
    dtype: str,
    head_dim: int,
    style: str,
    positions: str,
    store_kv: bool,
    tuned_for: str,
    cache: str = "fp32",
    gemma: bool = False,
    rotary_dim: int | None = None,
) -> KernelSpec:
    """As _rope_variant; gemma: the (1 + weight) norm; rotary_dim: head_dim unless given."""
    return qknorm_rope_spec(
        BY_NAME[dtype],
        head_dim,
        head_dim if rotary_dim is None else rotary_dim,
        style == "neox",
        positions,
        store_kv,
        BY_NAME[dtype if cache == "dtype" else cache],
        tuned_for,
        gemma,
    )
