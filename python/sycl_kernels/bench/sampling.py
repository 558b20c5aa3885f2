"""sycl_kernels.bench.sampling: top-k / top-p renormalization and sampling against torch's
sort-based forms (bench, demo).

Rows of softmax(3 * randn) probabilities at vocabularies 32k, 128k and 256k, float32;
batches 1, 16 and 64 (bench's token counts 1, 16 and 256; 4096 is left out). The torch
columns sort each row once: top_k_renorm_probs masks below the k-th largest and divides
by the kept sum; top_p_renorm_probs and sample_from_probs cumsum the sorted row, mask
past the nucleus, scatter back (and torch.multinomial draws the sample).
sample_from_probs compares whether each side's sample lies in the kept support (1 each).
"""

from __future__ import annotations

import functools

import torch

from .. import ops
from .registry import BenchOp, Build, Case, register

_VOCABS = (32000, 128256, 262144)
_QUICK_VOCABS = (128256,)
# bench's token counts -> the batch timed (4096 rows of 128k would take minutes in torch).
_BATCHES = {1: 1, 16: 16, 256: 64}
_TOP_K, _TOP_P = 50, 0.9


def _probs(batch: int, vocab: int, device: torch.device) -> torch.Tensor:
    logits = torch.randn(batch, vocab, generator=torch.Generator().manual_seed(0)) * 3
    return torch.softmax(logits, -1).to(device)


def _top_k_mask_sorted(sorted_desc: torch.Tensor, k: int) -> torch.Tensor:
    """The entries of a descending row >= its k-th (ties kept)."""
    return sorted_desc >= sorted_desc[:, k - 1 : k]


def _top_p_mask_sorted(sorted_desc: torch.Tensor, p: float) -> torch.Tensor:
    """The nucleus of a descending row: entries up to the first whose cumsum reaches p."""
    cum = sorted_desc.cumsum(-1)
    return (cum - sorted_desc) < p * cum[:, -1:]


def _torch_top_k_renorm(probs: torch.Tensor) -> torch.Tensor:
    sorted_desc = probs.sort(-1, descending=True).values
    kept = torch.where(probs >= sorted_desc[:, _TOP_K - 1 : _TOP_K], probs, 0.0)
    return kept / kept.sum(-1, keepdim=True)


def _torch_filtered(probs: torch.Tensor, top_k: int | None) -> torch.Tensor:
    """Top-k (if given) then top-p of the kept mass, renormalized, by one sort."""
    sorted_desc, order = probs.sort(-1, descending=True)
    if top_k is not None:
        sorted_desc = sorted_desc.masked_fill(~_top_k_mask_sorted(sorted_desc, top_k), 0.0)
    sorted_desc = sorted_desc.masked_fill(~_top_p_mask_sorted(sorted_desc, _TOP_P), 0.0)
    kept = torch.empty_like(probs).scatter_(1, order, sorted_desc)
    return kept / kept.sum(-1, keepdim=True)


def top_k_renorm_case(dtype: torch.dtype, device: torch.device, batch: int, vocab: int) -> Case:
    probs = _probs(batch, vocab, device)
    out = torch.empty_like(probs)
    return Case(
        lambda: ops.top_k_renorm_probs(probs, _TOP_K, out=out),
        lambda: _torch_top_k_renorm(probs),
        2 * probs.numel() * 4,
    )


def top_p_renorm_case(dtype: torch.dtype, device: torch.device, batch: int, vocab: int) -> Case:
    probs = _probs(batch, vocab, device)
    out = torch.empty_like(probs)
    return Case(
        lambda: ops.top_p_renorm_probs(probs, _TOP_P, out=out),
        lambda: _torch_filtered(probs, None),
        2 * probs.numel() * 4,
    )


def sample_case(dtype: torch.dtype, device: torch.device, batch: int, vocab: int) -> Case:
    probs = _probs(batch, vocab, device)
    allowed = _torch_filtered(probs, _TOP_K) > 0
    rows = torch.arange(batch, device=device)
    generator = torch.Generator(device).manual_seed(1)
    samples = torch.empty(batch, dtype=torch.int32, device=device)

    def ours() -> torch.Tensor:
        seed = ops.sampling.philox_seed(generator, device)
        ops.sample_from_probs(probs, top_k=_TOP_K, top_p=_TOP_P, seed=seed, out=samples)
        return allowed[rows, samples.long()].float()

    def theirs() -> torch.Tensor:
        drawn = torch.multinomial(_torch_filtered(probs, _TOP_K), 1, generator=generator)
        return allowed[rows, drawn[:, 0]].float()

    return Case(ours, theirs, probs.numel() * 4)


def _shapes(case, tokens: int, quick: bool) -> list[tuple[str, Build]]:
    batch = _BATCHES.get(tokens)
    if batch is None:
        return []
    return [
        (f"{batch}x{vocab}", functools.partial(_built, case, batch, vocab))
        for vocab in (_QUICK_VOCABS if quick else _VOCABS)
    ]


def _built(case, batch: int, vocab: int, dtype: torch.dtype, device: torch.device) -> Case:
    return case(dtype, device, batch, vocab)


_NOTE = (
    "{name} (float32 probabilities [batch, vocab]; bench's 1, 16 and 256 tokens time batches "
    "1, 16 and 64): the torch column is {form}."
)
register(
    BenchOp(
        "top_k_renorm_probs",
        functools.partial(_shapes, top_k_renorm_case),
        demo=_shapes(top_k_renorm_case, 16, quick=True)[0],
        dtypes=(torch.float32,),
        note=_NOTE.format(
            name="top_k_renorm_probs (top-k 50)",
            form="a descending sort, the mask below the 50th and the division by the kept sum",
        ),
    )
)
register(
    BenchOp(
        "top_p_renorm_probs",
        functools.partial(_shapes, top_p_renorm_case),
        dtypes=(torch.float32,),
        note=_NOTE.format(
            name="top_p_renorm_probs (top-p 0.9)",
            form="a descending sort, cumsum, the mask past the nucleus, scatter back, divide",
        ),
    )
)
register(
    BenchOp(
        "sample_from_probs",
        functools.partial(_shapes, sample_case),
        dtypes=(torch.float32,),
        note=_NOTE.format(
            name="sample_from_probs (top-k 50, then top-p 0.9)",
            form="one descending sort, the top-k and top-p masks over a cumsum, scatter back "
            "and torch.multinomial; max err compares whether each sample is in the support",
        ),
    )
)
