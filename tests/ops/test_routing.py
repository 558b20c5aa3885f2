"""MoE routing (moe_topk) against the float64 torch reference (tests/references.py
moe_topk: softmax/sigmoid, torch.topk, vLLM's torch-native grouped_topk).

The kernel ranks float32 keys and the reference float64 ones, so the chosen experts
are checked as the top-k of the reference's keys to within TOL (a near tie may be
taken either way; with random logits there are hardly any), in descending order, and
the weights as the reference's formula on the kernel's ids. Deliberate ties check the
documented rule: the lower expert (and group) index first.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import sycl_kernels
import torch

from tests import references
from tests.ops import cases

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = 1e-5
TOKENS = 37

# (experts, topk) of the callers' models: Mixtral, Qwen1.5-MoE, DeepSeek-V2-Lite,
# Qwen3-MoE, DeepSeek-V3, and an odd size.
SHAPES = [(8, 2), (60, 4), (64, 6), (128, 8), (256, 8), (24, 1)]


def _logits(tokens: int, experts: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (2 * torch.randn(tokens, experts, generator=g)).to(dtype)


def assert_routes(
    got: tuple[torch.Tensor, torch.Tensor], logits: torch.Tensor, topk: int, **options: object
) -> None:
    """got = (weights, ids) against references.moe_topk(logits, topk, **options)."""
    weights, ids = got
    tokens, experts = logits.shape
    assert weights.dtype == torch.float32 and ids.dtype == torch.int32
    assert weights.shape == ids.shape == (tokens, topk)
    _, _, keys = references.moe_topk(logits, topk, **options)
    ids64 = ids.long()
    assert ((ids64 >= 0) & (ids64 < experts)).all(), "an id out of range"
    if topk > 1:
        assert (ids64.sort(dim=-1)[0].diff(dim=-1) != 0).all(), "an expert chosen twice"
    chosen = keys.gather(1, ids64)
    kth = keys.topk(topk, dim=-1)[0][:, -1:]
    assert (chosen >= kth - TOL).all(), "an expert chosen outside the top-k"
    assert (chosen[:, :-1] >= chosen[:, 1:] - TOL).all(), "not in descending order"
    scores = references.moe_scores(logits, str(options.get("scoring", "softmax")))
    want = scores.gather(1, ids64)
    if options.get("renormalize", False):
        want = want / want.sum(dim=-1, keepdim=True)
    want = want * float(options.get("routed_scaling_factor", 1.0))
    torch.testing.assert_close(weights.double(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scoring", ["softmax", "sigmoid"])
@pytest.mark.parametrize(("experts", "topk"), SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_topk_matches_reference(dtype: torch.dtype, experts: int, topk: int, scoring: str) -> None:
    logits = _logits(TOKENS, experts, dtype)
    for renormalize, factor in ((False, 1.0), (True, 2.5)):
        options = {"scoring": scoring, "renormalize": renormalize, "routed_scaling_factor": factor}
        assert_routes(sycl_kernels.moe_topk(logits, topk, **options), logits, topk, **options)


def test_the_largest_config_matches_reference() -> None:
    """1024 experts, top-32: the kernel's selection rounds are a loop there, not unrolled."""
    logits = _logits(TOKENS, 1024, torch.bfloat16)
    options = {"renormalize": True, "routed_scaling_factor": 2.5}
    assert_routes(sycl_kernels.moe_topk(logits, 32, **options), logits, 32, **options)


