"""Property tests on edge inputs: data of zeros, subnormals, float maxima, infinities
and NaN, and ints at and past the C types the kernels take, through the public
functions of the routing, MoE, quant and sampling families.

Each property is one the docs promise for any input: an int no kernel parameter can
hold is refused by a ValueError, TypeError or IndexError naming the op (or, where the docs say
so, clamped), never a host-module error; quantized values keep the sign of their
input, 0 stays 0 and nothing finite becomes NaN; renormalized rows sum to one; the
chosen experts are distinct and in range. Exact results per case are in the ops'
own test files.
"""

from __future__ import annotations

import math

import pytest
import sycl_kernels
import torch
from hypothesis import given
from hypothesis import strategies as st
from sycl_kernels.compat import vllm

INT_EDGES = [-(2**63), -(2**31) - 1, -1, 0, 1, 2**31 - 1, 2**31, 2**32 + 1, 2**63 - 1]
FINITE_EDGES = [0.0, -0.0, 1e-45, -1e-45, 1e-40, 3e-39, 1.2e-38, 1.0, -2.5, 3e38, -3.4e38]
FLOAT_EDGES = [*FINITE_EDGES, math.inf, -math.inf, math.nan]
WIDTHS = st.sampled_from([1, 4, 7, 16, 33, 128])


def _row(values: list[float], width: int) -> torch.Tensor:
    return torch.tensor((values * width)[:width], dtype=torch.float32)[None]


def _refused_or_done(op: str, call) -> object | None:
    """call()'s result, or None where it raised a ValueError, TypeError or IndexError
    (an index tensor's value out of range) naming `op`."""
    try:
        return call()
    except (ValueError, TypeError, IndexError) as error:
        assert f"{op}()" in str(error), f"an error not naming {op}: {error}"
        return None


@given(value=st.sampled_from(INT_EDGES))
def test_top_k_ints_are_refused_or_clamped(value: int) -> None:
    logits = torch.tensor([[0.5, -1.0, 2.0, 0.0]])
    got = _refused_or_done(
        "top_k_mask_logits", lambda: sycl_kernels.top_k_mask_logits(logits, value)
    )
    if value >= logits.shape[-1]:
        assert got is not None and torch.equal(got, logits), "top_k past the vocab keeps the row"
    probs = torch.tensor([[0.1, 0.2, 0.3, 0.4]])
    got = _refused_or_done(
        "top_k_renorm_probs", lambda: sycl_kernels.top_k_renorm_probs(probs, value)
    )
    if value >= probs.shape[-1]:
        assert got is not None
        torch.testing.assert_close(got, probs / probs.sum())


@given(value=st.sampled_from(INT_EDGES), which=st.sampled_from(["num_experts", "block_size"]))
def test_align_ints_are_refused_or_in_bounds(value: int, which: str) -> None:
    # Given outputs, small, with a canary after each: nothing is written past them.
    buffers = [torch.full((n + 8,), -7, dtype=torch.int32) for n in (16, 4, 1)]
    args = {"num_experts": 4, "block_size": 4, which: value}
    result = _refused_or_done(
        "moe_align_block_size",
        lambda: sycl_kernels.moe_align_block_size(
            torch.tensor([[0, 1], [3, 1]], dtype=torch.int32),
            args["num_experts"],
            args["block_size"],
            sorted_token_ids=buffers[0][:16],
            expert_ids=buffers[1][:4],
            num_tokens_post_padded=buffers[2][:1],
        ),
    )
    for buffer, n in zip(buffers, (16, 4, 1), strict=True):
        assert (buffer[n:] == -7).all(), "a write past an output"
    if result is not None:
        assert 0 <= int(buffers[2][0]) <= 16


@given(value=st.sampled_from(INT_EDGES))
def test_moe_topk_ints_are_refused_or_valid(value: int) -> None:
    logits = torch.randn(3, 8)
    got = _refused_or_done("moe_topk", lambda: sycl_kernels.moe_topk(logits, value))
    if got is not None:
        ids = got[1].long()
        assert ((ids >= 0) & (ids < 8)).all() and ids.shape == (3, value)


