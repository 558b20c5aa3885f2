"""A tiny Qwen3-MoE from transformers with its router's top-k and its experts' sum on the
MoE ops (moe_topk, moe_sum) gives Hugging Face's greedy tokens."""

from __future__ import annotations

import collections
import functools

import pytest
import sycl_kernels
import torch
from torch import nn
from torch.nn import functional as F

from tests.integrations.test_transformers import tiny_model

pytest.importorskip("transformers.models.qwen3_moe")


def _router_forward(
    router: nn.Module, calls: collections.Counter, hidden_states: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Qwen3MoeTopKRouter.forward with softmax + top-k (+ renormalization) on moe_topk."""
    logits = F.linear(hidden_states.reshape(-1, router.hidden_dim), router.weight)
    weights, ids = sycl_kernels.moe_topk(
        logits, router.top_k, scoring="softmax", renormalize=router.norm_topk_prob
    )
    calls["moe_topk"] += 1
    return logits, weights.to(logits.dtype), ids.long()


def _experts_forward(
    experts: nn.Module,
    calls: collections.Counter,
    hidden_states: torch.Tensor,
    top_k_index: torch.Tensor,
    top_k_weights: torch.Tensor,
) -> torch.Tensor:
    """Qwen3MoeExperts.forward with the weighted expert outputs summed by moe_sum: each
    (token, k) slot's output in a [tokens, topk, hidden] tensor, then the sum over k."""
    tokens, topk = top_k_index.shape
    slots = hidden_states.new_zeros(tokens, topk, hidden_states.shape[-1])
    for expert in top_k_index.unique().tolist():
        token_idx, k = torch.where(top_k_index == expert)
        gate, up = F.linear(hidden_states[token_idx], experts.gate_up_proj[expert]).chunk(2, -1)
        out = F.linear(experts.act_fn(gate) * up, experts.down_proj[expert])
        slots[token_idx, k] = out * top_k_weights[token_idx, k, None]
    calls["moe_sum"] += 1
    return sycl_kernels.moe_sum(slots)


def _greedy(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=12, min_new_tokens=12, do_sample=False)


@pytest.mark.parametrize("norm_topk_prob", [True, False])
def test_qwen3_moe_routes_and_sums_on_the_moe_ops(norm_topk_prob: bool) -> None:
    torch.manual_seed(0)
    model = tiny_model(
        "qwen3_moe",
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=256,
        norm_topk_prob=norm_topk_prob,
    )
    ids = torch.randint(3, 512, (2, 10))
    expected = _greedy(model, ids)

    calls: collections.Counter = collections.Counter()
    blocks = [m for m in model.modules() if type(m).__name__ == "Qwen3MoeSparseMoeBlock"]
    assert blocks
    for block in blocks:
        block.gate.forward = functools.partial(_router_forward, block.gate, calls)
        block.experts.forward = functools.partial(_experts_forward, block.experts, calls)
    got = _greedy(model, ids)

    # Every MoE layer of every step ran on the ops: prefill plus 11 decode steps.
    assert calls["moe_topk"] == calls["moe_sum"] == len(blocks) * 12
    assert torch.equal(got, expected)