@pytest.mark.parametrize("bias_dtype", ["float32", "same"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_correction_bias_selects_but_does_not_weigh(dtype: torch.dtype, bias_dtype: str) -> None:
    """The bias ranks the experts; the weights are the unbiased scores."""
    logits = _logits(TOKENS, 64, dtype)
    bias = torch.randn(64, generator=torch.Generator().manual_seed(3)) * 0.5
    bias = bias if bias_dtype == "float32" else bias.to(dtype)
    options = {"scoring": "sigmoid", "bias": bias, "renormalize": True}
    got = sycl_kernels.moe_topk(
        logits, 6, scoring="sigmoid", correction_bias=bias, renormalize=True
    )
    assert_routes(got, logits, 6, **options)
    plain = sycl_kernels.moe_topk(logits, 6, scoring="sigmoid", renormalize=True)
    assert not torch.equal(got[1], plain[1])


# Grouped top-k: (dtype, experts, topk, groups, topk_group, scoring, bias, group_scoring).
GROUPED = [
    # DeepSeek-V3 / R1: sigmoid, bias, 8 groups keep 4, the top-2 sums.
    *((d, 256, 8, 8, 4, "sigmoid", True, None) for d in DTYPES),
    # DeepSeek-V2: softmax, no bias, 8 groups keep 3, the maxima.
    (torch.bfloat16, 160, 6, 8, 3, "softmax", False, None),
    (torch.float32, 64, 6, 8, 3, "softmax", False, "top2_sum"),
    (torch.float16, 128, 4, 4, 2, "sigmoid", True, "max"),
    (torch.float32, 32, 8, 32, 8, "none", False, None),
]


@pytest.mark.parametrize(
    ("dtype", "experts", "topk", "groups", "topk_group", "scoring", "biased", "group_scoring"),
    GROUPED,
    ids=str,
)
def test_grouped_topk_matches_reference(
    dtype, experts, topk, groups, topk_group, scoring, biased, group_scoring
) -> None:
    logits = _logits(TOKENS, experts, dtype)
    if scoring == "none":
        logits = torch.softmax(logits.float(), dim=-1).to(dtype)
    bias = torch.randn(experts, generator=torch.Generator().manual_seed(5)) if biased else None
    for renormalize, factor in ((True, 2.5), (False, 1.0)):
        got = sycl_kernels.moe_topk(
            logits,
            topk,
            scoring=scoring,
            correction_bias=bias,
            renormalize=renormalize,
            num_expert_group=groups,
            topk_group=topk_group,
            group_scoring=group_scoring,
            routed_scaling_factor=factor,
        )
        assert_routes(
            got,
            logits,
            topk,
            scoring=scoring,
            bias=bias,
            renormalize=renormalize,
            num_expert_group=groups,
            topk_group=topk_group,
            group_scoring=group_scoring,
            routed_scaling_factor=factor,
        )


def test_grouped_keeps_only_the_best_groups() -> None:
    """A group's experts are not chosen, however good, when its group score loses:
    with the max rule group 1 (one expert of 9) wins, with top2_sum group 0 (8 + 8)."""
    logits = torch.zeros(1, 16)
    logits[0, 0:2] = 8.0
    logits[0, 8] = 9.0
    for group_scoring, group in (("max", 1), ("top2_sum", 0)):
        _, ids = sycl_kernels.moe_topk(
            logits,
            2,
            scoring="none",
            num_expert_group=2,
            topk_group=1,
            group_scoring=group_scoring,
        )
        assert (ids // 8 == group).all(), (group_scoring, ids)


def test_ties_rank_the_lower_index_first() -> None:
    """Equal keys: lower expert index first; equal group scores: lower group first."""
    logits = torch.zeros(3, 64)
    logits[1, [5, 40, 17]] = 1.0  # three equal maxima
    weights, ids = sycl_kernels.moe_topk(logits, 4)
    assert ids[0].tolist() == [0, 1, 2, 3]
    assert ids[1].tolist() == [5, 17, 40, 0]
    assert ids[2].tolist() == [0, 1, 2, 3]
    torch.testing.assert_close(weights[0], torch.full((4,), 1 / 64))
    _, ids = sycl_kernels.moe_topk(
        torch.zeros(2, 64), 4, scoring="sigmoid", num_expert_group=8, topk_group=2
    )
    assert ids.tolist() == [[0, 1, 2, 3]] * 2
    # Groups 2 and 6 tie for best: groups 2 and 6 kept, the lower first when scores tie.
    logits = torch.zeros(1, 64)
    logits[0, [20, 52]] = 3.0
    _, ids = sycl_kernels.moe_topk(logits, 2, num_expert_group=8, topk_group=1)
    assert ids.tolist() == [[20, 16]]


def test_nan_ranks_last_and_strided_rows_and_outputs() -> None:
    logits = _logits(6, 64, torch.float32)
    logits[2, 7] = math.nan
    wide = torch.zeros(6, 80)
    wide[:, :64] = logits
    weights_out = torch.full((6, 10), -1.0)[:, :4]
    ids_out = torch.full((6, 8), -1, dtype=torch.int32)[:, 2:6]
    result = sycl_kernels.moe_topk(
        wide[:, :64],
        4,
        scoring="sigmoid",
        topk_weights=weights_out,
        topk_ids=ids_out,
    )
    assert result[0] is weights_out and result[1] is ids_out
    assert 7 not in ids_out[2].tolist()
    clean = logits.clone()
    clean[2, 7] = -math.inf
    assert_routes(result, clean, 4, scoring="sigmoid")


def test_no_tokens() -> None:
    weights, ids = sycl_kernels.moe_topk(torch.empty(0, 64), 6)
    assert weights.shape == ids.shape == (0, 6)


# Bad inputs, opcheck, run once.


def _args() -> dict[str, object]:
    return {
        "gating_output": torch.randn(5, 16),
        "topk": 2,
        "scoring": "sigmoid",
        "correction_bias": torch.randn(16),
        "renormalize": True,
        "num_expert_group": 4,
        "topk_group": 2,
        "group_scoring": None,
        "routed_scaling_factor": 2.0,
    }


def _out_args() -> dict[str, object]:
    return {
        **_args(),
        "topk_weights": torch.empty(5, 2),
        "topk_ids": torch.empty(5, 2, dtype=torch.int32),
    }


ROUTING_TENSORS = {
    "gating_output": f"{cases.FLOAT} zero_dim extra_dim missing_dim last_stride_2",
    "correction_bias": f"{cases.FLOAT} extra_dim zero_dim last_dim_plus_one last_stride_2",
}
# The outputs (moe_topk_out's), checked below: the matrix's torch.ops entry knows `out`.
OUTPUT_TENSORS = {
    "topk_weights": (
        f"{cases.COMMON} int32 float16 float64 extra_dim missing_dim zero_dim "
        "last_dim_plus_one last_stride_2 overlapping_rows"
    ),
    "topk_ids": (
        f"{cases.COMMON} float32 extra_dim missing_dim zero_dim last_dim_plus_one "
        "last_stride_2 overlapping_rows"
    ),
}
ROUTING_SCALARS = {
    "topk": [("2", TypeError), (True, TypeError), (0, ValueError), (9, ValueError)],
    "scoring": [(None, TypeError), ("softplus", ValueError)],
    "num_expert_group": [("4", TypeError), (0, ValueError), (3, ValueError), (None, ValueError)],
    "topk_group": [(2.0, TypeError), (5, ValueError), (None, ValueError), (0, ValueError)],
    "group_scoring": [(1, TypeError), ("sum", ValueError)],
    "routed_scaling_factor": [*cases.NOT_A_NUMBER, (math.nan, ValueError)],
}


# renormalize: a custom op's schema converts None and 1 to a bool, so only the public
# function can refuse them (tests/ops/test_bad_inputs.py BOOL_ARGUMENTS lists others').
def test_bad_renormalize_and_outputs_are_rejected_by_name() -> None:
    for value in (None, 1):
        with pytest.raises(TypeError, match=r"moe_topk\(\): renormalize"):
            sycl_kernels.moe_topk(**{**_args(), "renormalize": value})
    for name, kinds in OUTPUT_TENSORS.items():
        for kind in kinds.split():
            make_bad, error = cases.TENSOR_MUTATIONS[kind]
            args = _out_args()
            args[name] = make_bad(args[name])
            calls = [sycl_kernels.moe_topk]
            if kind != "not_a_tensor":  # the schema's RuntimeError through torch.ops
                calls.append(torch.ops.sycl_kernels.moe_topk_out)
            for call in calls:
                with pytest.raises(error, match=rf"moe_topk\(\): .*{name}"):
                    call(**args)
    args = _out_args()
    del args["topk_ids"]
    with pytest.raises(TypeError, match="together or not at all"):
        sycl_kernels.moe_topk(**args)


def _opcheck_samples() -> list[tuple[str, tuple]]:
    x = torch.randn(4, 16)
    bias = torch.randn(16)
    plain = (x, 3, "softmax", None, False, None, None, None, 1.0)
    grouped = (x.bfloat16(), 4, "sigmoid", bias, True, 4, 2, None, 2.5)
    return [
        ("moe_topk", plain),
        ("moe_topk", grouped),
        ("moe_topk_out", (*grouped, torch.empty(4, 4), torch.empty(4, 4, dtype=torch.int32))),
    ]


def _once_moe_topk(op: Callable[..., object], dtype: torch.dtype) -> None:
    logits = _logits(9, 96, dtype)
    bias = torch.randn(96)
    options = {"scoring": "sigmoid", "renormalize": True, "routed_scaling_factor": 1.5}
    got = op(logits, 5, correction_bias=bias, num_expert_group=6, topk_group=3, **options)
    assert_routes(got, logits, 5, bias=bias, num_expert_group=6, topk_group=3, **options)


cases.register(
    cases.OpCase("moe_topk", _args, ROUTING_TENSORS, ROUTING_SCALARS),
    opcheck=_opcheck_samples,
    once={"moe_topk": cases.OnceCase(_once_moe_topk)},
)