@given(values=st.lists(st.sampled_from(FLOAT_EDGES), min_size=1, max_size=8), width=WIDTHS)
def test_moe_topk_edge_logits_choose_distinct_experts(values: list[float], width: int) -> None:
    logits = _row(values, max(width, 2))
    topk = min(2, logits.shape[-1])
    _, ids = sycl_kernels.moe_topk(logits, topk)
    ids = ids.long()
    assert ((ids >= 0) & (ids < logits.shape[-1])).all()
    assert ids.unique().numel() == topk


@pytest.mark.parametrize("qdtype", [torch.float8_e4m3fn, torch.int8], ids=str)
@given(
    values=st.lists(st.sampled_from(FINITE_EDGES), min_size=1, max_size=8),
    width=WIDTHS,
    scale_min=st.sampled_from([None, 0.0]),
)
def test_dynamic_quantize_edge_values_keep_sign_and_zero(
    qdtype: torch.dtype, values: list[float], width: int, scale_min: float | None
) -> None:
    x = _row(values, width)
    q, scales = sycl_kernels.dynamic_quantize(x, dtype=qdtype, scale_min=scale_min)
    got = q.float()
    qmax = 448.0 if qdtype.is_floating_point else 127.0
    assert not got.isnan().any(), "a finite input quantized to NaN"
    assert (got.abs() <= qmax).all()
    assert (got[x == 0] == 0).all(), "0 did not stay 0"
    assert (got * x >= 0).all(), "a value changed sign"
    assert torch.isfinite(scales).all() and (scales >= 0).all()
    # Without a floor the largest value reaches about qmax (its scale is amax / qmax,
    # in float32: 0 where that underflows, which quantizes everything to 0).
    if scale_min == 0.0 and scales.max() > 0:
        assert got.abs().max() >= 0.9 * qmax


@given(
    values=st.lists(st.sampled_from([v for v in FINITE_EDGES if v > 0]), min_size=1, max_size=8),
    zeros=st.integers(0, 3),
    width=WIDTHS,
)
def test_renormalized_edge_rows_sum_to_one(values: list[float], zeros: int, width: int) -> None:
    probs = torch.cat((_row(values, width), torch.zeros(1, zeros)), dim=-1)
    vocab = probs.shape[-1]
    got = sycl_kernels.top_k_renorm_probs(probs, vocab)
    assert torch.isfinite(got).all(), f"{probs} renormalized to {got}"
    assert (got[probs == 0] == 0).all()
    assert math.isclose(got.double().sum().item(), 1.0, rel_tol=1e-5)
    # Each kept entry in proportion to its probability, in float64.
    want = probs.double() / probs.double().sum()
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-30)


@given(
    values=st.lists(st.sampled_from(FINITE_EDGES), min_size=1, max_size=8),
    rows=st.sampled_from([0, 1, 3]),
    width=WIDTHS,
)
def test_vllm_per_tensor_fp8_edge_values(values: list[float], rows: int, width: int) -> None:
    """compat.vllm.dynamic_scaled_fp8_quant (scale_min 0): the scale is written, empty
    inputs included, and the values keep their sign, 0 stays 0, nothing becomes NaN."""
    x = _row(values, width).expand(rows, width).contiguous()
    result = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
    scale = torch.full((1,), -1.0)
    vllm.dynamic_scaled_fp8_quant(result, x, scale)
    amax = x.abs().max().item() if x.numel() else 0.0
    assert scale.item() == torch.tensor(amax / 448.0, dtype=torch.float32).item()
    got = result.float()
    assert not got.isnan().any() and (got[x == 0] == 0).all() and (got * x >= 0).all()


@given(values=st.lists(st.sampled_from(FLOAT_EDGES), min_size=1, max_size=8), width=WIDTHS)
def test_vllm_topk_softmax_edge_logits(values: list[float], width: int) -> None:
    """compat.vllm.topk_softmax on edge logits: distinct experts in range, weights in
    [0, 1] or NaN only where the row's softmax is NaN (an Inf or NaN logit)."""
    logits = _row(values, max(width, 2)).expand(2, -1).contiguous()
    weights = torch.empty(2, 2)
    ids = torch.empty(2, 2, dtype=torch.int32)
    vllm.topk_softmax(weights, ids, torch.empty(2, 2, dtype=torch.int32), logits, False)
    ids = ids.long()
    assert ((ids >= 0) & (ids < logits.shape[-1])).all()
    assert (ids[:, 0] != ids[:, 1]).all()
    finite = torch.isfinite(logits).all(dim=-1)
    assert ((weights[finite] >= 0) & (weights[finite] <= 1)).all()
