"""sycl_kernels.integrations.transformers' generation (patch_generation) on a tiny random
Llama (tests/integrations/test_transformers.py): by default the same processed scores as
Hugging Face's RepetitionPenaltyLogitsProcessor and TopKLogitsWarper, bit for bit, so
the same tokens, greedy and sampled under one seed; with sample=True tokens drawn by
sample_from_probs, the same from run to run under one seed and inside the support
Hugging Face's own warpers keep; Hugging Face's path where the kernels do not apply."""

from __future__ import annotations

import collections
import math

import pytest
import torch
from sycl_kernels.integrations import transformers as patcher
from torch import nn
from transformers.generation.logits_process import (
    LogitsProcessorList,
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
    TypicalLogitsWarper,
)

from tests.integrations.test_transformers import count_kernel_calls, tiny_model

KERNELS = ("repetition_penalty_by_ids", "top_k_mask_logits", "sample_from_probs")
STEPS = 10


@pytest.fixture
def kernel_calls(monkeypatch: pytest.MonkeyPatch) -> collections.Counter:
    return count_kernel_calls(monkeypatch, KERNELS)


@pytest.fixture(scope="module")
def model() -> nn.Module:
    torch.manual_seed(0)
    return tiny_model("llama", num_hidden_layers=1)


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """Two prompts, the second left-padded by 3 (HF then ignores the padding's ids)."""
    ids = torch.randint(3, 512, (2, 10), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    ids[1, :3], mask[1, :3] = 0, 0
    return ids, mask


def _generate(model: nn.Module, seed: int | None = None, **options):
    """The new tokens, the processed scores and the raw logits: [rows, steps(, vocab)]."""
    ids, mask = _inputs()
    if seed is not None:
        torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=STEPS,
            min_new_tokens=STEPS,
            pad_token_id=0,
            output_scores=True,
            output_logits=True,
            return_dict_in_generate=True,
            **options,
        )
    tokens = out.sequences[:, ids.shape[1] :]
    return tokens, torch.stack(out.scores, 1), torch.stack(out.logits, 1)


# --- Default: Hugging Face's scores and tokens, bit for bit ---


def test_greedy_with_repetition_penalty_equals_hugging_face(model, kernel_calls) -> None:
    want_tokens, want_scores, _ = _generate(model, do_sample=False, repetition_penalty=1.3)
    plain_tokens, plain_scores, _ = _generate(model, do_sample=False)
    assert not torch.equal(want_tokens, plain_tokens)  # the penalty changes the tokens
    assert not torch.equal(want_scores, plain_scores)
    report = patcher.patch_generation(model)
    try:
        assert patcher.patch_generation(model) == report  # a second call changes nothing
        tokens, scores, _ = _generate(model, do_sample=False, repetition_penalty=1.3)
    finally:
        patcher.unpatch_generation(model)
    assert report == [
        "LlamaForCausalLM._get_logits_processor: repetition_penalty_by_ids "
        "(RepetitionPenaltyLogitsProcessor)",
        "LlamaForCausalLM._get_logits_processor: top_k_mask_logits (TopKLogitsWarper)",
        "LlamaForCausalLM._get_logits_processor: unpatched, TopPLogitsWarper, "
        "MinPLogitsWarper and torch.multinomial (Hugging Face's tokens; sample=True draws "
        "with sample_from_probs)",
    ]
    assert kernel_calls["repetition_penalty_by_ids"] == STEPS
    assert torch.equal(scores, want_scores)
    assert torch.equal(tokens, want_tokens)
    assert "_get_logits_processor" not in model.__dict__
    with pytest.raises(ValueError, match="not patched"):
        patcher.unpatch_generation(model)


