"""sycl_kernels.ops.routing: MoE routing, each token's top-k experts (kernels/moe/routing.hpp).

One op, ``moe_topk``, covers the engines' routing kernels (softmax top-k, sigmoid
top-k with a correction bias, DeepSeek-V3's grouped top-k); compat/vllm.py and
compat/sgl_kernel.py map their calls onto it. Per token (a row of router logits):

1. scores: ``softmax``, ``sigmoid`` or ``none`` (the logits as given) in float32;
2. keys: score + correction_bias (the bias ranks experts; it never enters a weight);
3. grouped (``num_expert_group``): the experts split into groups of consecutive
   experts, each group scored by its best key (``max``) or the sum of its two best
   (``top2_sum``); only the experts of the ``topk_group`` best groups are selectable;
4. the ``topk`` selectable experts with the largest keys, in descending key order;
5. weights: their unbiased scores, times ``routed_scaling_factor / sum`` with
   ``renormalize`` (sum: of the chosen scores, when positive) or times
   ``routed_scaling_factor``: renormalization comes first, the factor applies either way.

Ties: every comparison (experts, and groups) ranks the lower index first, as
torch.topk does on CPU for equal values and as the engines' kernels break them. A NaN
key ranks below every number (-inf); torch.topk would rank it first.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .._dtypes import DType
from ..specs.routing import (
    GROUP_SCORINGS,
    MAX_EXPERTS,
    MAX_GROUPS,
    MAX_TOPK,
    ROUTE_TOKENS,
    SCORINGS,
    moe_topk_spec,
)
from ._checks import (
    check_bool,
    check_float32_or_dtype_of,
    check_float_dtype,
    check_int,
    check_number,
    check_own_memory,
    check_same_device,
    check_shape,
    check_tensor,
    check_unit_last_stride,
    tensor_meta,
)
from ._launch import KernelBinding, Launch, bind_kernel, skip
from ._op import op
from ._schema import Args


class Plan(NamedTuple):
    dtype: DType
    bias_dtype: DType
    tokens: int
    experts: int
    topk: int
    scoring: str
    groups: int
    topk_group: int
    group_scoring: str
    gating_stride: int
    weights_stride: int
    ids_stride: int


def _check_output(
    op: str, name: str, t: torch.Tensor | None, dtype: torch.dtype, like: torch.Tensor, shape
) -> int | None:
    """The row stride of a given output, or None."""
    if t is None:
        return None
    out_shape, strides = tensor_meta(op, name, t)
    check_same_device(op, name, t, "gating_output", like)
    if t.dtype != dtype:
        raise TypeError(f"{op}(): {name} has dtype {t.dtype}; expected {dtype}")
    check_shape(op, name, out_shape, shape, "[tokens, topk]")
    check_unit_last_stride(op, name, out_shape, strides)
    check_own_memory(op, name, t)
    return strides[0]


def _new_outputs(a: Args) -> tuple:
    shape, device = (a.gating_output.shape[0], a.topk), a.gating_output.device
    weights = torch.empty(shape, dtype=torch.float32, device=device)
    ids = torch.empty(shape, dtype=torch.int32, device=device)
    return weights, ids


def _bind(plan: Plan, a: Args) -> KernelBinding | Launch:
    if plan.tokens == 0:
        return skip
    spec = moe_topk_spec(
        plan.dtype,
        plan.bias_dtype,
        plan.experts,
        plan.topk,
        plan.scoring,
        plan.groups,
        plan.topk_group,
        plan.group_scoring,
    )
    return bind_kernel(
        spec,
        a.gating_output,
        -(-plan.tokens // ROUTE_TOKENS),
        tokens=plan.tokens,
        gating_stride=plan.gating_stride,
        renormalize=int(a.renormalize),
        routed_scaling_factor=float(a.routed_scaling_factor),
        weights_stride=plan.weights_stride,
        ids_stride=plan.ids_stride,
    )


@op(bind=_bind, new_output=_new_outputs, outputs=("topk_weights", "topk_ids"))
def moe_topk(
    gating_output: torch.Tensor,
    topk: int,
    *,
    scoring: str = "softmax",
    correction_bias: torch.Tensor | None = None,
    renormalize: bool = False,
    num_expert_group: int | None = None,
    topk_group: int | None = None,
    group_scoring: str | None = None,
    routed_scaling_factor: float = 1.0,
    topk_weights: torch.Tensor | None = None,
    topk_ids: torch.Tensor | None = None,
) -> Plan:
    """Each token's top-k experts: (topk_weights float32 [tokens, topk], topk_ids int32
    [tokens, topk]), in descending order of score + correction_bias (module doc).

    gating_output: router logits [tokens, experts] float32/float16/bfloat16 (experts 1 to
    1024), unit last stride. topk: 1 to min(experts, 32). scoring: "softmax",
    "sigmoid" or "none" (the scores as given, e.g. probabilities already).
    correction_bias: optional [experts], float32 or gating_output's dtype, added to the
    scores for the selection only (DeepSeek-V3); the weights are the unbiased scores.
    num_expert_group / topk_group: grouped top-k (both or neither): experts split into
    num_expert_group (at most 32) groups of consecutive experts, the topk_group best
    kept; group_scoring: "max" (a group's best key) or "top2_sum" (its two best);
    None picks vLLM's rule, "top2_sum" with a correction_bias and "max" without.
    renormalize: weights divided by their sum (if positive); routed_scaling_factor
    multiplies them either way (after renormalizing). topk_weights / topk_ids:
    optional outputs (both or neither) of those dtypes and shape, unit last stride;
    None returns new contiguous ones. Ties rank the lower expert (and group) index
    first. Not differentiable.
    """
    name = "moe_topk"
    shape, strides = tensor_meta(name, "gating_output", gating_output)
    dtype = check_float_dtype(name, "gating_output", gating_output)
    if len(shape) != 2:
        raise ValueError(
            f"{name}(): gating_output has shape {tuple(shape)}; expected [tokens, experts]"
        )
    check_unit_last_stride(name, "gating_output", shape, strides)
    tokens, experts = shape
    if not 1 <= experts <= MAX_EXPERTS:
        raise ValueError(
            f"{name}(): gating_output has {experts} experts; expected 1 to {MAX_EXPERTS}"
        )
    check_int(name, "topk", topk, minimum=1)
    if topk > min(experts, MAX_TOPK):
        raise ValueError(
            f"{name}(): topk is {topk}; expected at most {min(experts, MAX_TOPK)} "
            f"(the experts, and {MAX_TOPK})"
        )
    if not isinstance(scoring, str):
        raise TypeError(f"{name}(): scoring must be a str, got {type(scoring).__name__}")
    if scoring not in SCORINGS:
        raise ValueError(f"{name}(): scoring is {scoring!r}; expected one of {tuple(SCORINGS)}")
    bias_dtype = dtype
    if correction_bias is not None:
        check_tensor(name, "correction_bias", correction_bias)
        bias_dtype = check_float32_or_dtype_of(
            name, "correction_bias", correction_bias, "gating_output", gating_output
        )
        check_same_device(name, "correction_bias", correction_bias, "gating_output", gating_output)
        check_shape(name, "correction_bias", correction_bias.shape, (experts,), "[experts]")
        check_unit_last_stride(
            name, "correction_bias", correction_bias.shape, correction_bias.stride()
        )
    check_bool(name, "renormalize", renormalize)
    if (num_expert_group is None) != (topk_group is None):
        raise ValueError(f"{name}(): give num_expert_group and topk_group both, or neither")
    groups = kept = 1
    if num_expert_group is not None:
        check_int(name, "num_expert_group", num_expert_group, minimum=1)
        check_int(name, "topk_group", topk_group, minimum=1)
        if num_expert_group > MAX_GROUPS or experts % num_expert_group:
            raise ValueError(
                f"{name}(): num_expert_group is {num_expert_group}; expected a divisor of the "
                f"{experts} experts, at most {MAX_GROUPS}"
            )
        if topk_group > num_expert_group:
            raise ValueError(
                f"{name}(): topk_group is {topk_group}; expected at most num_expert_group "
                f"({num_expert_group})"
            )
        selectable = topk_group * (experts // num_expert_group)
        if topk > selectable:
            raise ValueError(
                f"{name}(): topk is {topk}, more than the {selectable} experts of the "
                "topk_group groups kept"
            )
        groups, kept = num_expert_group, topk_group
    if group_scoring is None:
        group_scoring = "top2_sum" if correction_bias is not None else "max"
    elif not isinstance(group_scoring, str):
        raise TypeError(
            f"{name}(): group_scoring must be a str, got {type(group_scoring).__name__}"
        )
    elif group_scoring not in GROUP_SCORINGS:
        raise ValueError(
            f"{name}(): group_scoring is {group_scoring!r}; expected one of {GROUP_SCORINGS}"
        )
    if groups > 1 and group_scoring == "top2_sum" and experts // groups < 2:
        raise ValueError(f"{name}(): group_scoring 'top2_sum' needs groups of 2 experts or more")
    if groups == 1:
        group_scoring = "max"
    check_number(name, "routed_scaling_factor", routed_scaling_factor)
    out_shape = (tokens, topk)
    weights_stride = _check_output(
        name, "topk_weights", topk_weights, torch.float32, gating_output, out_shape
    )
    ids_stride = _check_output(name, "topk_ids", topk_ids, torch.int32, gating_output, out_shape)
    return Plan(
        dtype,
        bias_dtype,
        tokens,
        experts,
        topk,
        scoring,
        groups,
        kept,
        group_scoring,
        strides[0],
        topk if weights_stride is None else weights_stride,
        topk if ids_stride is None else ids_stride,
    )
