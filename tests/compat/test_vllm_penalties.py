"""sycl_kernels.compat.vllm.apply_repetition_penalties_ against vLLM's torch form
(vllm/_custom_ops.py apply_repetition_penalties_torch, the formula of its CUDA kernel):
in place, None returned, bit for bit in every dtype, penalties in logits' dtype (vLLM's)
or float32."""

from __future__ import annotations

import pytest
import torch
from sycl_kernels.compat import vllm

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _vllm_torch_form(logits, prompt_mask, output_mask, repetition_penalties) -> torch.Tensor:
    """vLLM's fallback, out of place."""
    vocab = logits.shape[1]
    penalties = repetition_penalties.unsqueeze(1).repeat(1, vocab)
    penalties[~(prompt_mask | output_mask)] = 1.0
    return torch.where(logits > 0, logits / penalties, logits * penalties)


@pytest.mark.parametrize(
    ("num_seqs", "vocab", "penalty_dtype"),
    [(1, 32, None), (8, 32000, torch.float32), (64, 1000, None), (2, 151936, None)],
    ids=str,
)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_apply_repetition_penalties_(dtype, num_seqs, vocab, penalty_dtype) -> None:
    g = torch.Generator().manual_seed(num_seqs)
    logits = (3 * torch.randn(num_seqs, vocab, generator=g)).to(dtype)
    logits[:, ::13] = 0.0
    prompt_mask = torch.rand(num_seqs, vocab, generator=g) < 0.1
    output_mask = torch.rand(num_seqs, vocab, generator=g) < 0.05
    penalties = (0.5 + 1.5 * torch.rand(num_seqs, generator=g)).to(penalty_dtype or dtype)
    want = _vllm_torch_form(logits, prompt_mask, output_mask, penalties.to(dtype))
    if penalty_dtype is not None:  # float32 penalties: the formula in float32
        want = _vllm_torch_form(logits.float(), prompt_mask, output_mask, penalties).to(dtype)
    assert vllm.apply_repetition_penalties_(logits, prompt_mask, output_mask, penalties) is None
    assert torch.equal(logits, want)


def test_apply_repetition_penalties_checks_by_name() -> None:
    logits = torch.randn(2, 64)
    mask = torch.zeros(2, 64, dtype=torch.bool)
    with pytest.raises(TypeError, match="output_mask"):
        vllm.apply_repetition_penalties_(logits, mask, mask.int(), torch.ones(2))
    with pytest.raises(ValueError, match="repetition_penalties"):
        vllm.apply_repetition_penalties_(logits, mask, mask, torch.ones(3))
    with pytest.raises(ValueError, match="prompt_mask"):
        vllm.apply_repetition_penalties_(logits, mask[:, :32], mask, torch.ones(2))