def test_sampling_with_top_k_equals_hugging_face_under_one_seed(model, kernel_calls) -> None:
    options = {"do_sample": True, "repetition_penalty": 1.3, "top_k": 20, "temperature": 0.7}
    want_tokens, want_scores, _ = _generate(model, seed=5, **options)
    patcher.patch_generation(model)
    try:
        tokens, scores, _ = _generate(model, seed=5, **options)
    finally:
        patcher.unpatch_generation(model)
    assert kernel_calls["top_k_mask_logits"] == kernel_calls["repetition_penalty_by_ids"] == STEPS
    assert kernel_calls["sample_from_probs"] == 0
    assert torch.equal(scores, want_scores)
    assert torch.equal(tokens, want_tokens)
    assert (scores > -math.inf).sum(-1).min() >= 20


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_processors_equal_hugging_face(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(2)
    scores = (3 * torch.randn(3, 700, generator=g)).to(dtype)
    scores[:, ::9] = scores[:, ::9].round()  # ties
    ids = torch.randint(0, 700, (3, 40), generator=g)
    ids[:, 20:] = ids[:, :20]
    for ignore in (None, 7, torch.tensor([0, 5, 39])):
        hf = RepetitionPenaltyLogitsProcessor(1.3, prompt_ignore_length=ignore)
        ours = patcher.on_kernels(RepetitionPenaltyLogitsProcessor(1.3, ignore))
        assert type(ours) is patcher.SyclRepetitionPenaltyLogitsProcessor
        assert torch.equal(ours(ids, scores.clone()), hf(ids, scores.clone()))
    for k, keep in ((1, 1), (30, 1), (5, 8), (1000, 1)):
        hf = TopKLogitsWarper(k, min_tokens_to_keep=keep)
        ours = patcher.on_kernels(TopKLogitsWarper(k, min_tokens_to_keep=keep))
        assert type(ours) is patcher.SyclTopKLogitsWarper
        assert torch.equal(ours(ids, scores), hf(ids, scores))


def test_fallbacks_run_hugging_face(kernel_calls) -> None:
    """Another filter value, 3-D scores, scores needing a gradient: HF's own code."""
    scores = torch.randn(2, 100)
    ids = torch.randint(0, 100, (2, 6))
    warper = patcher.on_kernels(TopKLogitsWarper(4, filter_value=-50.0))
    assert torch.equal(warper(ids, scores), TopKLogitsWarper(4, filter_value=-50.0)(ids, scores))
    penalty = patcher.on_kernels(RepetitionPenaltyLogitsProcessor(1.5))
    want = RepetitionPenaltyLogitsProcessor(1.5)(ids, scores.clone()[:, None])
    assert torch.equal(penalty(ids, scores.clone()[:, None]), want)
    grad = scores.clone().requires_grad_()
    assert penalty(ids, grad).requires_grad
    # Scores sample_from_probs does not take: the warpers it stands for run instead.
    scores = torch.randn(2, 30, dtype=torch.float64).requires_grad_()
    with torch.enable_grad():
        got = patcher.SyclSamplingLogitsProcessor(5, None, None, (TopKLogitsWarper(5),))(
            None, scores
        )
    assert torch.equal(got, TopKLogitsWarper(5)(None, scores))
    assert sum(kernel_calls.values()) == 0
    other = TopKLogitsWarper(3)
    other.__class__ = type("Mine", (TopKLogitsWarper,), {})
    assert patcher.on_kernels(other) is other  # a subclass of HF's is left alone


# --- sample=True: tokens from sample_from_probs ---


def _allowed(logits: torch.Tensor, temperature: float, warpers: list) -> torch.Tensor:
    """Which tokens Hugging Face's own warpers keep, per step: [rows, steps, vocab]."""
    steps = []
    for s in range(logits.shape[1]):
        scores = TemperatureLogitsWarper(temperature)(None, logits[:, s].clone())
        for warper in warpers:
            scores = warper(None, scores)
        steps.append(torch.isfinite(scores))
    return torch.stack(steps, 1)


SAMPLED = [
    ({"top_k": 20, "top_p": 0.8}, [TopKLogitsWarper(20), TopPLogitsWarper(0.8)]),
    ({"top_k": 0, "top_p": 0.6, "temperature": 0.7}, [TopPLogitsWarper(0.6)]),
    ({"top_k": 50, "min_p": 0.2}, [TopKLogitsWarper(50), MinPLogitsWarper(0.2)]),
]


@pytest.mark.parametrize(("options", "warpers"), SAMPLED, ids=["top_k_top_p", "top_p", "min_p"])
def test_sampled_tokens_repeat_under_a_seed_and_stay_in_the_support(
    model, kernel_calls, options: dict, warpers: list
) -> None:
    report = patcher.patch_generation(model, sample=True)
    try:
        tokens, scores, logits = _generate(model, 3, do_sample=True, **options)
        again, _, _ = _generate(model, 3, do_sample=True, **options)
        other, _, _ = _generate(model, 4, do_sample=True, **options)
    finally:
        patcher.unpatch_generation(model)
    assert "sample_from_probs" in report[-1]
    assert kernel_calls["sample_from_probs"] == 3 * STEPS
    assert kernel_calls["top_k_mask_logits"] == 0  # top-k is sample_from_probs' own
    assert torch.equal(tokens, again)
    assert not torch.equal(tokens, other)
    assert torch.equal(scores.argmax(-1), tokens)  # one-hot: 0 at the drawn token
    assert bool(((scores == 0).sum(-1) == 1).all())
    allowed = _allowed(logits, options.get("temperature", 1.0), warpers)
    picked = allowed.gather(2, tokens[..., None])[..., 0]
    assert bool(picked.all()), f"tokens outside the kept support at {(~picked).nonzero()}"
    assert int(allowed.sum(-1).max()) > 1  # the filters left a choice


def test_sampling_with_repetition_penalty_and_switching_modes(model, kernel_calls) -> None:
    patcher.patch_generation(model)
    report = patcher.patch_generation(model, sample=True)  # a second call sets `sample`
    try:
        assert patcher.patch_generation(model, sample=True) == report
        tokens, _, _ = _generate(model, 6, do_sample=True, top_k=10, repetition_penalty=1.2)
        assert kernel_calls["sample_from_probs"] == kernel_calls["repetition_penalty_by_ids"]
        assert kernel_calls["sample_from_probs"] == STEPS
        patcher.patch_generation(model)  # and back: Hugging Face's tokens again
        options = {"do_sample": True, "top_k": 10, "top_p": 0.9}
        got, _, _ = _generate(model, 6, **options)
    finally:
        patcher.unpatch_generation(model)
    assert kernel_calls["sample_from_probs"] == STEPS
    assert torch.equal(got, _generate(model, 6, **options)[0])
    assert tokens.shape == (2, STEPS)


def test_sampling_runs_hugging_face_where_the_kernels_do_not_apply(model, kernel_calls) -> None:
    want, _, _ = _generate(model, 5, do_sample=True, top_k=20)
    top_p = LogitsProcessorList([TopPLogitsWarper(0.5)])
    patcher.patch_generation(model, sample=True)
    try:
        _generate(model, 5, do_sample=True, top_k=20, num_beams=2)  # beam sampling: HF's
        _generate(model, 5, do_sample=True, top_k=20, typical_p=0.9)  # a warper after top-k
        # Greedy: a warper passed in is not sampled (one-hot scores would make it so).
        ours, _, _ = _generate(model, logits_processor=top_p)
        assert kernel_calls["sample_from_probs"] == 0
    finally:
        patcher.unpatch_generation(model)
    assert torch.equal(ours, _generate(model, logits_processor=top_p)[0])
    assert "_get_logits_processor" not in model.__dict__
    assert torch.equal(_generate(model, 5, do_sample=True, top_k=20)[0], want)  # HF's again
    with pytest.raises(ValueError, match="not patched"):
        patcher.unpatch_generation(model)


def test_processors_on_kernels_samples_only_a_trailing_block() -> None:
    block = [TopKLogitsWarper(5), TopPLogitsWarper(0.9), MinPLogitsWarper(0.1)]
    temperature = TemperatureLogitsWarper(0.5)
    got = patcher.processors_on_kernels(LogitsProcessorList([temperature, *block]), sample=True)
    assert len(got) == 2 and got[0] is temperature
    assert isinstance(got[1], patcher.SyclSamplingLogitsProcessor)
    assert (got[1].top_k, got[1].top_p, got[1].min_p) == (5, 0.9, 0.1)
    assert got[1].warpers == tuple(block)
    unsampled = patcher.processors_on_kernels(LogitsProcessorList(block))
    assert [type(p) for p in unsampled] == [
        patcher.SyclTopKLogitsWarper,
        TopPLogitsWarper,
        MinPLogitsWarper,
    ]
    converted = LogitsProcessorList([patcher.on_kernels(TopKLogitsWarper(5))])
    (ours,) = patcher.processors_on_kernels(converted, sample=True)
    assert (ours.top_k, ours.top_p, ours.min_p) == (5, None, None)
    mine = type("Mine", (TopPLogitsWarper,), {})
    for kept in (
        [*block, TypicalLogitsWarper(0.9)],
        [TopPLogitsWarper(0.9), TopKLogitsWarper(5)],  # top-p first: another filter
        [TopKLogitsWarper(5), TopKLogitsWarper(3)],  # a filter twice
        [TopKLogitsWarper(5, min_tokens_to_keep=2)],  # beam sampling's
        [TopKLogitsWarper(5, filter_value=-50.0)],  # filtered tokens stay possible
        [mine(0.9)],  # a subclass may filter otherwise
    ):
        got = patcher.processors_on_kernels(LogitsProcessorList(kept), sample=True)
        assert len(got) == len(kept)
        assert not any(isinstance(p, patcher.SyclSamplingLogitsProcessor) for p in got)
