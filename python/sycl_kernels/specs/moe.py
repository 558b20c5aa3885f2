"""sycl_kernels.specs.moe: specs of the MoE kernels (kernels/moe/).

moe_align_block_size: one work-group of 256 work-items, a variant per index dtype.
moe_sum: one work-group of 256 work-items a token, a variant per (dtype, index
dtype); topk and hidden are run-time values (correctness first: no row tuning yet).
"""

from __future__ import annotations

import functools

from .._dtypes import BY_NAME
from .spec import KernelSpec, Param

MOE_THREADS = 256
# The largest num_experts the align kernel takes (kernels/moe/align.hpp kMaxExperts).
MAX_EXPERTS = 1024
INDEX_TYPES = {"i32": "int32_t", "i64": "int64_t"}


@functools.cache
def moe_align_block_size_spec(index: str) -> KernelSpec:
    """index: i32 or i64, the dtype of topk_ids."""
    ctype = INDEX_TYPES[index]
    return KernelSpec(
        name=f"moe_align_block_size_{index}",
        header="moe/align.hpp",
        function="sycl_kernels::moe_align_block_size",
        template_args=(ctype, str(MOE_THREADS)),
        params=(
            Param("topk_ids", f"const {ctype}*"),
            Param("numel", "int64_t"),
            Param("expert_map", "const int32_t*"),
            Param("num_experts", "int32_t"),
            Param("block_size", "int32_t"),
            Param("sorted_token_ids", "int32_t*"),
            Param("sorted_size", "int64_t"),
            Param("expert_ids", "int32_t*"),
            Param("expert_ids_size", "int64_t"),
            Param("num_tokens_post_padded", "int32_t*"),
        ),
        group_size=MOE_THREADS,
    )


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
            Param("topk", "int32_t"),
            Param("hidden", "int32_t"),
            Param("scale", "float"),
        ),
        group_size=MOE_THREADS,
    )
