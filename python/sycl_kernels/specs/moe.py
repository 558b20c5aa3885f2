"""sycl_kernels.specs.moe: specs of the MoE kernels (kernels/moe/).

moe_align_block_size: three kernels (count, scan, scatter), the first and last a
work-item a chunk of slots in work-groups of 16, the scan one work-group of 256; a
variant per index dtype.
moe_sum: one work-group of 256 work-items a token, a variant per (dtype, index
dtype); topk and hidden are run-time values (correctness first: no row tuning yet).
"""

from __future__ import annotations

import functools

from .._dtypes import BY_NAME
from .spec import KernelSpec, Param
from .variants import manifest_op

MOE_THREADS = 256
# Work-items a work-group of the align kernels that take a chunk of slots each.
ALIGN_CHUNK_GROUP = 16
# The largest num_experts moe_align_block_size takes (engines route at most 512).
MAX_EXPERTS = 1024
INDEX_TYPES = {"i32": "int32_t", "i64": "int64_t"}


# The align kernels' parameters over the slots (kernels/moe/align.hpp).
_SLOT_PARAMS = (
    Param("numel", "int64_t"),
    Param("expert_map", "const int32_t*"),
    Param("num_experts", "int32_t"),
    Param("chunk_size", "int64_t"),
    Param("chunks", "int64_t"),
    Param("scratch", "int32_t*"),
)


@manifest_op("moe_align_count")
@functools.cache
def moe_align_count_spec(index: str) -> KernelSpec:
    """index: i32 or i64, the dtype of topk_ids. A work-item a chunk of slots."""
    ctype = INDEX_TYPES[index]
    return KernelSpec(
        name=f"moe_align_count_{index}",
        header="moe/align.hpp",
        function="sycl_kernels::moe_align_count",
        template_args=(ctype,),
        params=(Param("topk_ids", f"const {ctype}*"), *_SLOT_PARAMS),
        group_size=ALIGN_CHUNK_GROUP,
    )


@manifest_op("moe_align_scan")
@functools.cache
def moe_align_scan_spec() -> KernelSpec:
    """One work-group of MOE_THREADS work-items, a round of them per MOE_THREADS experts."""
    return KernelSpec(
        name="moe_align_scan",
        header="moe/align.hpp",
        function="sycl_kernels::moe_align_scan",
        template_args=(str(MOE_THREADS),),
        params=(
            Param("numel", "int64_t"),
            Param("num_experts", "int32_t"),
            Param("block_size", "int32_t"),
            Param("chunks", "int64_t"),
            Param("scratch", "int32_t*"),
            Param("sorted_token_ids", "int32_t*"),
            Param("sorted_size", "int64_t"),
            Param("expert_ids", "int32_t*"),
            Param("expert_ids_size", "int64_t"),
            Param("num_tokens_post_padded", "int32_t*"),
        ),
        group_size=MOE_THREADS,
    )


@manifest_op("moe_align_scatter")
@functools.cache
def moe_align_scatter_spec(index: str) -> KernelSpec:
    """index: i32 or i64, the dtype of topk_ids. A work-item a chunk of slots."""
    ctype = INDEX_TYPES[index]
    return KernelSpec(
        name=f"moe_align_scatter_{index}",
        header="moe/align.hpp",
        function="sycl_kernels::moe_align_scatter",
        template_args=(ctype,),
        params=(
            Param("topk_ids", f"const {ctype}*"),
            *_SLOT_PARAMS,
            Param("sorted_token_ids", "int32_t*"),
            Param("sorted_size", "int64_t"),
        ),
        group_size=ALIGN_CHUNK_GROUP,
    )


@manifest_op("moe_sum")
@functools.cache
def moe_sum_spec(dtype: str, index: str) -> KernelSpec:
    """dtype: the short name of x's dtype; index: i32 or i64, the dtype of topk_ids
    (i32 when there are none)."""
    d = BY_NAME[dtype]
    ctype = INDEX_TYPES[index]
    return KernelSpec(
        name=f"moe_sum_{dtype}_{index}",
        header="moe/sum.hpp",
        function="sycl_kernels::moe_sum",
        template_args=(d.cpp_type, ctype, str(MOE_THREADS)),
        params=(
            Param("x", f"const {d.cpp_type}*"),
            Param("x_token", "int64_t"),
            Param("x_k", "int64_t"),
            Param("out", f"{d.cpp_type}*"),
            Param("out_token", "int64_t"),
            Param("topk_ids", f"const {ctype}*"),
            Param("expert_map", "const int32_t*"),
            Param("map_size", "int64_t"),
            Param("topk", "int64_t"),
            Param("hidden", "int64_t"),
            Param("scale", "float"),
        ),
        group_size=MOE_THREADS,
    )
