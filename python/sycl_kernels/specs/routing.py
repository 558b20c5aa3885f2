"""sycl_kernels.specs.routing: specs of the MoE routing kernels (kernels/moe/routing.hpp)."""

from __future__ import annotations

import functools

from .._dtypes import BY_NAME, DType
from .spec import KernelSpec, Param
from .variants import manifest_op

# A token's work-items: one sub-group (kernels/moe/routing.hpp kRouteLanes).
ROUTE_LANES = 16
# Tokens a work-group: 4 sub-groups, 64 work-items. On the CPU device, 16 a work-group
# ran 16 tokens as one polled work-group: 22 us alone but 48-50 us between torch ops
# (bench), where 4 a work-group take 29 us; at 4096 tokens 4 and 16 are within noise
# (0.74-0.82 ms), one a work-group 0.80-0.87 ms.
ROUTE_TOKENS = 4

# The scoring functions, by name, as the kernel's kScoring numbers them.
SCORINGS = {"softmax": 0, "sigmoid": 1, "none": 2}

# The group scores: a group's best key, or the sum of its two best.
GROUP_SCORINGS = ("max", "top2_sum")

# The largest expert count and top-k the kernel is compiled for.
MAX_EXPERTS = 1024
MAX_TOPK = 32
# Groups are kept in a 32-bit mask (kernels/moe/routing.hpp).
MAX_GROUPS = 32


@functools.cache
def moe_topk_spec(
    dtype: DType,
    bias_dtype: DType,
    experts: int,
    topk: int,
    scoring: str,
    groups: int = 1,
    topk_group: int = 1,
    group_scoring: str = "max",
) -> KernelSpec:
    """The kernel taking the top `topk` of `experts` router scores (`scoring` of `dtype`
    logits; a `bias_dtype` correction bias), of the `topk_group` best of `groups`
    groups (groups 1: ungrouped) scored by `group_scoring`."""
    if scoring not in SCORINGS:
        raise ValueError(f"scoring {scoring!r}: expected one of {', '.join(SCORINGS)}")
    if group_scoring not in GROUP_SCORINGS:
        raise ValueError(f"group_scoring {group_scoring!r}: expected one of {GROUP_SCORINGS}")
    if groups == 1:
        topk_group, group_scoring = 1, "max"
    grouped = "" if groups == 1 else f"_g{groups}_{topk_group}_{group_scoring}"
    return KernelSpec(
        name=(
            f"moe_topk_{dtype.short_name}_b{bias_dtype.short_name}_e{experts}_k{topk}"
            f"_{scoring}{grouped}"
        ),
        header="moe/routing.hpp",
        function="sycl_kernels::moe_topk",
        template_args=(
            dtype.cpp_type,
            bias_dtype.cpp_type,
            str(experts),
            str(topk),
            str(SCORINGS[scoring]),
            str(groups),
            str(topk_group),
            str(group_scoring == "top2_sum").lower(),
        ),
        params=(
            Param("gating_output", f"const {dtype.cpp_type}*"),
            Param("tokens", "int64_t"),
            Param("gating_stride", "int64_t"),
            Param("correction_bias", f"const {bias_dtype.cpp_type}*"),
            Param("renormalize", "int32_t"),
            Param("routed_scaling_factor", "float"),
            Param("topk_weights", "float*"),
            Param("weights_stride", "int64_t"),
            Param("topk_ids", "int32_t*"),
            Param("ids_stride", "int64_t"),
        ),
        group_size=ROUTE_LANES * ROUTE_TOKENS,
        sub_group_size=ROUTE_LANES,
    )


@manifest_op("moe_topk")
def moe_topk_variant(
    dtype: str,
    experts: int,
    topk: int,
    scoring: str,
    bias_dtype: str | None = None,
    groups: int = 1,
    topk_group: int = 1,
    group_scoring: str = "max",
) -> KernelSpec:
    """A manifest row's kernel: dtypes by short name, bias_dtype that of the logits where
    there is no bias (as the op asks)."""
    return moe_topk_spec(
        BY_NAME[dtype],
        BY_NAME[bias_dtype or dtype],
        experts,
        topk,
        scoring,
        groups,
        topk_group,
        group_scoring,
    )
