"""sycl_kernels.bench.penalties: the logit penalties and the top-k mask against the engines'
torch forms (bench, demo).

Shapes: [batch, vocab] logits at vocab 32000, 128256 and 262144 (quick: 128256), batch
min(tokens, 64) for bench's token counts up to 256 (1, 16 and 64; a sampler's batch
is its sequences, not its tokens).

apply_penalties: vLLM's apply_repetition_penalties_ (a prompt and an output mask, a
penalty a row), ours against vLLM's torch form (the penalties repeated over the
vocab, 1.0 where unseen, torch.where of the division and the product, written back).
Both apply the penalties and then their inverses on alternate calls, so the logits
stay in range however often a case runs. repetition_penalty_by_ids: 512 ids a row
(Hugging Face's gather, torch.where, scatter). top_k_mask_logits: k = 50 (Hugging
Face's TopKLogitsWarper: torch.topk and masked_fill; both then clamp the -inf).
"""

from __future__ import annotations

import functools

import torch

from .. import ops
from .registry import BenchOp, Build, Case, register

_MAX_BATCH = 64
_IDS = 512
_TOP_K = 50


def _vocabs(quick: bool) -> tuple[int, ...]:
    return (128256,) if quick else (32000, 128256, 262144)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _logits(batch: int, vocab: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return (3 * torch.randn(batch, vocab, generator=_generator(1))).to(device, dtype)


class _Alternating:
    """Each call passes the next of `values` (a penalty, then its inverse)."""

    def __init__(self, *values: torch.Tensor) -> None:
        self.values, self.calls = values, 0

    def next(self) -> torch.Tensor:
        self.calls += 1
        return self.values[(self.calls - 1) % len(self.values)]


def penalties_case(dtype: torch.dtype, device: torch.device, batch: int, vocab: int) -> Case:
    ours_logits = _logits(batch, vocab, dtype, device)
    theirs_logits = ours_logits.clone()
    g = _generator(2)
    prompt_mask = (torch.rand(batch, vocab, generator=g) < 0.02).to(device)
    output_mask = (torch.rand(batch, vocab, generator=g) < 0.01).to(device)
    penalty = (1.1 + torch.rand(batch, generator=g)).to(device)
    ours_penalty, theirs_penalty = (
        _Alternating(penalty, 1 / penalty),
        _Alternating(penalty, 1 / penalty),
    )

    def ours() -> torch.Tensor:
        ops.apply_penalties(
            ours_logits, prompt_mask, None, output_mask, repetition_penalties=ours_penalty.next()
        )
        return ours_logits

    def theirs() -> torch.Tensor:
        penalties = theirs_penalty.next().unsqueeze(1).repeat(1, vocab)
        penalties[~(prompt_mask | output_mask)] = 1.0
        x = theirs_logits
        x.copy_(torch.where(x > 0, x / penalties, x * penalties))
        return x

    size = ours_logits.element_size()
    return Case(ours, theirs, batch * vocab * (2 * size + 2) + 4 * batch)


def by_ids_case(dtype: torch.dtype, device: torch.device, batch: int, vocab: int) -> Case:
    logits = _logits(batch, vocab, dtype, device)
    ids = torch.randint(0, vocab, (batch, _IDS), generator=_generator(3)).to(device)

    def ours() -> torch.Tensor:
        return ops.repetition_penalty_by_ids(logits, ids, repetition_penalty=1.3)

    def theirs() -> torch.Tensor:
        score = torch.gather(logits, 1, ids)
        score = torch.where(score < 0, score * 1.3, score / 1.3)
        return logits.scatter(1, ids, score)

    size = logits.element_size()
    return Case(ours, theirs, 2 * logits.numel() * size + ids.numel() * (8 + 2 * size))


def top_k_case(dtype: torch.dtype, device: torch.device, batch: int, vocab: int) -> Case:
    """Both sides clamp their result at -1e4 in place (one more pass each): -inf minus
    -inf would make the max error NaN."""
    logits = _logits(batch, vocab, dtype, device)

    def ours() -> torch.Tensor:
        return ops.top_k_mask_logits(logits, _TOP_K).clamp_(min=-1e4)

    def theirs() -> torch.Tensor:
        kth = torch.topk(logits, _TOP_K)[0][..., -1, None]
        return logits.masked_fill(logits < kth, -float("inf")).clamp_(min=-1e4)

    return Case(ours, theirs, 2 * logits.numel() * logits.element_size())


def _shapes(case, tokens: int, quick: bool) -> list[tuple[str, Build]]:
    if tokens > 256:
        return []
    batch = min(tokens, _MAX_BATCH)
    return [
        (f"b{batch}x{vocab}", functools.partial(_build, case, batch, vocab))
        for vocab in _vocabs(quick)
    ]


def _build(case, batch: int, vocab: int, dtype: torch.dtype, device: torch.device) -> Case:
    return case(dtype, device, batch, vocab)


register(
    BenchOp(
        "apply_penalties",
        functools.partial(_shapes, penalties_case),
        demo=_shapes(penalties_case, 16, quick=True)[0],
        note="apply_penalties: vLLM's repetition penalty (prompt and output masks, a penalty "
        "a row); the torch column is vLLM's torch form (repeat, mask, torch.where); batch "
        "min(tokens, 64).",
    )
)
register(
    BenchOp(
        "repetition_penalty_by_ids",
        functools.partial(_shapes, by_ids_case),
        note=f"repetition_penalty_by_ids: {_IDS} ids a row; the torch column is Hugging "
        "Face's gather, torch.where and scatter.",
    )
)
register(
    BenchOp(
        "top_k_mask_logits",
        functools.partial(_shapes, top_k_case),
        note=f"top_k_mask_logits: k = {_TOP_K}; the torch column is Hugging Face's "
        "TopKLogitsWarper (torch.topk, masked_fill).",
    )
)
