"""The MoE routing calls of sycl_kernels.compat.vllm and compat.sgl_kernel against
float64 references written from the engines' kernels (vllm-xpu-kernels 4543b580
csrc/moe/topk.cpp, grouped_topk.cpp; sgl-kernel-xpu 9cf16bf9 src/sycl/TopKSoftMax.cpp,
TopKSigMoid.cpp, MoE_fused_gate.cpp, BiasedTopK.cpp), and their call contracts (in
place, returns, the extra outputs: token_expert_indices, is_padding, shared experts).

Selections are checked as in tests/ops/test_routing.py (assert_routes): the top-k of
the reference keys to within a tolerance; the weights from the kernel's ids.
"""

from __future__ import annotations

import pytest
import torch
from sycl_kernels.compat import sgl_kernel, vllm

from tests import references
from tests.ops.test_routing import assert_routes

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOKENS = 33


def _logits(experts: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (2 * torch.randn(TOKENS, experts, generator=g)).to(dtype)


def _bias(experts: int) -> torch.Tensor:
    return torch.randn(experts, generator=torch.Generator().manual_seed(7)) * 0.3


def _empty(topk: int, ids_dtype: torch.dtype = torch.int32):
    return (
        torch.full((TOKENS, topk), -5.0),
        torch.full((TOKENS, topk), -5, dtype=ids_dtype),
        torch.full((TOKENS, topk), -5, dtype=torch.int32),
    )


# vLLM.


@pytest.mark.parametrize("ids_dtype", [torch.int32, torch.int64, torch.uint32], ids=str)
@pytest.mark.parametrize("renormalize", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_vllm_topk_softmax(dtype: torch.dtype, renormalize: bool, ids_dtype) -> None:
    logits = _logits(64, dtype)
    weights, ids, token_expert = _empty(6, ids_dtype)
    assert vllm.topk_softmax(weights, ids, token_expert, logits, renormalize) is None
    assert_routes((weights, ids.long().int()), logits, 6, renormalize=renormalize)
    want = torch.arange(6, dtype=torch.int32)[None, :] * TOKENS + torch.arange(TOKENS)[:, None]
    assert torch.equal(token_expert, want.int())


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_vllm_topk_sigmoid_bias_scaling_padding(dtype: torch.dtype) -> None:
    logits, bias = _logits(128, dtype), _bias(128)
    padding = torch.zeros(TOKENS, dtype=torch.bool)
    padding[[3, 10]] = True
    weights, ids, token_expert = _empty(8)
    vllm.topk_sigmoid(weights, ids, token_expert, logits, True, bias, 2.5, padding)
    options = {"scoring": "sigmoid", "bias": bias, "renormalize": True}
    real = ~padding
    assert_routes((weights[real], ids[real]), logits[real], 8, routed_scaling_factor=2.5, **options)
    assert (weights[padding] == 0).all() and (ids[padding] == -1).all()
    assert token_expert[3].tolist() == [3 + k * TOKENS for k in range(8)]
    ids64 = torch.empty(TOKENS, 8, dtype=torch.uint32)
    vllm.topk_sigmoid(weights, ids64, token_expert, logits, True, bias, 2.5, padding)
    assert (ids64[padding].long() == 2**32 - 1).all()
    assert torch.equal(ids64[real].long(), ids[real].long())
    # Without renormalize the factor still applies (vLLM: scale = routed_scaling_factor).
    vllm.topk_sigmoid(weights, ids, token_expert, logits, False, None, 2.5)
    assert_routes((weights, ids), logits, 8, scoring="sigmoid", routed_scaling_factor=2.5)


@pytest.mark.parametrize("scoring_func", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_vllm_grouped_topk(dtype: torch.dtype, scoring_func: int) -> None:
    """DeepSeek-V3's routing: 256 experts, 8 groups keep 4, top-8, the top-2 group sums."""
    logits = _logits(256, dtype)
    if scoring_func == 0:  # scores as given: probabilities
        logits = torch.softmax(logits.float(), dim=-1).to(dtype)
    bias = _bias(256).to(dtype)
    weights, ids = vllm.grouped_topk(logits, 8, 4, 8, True, 2.5, bias, scoring_func)
    assert_routes(
        (weights, ids),
        logits,
        8,
        scoring=("none", "sigmoid")[scoring_func],
        bias=bias,
        renormalize=True,
        num_expert_group=8,
        topk_group=4,
        group_scoring="top2_sum",
        routed_scaling_factor=2.5,
    )
    with pytest.raises(ValueError, match="scoring_func"):
        vllm.grouped_topk(logits, 8, 4, 8, True, 2.5, bias, 2)


def _vllm_grouped_topk_native(scores, n_group, topk_group, topk, renormalize, factor):
    """vLLM's torch-native grouped_topk without e_score_correction_bias (fused_moe's
    cpu_fused_moe.py): groups scored by their best, the top-k of the kept groups."""
    tokens = scores.shape[0]
    group_scores = scores.view(tokens, n_group, -1).max(dim=-1).values
    group_idx = torch.topk(group_scores, k=topk_group, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    per_group = scores.shape[1] // n_group
    score_mask = group_mask.unsqueeze(-1).expand(tokens, n_group, per_group).reshape(tokens, -1)
    weights, ids = torch.topk(scores.masked_fill(~score_mask.bool(), float("-inf")), k=topk)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights * factor, ids


@pytest.mark.parametrize("scoring_func", [0, 1])
def test_vllm_grouped_topk_without_bias(scoring_func: int) -> None:
    """bias None: the plain scores, groups by their best (vLLM's torch-native form)."""
    logits = _logits(256, torch.float32)
    if scoring_func == 0:
        logits = torch.softmax(logits, dim=-1)
    weights, ids = vllm.grouped_topk(logits, 8, 4, 8, True, 2.5, None, scoring_func)
    scores = logits.double() if scoring_func == 0 else logits.double().sigmoid()
    want_weights, want_ids = _vllm_grouped_topk_native(scores, 8, 4, 8, True, 2.5)
    order, want_order = ids.long().sort(dim=-1), want_ids.sort(dim=-1)
    assert torch.equal(order.values, want_order.values)
    torch.testing.assert_close(
        weights.double().gather(1, order.indices),
        want_weights.gather(1, want_order.indices),
        rtol=1e-5,
        atol=1e-6,
    )


# sgl_kernel.


@pytest.mark.parametrize("renormalize", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sgl_topk_softmax(dtype: torch.dtype, renormalize: bool) -> None:
    logits = _logits(64, dtype)
    weights, ids, _ = _empty(6)
    assert sgl_kernel.topk_softmax(weights, ids, logits, renormalize) is None
    assert_routes((weights, ids), logits, 6, renormalize=renormalize)


def test_sgl_topk_sigmoid_scales_only_when_renormalizing() -> None:
    logits, bias = _logits(128, torch.bfloat16), _bias(128)
    weights, ids, _ = _empty(8)
    sgl_kernel.topk_sigmoid(weights, ids, logits, False, bias, 2.5)
    assert_routes((weights, ids), logits, 8, scoring="sigmoid", bias=bias)  # no factor
    sgl_kernel.topk_sigmoid(weights, ids, logits, True, bias, 2.5)
    assert_routes(
        (weights, ids),
        logits,
        8,
        scoring="sigmoid",
        bias=bias,
        renormalize=True,
        routed_scaling_factor=2.5,
    )


@pytest.mark.parametrize("renormalize", [False, True])
def test_sgl_topk_sigmoid_shared_expert(renormalize: bool) -> None:
    logits = _logits(64, torch.float32)
    weights, ids, _ = _empty(5)
    sgl_kernel.topk_sigmoid(weights, ids, logits, renormalize, None, 2.0, 1)
    raw, want_ids, _ = references.moe_topk(logits, 4, "sigmoid")
    assert torch.equal(ids[:, :4].long(), want_ids) and (ids[:, 4] == 64).all()
    routed_sum = raw.sum(dim=1)
    if renormalize:
        torch.testing.assert_close(weights[:, :4].double(), 2.0 * raw / routed_sum[:, None])
        assert (weights[:, 4] == 1.0).all()
    else:
        torch.testing.assert_close(weights[:, :4].double(), raw)
        torch.testing.assert_close(weights[:, 4].double(), routed_sum / 2.0)


@pytest.mark.parametrize(
    ("dtype", "scoring", "shared", "apply"),
    [
        (torch.float32, "sigmoid", 0, False),
        (torch.bfloat16, "sigmoid", 1, True),
        (torch.float16, "softmax", 0, True),
    ],
    ids=str,
)
def test_sgl_moe_fused_gate(dtype: torch.dtype, scoring: str, shared: int, apply: bool) -> None:
    logits = _logits(256, dtype)
    bias = _bias(256).to(dtype) if scoring == "sigmoid" else None
    weights, ids = sgl_kernel.moe_fused_gate(
        logits, bias, 8, 4, 8 + shared, True, scoring, shared, 2.5, apply
    )
    group_scoring = "top2_sum" if scoring == "sigmoid" else "max"
    options = {"scoring": scoring, "bias": bias, "num_expert_group": 8, "topk_group": 4}
    routed_w = weights[:, :8] * (1.0 / 2.5 if apply else 1.0)
    assert_routes(
        (routed_w, ids[:, :8]),
        logits,
        8,
        renormalize=True,
        group_scoring=group_scoring,
        **options,
    )
    if shared:
        assert (ids[:, 8] == 256).all()
        torch.testing.assert_close(weights[:, 8], torch.full((TOKENS,), 1.0 / 2.5 * 2.5))


@pytest.mark.parametrize("renormalize", [False, True])
def test_sgl_biased_topk(renormalize: bool) -> None:
    logits, bias = _logits(64, torch.bfloat16), _bias(64)
    output, indices, _ = _empty(7)
    sgl_kernel.biased_topk(logits, bias, output, indices, 7, "sigmoid", 1, renormalize, 2.0, True)
    raw, _, _ = references.moe_topk(logits, 6, "sigmoid", bias)
    assert_routes(
        (output[:, :6], indices[:, :6]),
        logits,
        6,
        scoring="sigmoid",
        bias=bias,
        renormalize=renormalize,
        routed_scaling_factor=2.0,
    )
    assert (indices[:, 6] == 64).all()
    routed_sum = raw.sum(dim=1)
    norm = routed_sum if renormalize else 1.0
    torch.testing.assert_close(output[:, 6].double(), routed_sum / 2.0 / norm * 2.0)
    with pytest.raises(NotImplementedError):
        sgl_kernel.biased_topk(logits, bias, output, indices, 7, "sqrtsoftplus")
