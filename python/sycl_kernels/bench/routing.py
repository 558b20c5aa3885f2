"""sycl_kernels.bench.routing: MoE routing against its torch eager form (bench, demo).

moe_topk: softmax + torch.topk + renormalization (Qwen3-MoE's router) at 128 experts,
top-8.
"""

from __future__ import annotations

import functools

import torch

from .. import ops
from .registry import BenchOp, Build, Case, nbytes, register

_EXPERTS, _TOPK = 128, 8


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _torch_topk(logits: torch.Tensor) -> torch.Tensor:
    """Qwen3-MoE's router in torch: the renormalized weights of the chosen experts."""
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
    weights, _ = torch.topk(probs, _TOPK, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True)


def routing_case(dtype: torch.dtype, device: torch.device, tokens: int) -> Case:
    """Both sides return the weights of the chosen experts, sorted within each token (bf16
    logits tie often; tied experts have equal weights, whichever is chosen)."""
    logits = torch.randn(tokens, _EXPERTS, generator=_generator(1)).to(device, dtype)
    weights = torch.empty(tokens, _TOPK, device=device)
    ids = torch.empty(tokens, _TOPK, dtype=torch.int32, device=device)

    def ours() -> torch.Tensor:
        ops.moe_topk(logits, _TOPK, renormalize=True, topk_weights=weights, topk_ids=ids)
        return weights.sort(-1).values

    return Case(ours, lambda: _torch_topk(logits).sort(-1).values, nbytes(logits, weights, ids))


def _shapes(case, label: str, tokens: int, quick: bool) -> list[tuple[str, Build]]:
    return [(f"{tokens}x{label}", lambda dtype, device: case(dtype, device, tokens))]


register(
    BenchOp(
        "moe_topk",
        functools.partial(_shapes, routing_case, f"{_EXPERTS} experts top-{_TOPK}"),
        demo=_shapes(routing_case, f"{_EXPERTS} experts top-{_TOPK}", 256, quick=True)[0],
        note="moe_topk: softmax + top-8 + renormalization of 128 experts' logits; the torch "
        "column is torch.softmax, torch.topk and the renormalization; max err compares the "
        "chosen experts' weights.",
    )
)
