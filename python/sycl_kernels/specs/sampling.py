"""sycl_kernels.specs.sampling: specs of the top-k / top-p / min-p renormalization and
sampling kernels (kernels/sampling/sampling.hpp)."""

from __future__ import annotations

import functools

from .spec import KernelSpec, Param
from .variants import manifest_op

# A row's work-items: one sub-group (kernels/sampling/sampling.hpp kSampleLanes).
SAMPLE_LANES = 16

# The integer types a per-row top_k and the indices may have: short name -> C type.
INDEX_TYPES = {"i32": "int32_t", "i64": "int64_t"}


def _index_type(short: str) -> str:
    if short not in INDEX_TYPES:
        raise ValueError(f"index type {short!r}: expected one of {', '.join(INDEX_TYPES)}")
    return INDEX_TYPES[short]


def _rows_spec(name: str, function: str, template_args: tuple[str, ...], params) -> KernelSpec:
    return KernelSpec(
        name=name,
        header="sampling/sampling.hpp",
        function=function,
        template_args=template_args,
        params=(
            Param("probs", "const float*"),
            Param("probs_stride", "int64_t"),
            Param("vocab", "int32_t"),
            *params,
        ),
        group_size=SAMPLE_LANES,
        sub_group_size=SAMPLE_LANES,
    )


@manifest_op("top_k_renorm_probs")
@functools.cache
def top_k_renorm_spec(top_k_type: str) -> KernelSpec:
    """Top-k renormalization of float32 rows; a per-row top_k of `top_k_type` (i32, i64)."""
    k = _index_type(top_k_type)
    return _rows_spec(
        f"top_k_renorm_probs_k{top_k_type}",
        "sycl_kernels::top_k_renorm_probs",
        (k,),
        (
            Param("top_k", "int32_t"),
            Param("top_k_per_row", f"const {k}*"),
            Param("out", "float*"),
            Param("out_stride", "int64_t"),
        ),
    )


@manifest_op("top_p_renorm_probs")
@functools.cache
def top_p_renorm_spec() -> KernelSpec:
    """Top-p renormalization of float32 rows."""
    return _rows_spec(
        "top_p_renorm_probs",
        "sycl_kernels::top_p_renorm_probs",
        (),
        (
            Param("top_p", "float"),
            Param("top_p_per_row", "const float*"),
            Param("out", "float*"),
            Param("out_stride", "int64_t"),
        ),
    )


@manifest_op("sample_from_probs")
@functools.cache
def sample_spec(joint: bool, top_k_type: str, indices_type: str) -> KernelSpec:
    """Sampling from float32 rows filtered by top-k, top-p (joint, or top-k first) and
    min-p; a per-row top_k of `top_k_type` and indices of `indices_type` (i32, i64)."""
    k, i = _index_type(top_k_type), _index_type(indices_type)
    order = "joint" if joint else "kfirst"
    return _rows_spec(
        f"sample_from_probs_{order}_k{top_k_type}_i{indices_type}",
        "sycl_kernels::sample_from_probs",
        (str(joint).lower(), k, i),
        (
            Param("indices", f"const {i}*"),
            Param("top_k", "int32_t"),
            Param("top_k_per_row", f"const {k}*"),
            Param("top_p", "float"),
            Param("top_p_per_row", "const float*"),
            Param("min_p", "float"),
            Param("min_p_per_row", "const float*"),
            Param("seed", "const int64_t*"),
            Param("seed_stride", "int64_t"),
            Param("seed_per_row", "int32_t"),
            Param("out", "int32_t*"),
            Param("out_stride", "int64_t"),
        ),
    )
