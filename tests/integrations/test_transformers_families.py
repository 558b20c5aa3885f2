"""sycl_kernels.integrations.transformers on DeepSeek-V3 and GPT-OSS: tiny random models
(no downloads; test_transformers.OVERRIDES sizes them), patched against unpatched."""

from __future__ import annotations

import collections
import copy
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from sycl_kernels.integrations import transformers as patcher

import kernels
from tests.integrations.test_transformers import (
    _assert_logits_close,
    _greedy,
    _logits,
    count_kernel_calls,
    tiny_model,
)

KERNELS = ("rmsnorm", "act_and_mul", "swigluoai_and_mul", "apply_rope", "moe_topk")
FORWARDS = 1 + 8  # _logits, then _greedy's 8 steps
# Kernel calls per forward of the 2-layer models: DeepSeek-V3 has 4 norms a layer (q_a
# and kv_a too) and 3 MLPs (layer 0's, layer 1's experts and shared experts).
CALLS = {
    "deepseek_v3": {"rmsnorm": 9, "act_and_mul": 3, "apply_rope": 2},
    "gpt_oss": {"rmsnorm": 5, "swigluoai_and_mul": 2, "apply_rope": 2},
}


@pytest.fixture
def kernel_calls(monkeypatch: pytest.MonkeyPatch) -> collections.Counter:
    return count_kernel_calls(monkeypatch, KERNELS)


def _rope_functions(model_type: str) -> dict[str, object]:
    module = patcher.family(model_type).module
    names = ("apply_rotary_pos_emb", "apply_rotary_pos_emb_interleave")
    return {name: getattr(module, name) for name in names if hasattr(module, name)}


@pytest.mark.parametrize(
    ("model_type", "config"),
    [("deepseek_v3", {}), ("deepseek_v3", {"rope_interleave": False}), ("gpt_oss", {})],
    ids=["deepseek_v3", "deepseek_v3-no-interleave", "gpt_oss"],
)
def test_patched_model_matches_hugging_face(
    model_type: str, config: dict, kernel_calls: collections.Counter
) -> None:
    model = tiny_model(model_type, **config)
    ropes = _rope_functions(model_type)
    ids = torch.randint(3, 512, (2, 12))
    logits, tokens = _logits(model, ids), _greedy(model, ids)

    report = patcher.patch(model)
    try:
        patched_logits, patched_tokens = _logits(model, ids), _greedy(model, ids)
    finally:
        patcher.unpatch(model)
    _assert_logits_close(patched_logits, logits)
    assert torch.equal(patched_tokens, tokens)
    # Every mapped module ran on its kernel, none on a fallback; routers on none.
    expected = {name: n * FORWARDS for name, n in CALLS[model_type].items()}
    assert kernel_calls == expected

    text = "\n".join(report)
    assert "model.norm: rmsnorm" in text
    assert "apply_rotary_pos_emb: apply_rope" in text
    if model_type == "deepseek_v3":
        assert "model.layers.1.self_attn.q_a_layernorm: rmsnorm (DeepseekV3RMSNorm)" in report
        assert "model.layers.1.self_attn.kv_a_layernorm: rmsnorm (DeepseekV3RMSNorm)" in report
        assert "model.layers.0.mlp: act_and_mul silu (DeepseekV3MLP)" in report
        assert "model.layers.1.mlp.shared_experts: act_and_mul silu (DeepseekV3MLP)" in report
        assert "model.layers.1.mlp.experts: act_and_mul silu in _apply_gate" in text
        assert "apply_rotary_pos_emb_interleave: apply_rope" in text
        assert "model.layers.1.mlp.gate: unpatched, its sigmoid scores" in text
    else:
        assert "model.layers.0.input_layernorm: rmsnorm (GptOssRMSNorm)" in report
        assert (
            "model.layers.1.mlp.experts: swigluoai_and_mul alpha=1.702 limit=7.0 in "
            "_apply_gate (GptOssExperts)"
        ) in report
        assert "model.layers.1.mlp.router: unpatched, not mapped" in text

    assert _rope_functions(model_type) == ropes
    calls = dict(kernel_calls)
    assert torch.equal(_logits(model, ids), logits)
    assert kernel_calls == calls  # unpatched: no kernel, the rotary functions included


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("unsqueeze_dim", [1, 2])
@pytest.mark.parametrize(
    ("model_type", "name"),
    [("deepseek_v3", "apply_rotary_pos_emb_interleave"), ("gpt_oss", "apply_rotary_pos_emb")],
)
def test_rotary_function_matches_hugging_face(
    model_type: str,
    name: str,
    unsqueeze_dim: int,
    dtype: torch.dtype,
    kernel_calls: collections.Counter,
) -> None:
    module = patcher.family(model_type).module
    hf_rope = getattr(module, name)
    batch, seq, head_dim = 2, 7, 64

    def heads(count: int) -> torch.Tensor:
        shape = (batch, count, seq) if unsqueeze_dim == 1 else (batch, seq, count)
        return torch.randn(*shape, head_dim).to(dtype)

    # MLA's k is one head shared by all of q's.
    q, k = heads(4), heads(1 if model_type == "deepseek_v3" else 2)
    # GPT-OSS's cos/sin hold each frequency once, the others' twice.
    angles = torch.arange(seq)[:, None] * 0.3 ** torch.arange(head_dim // 2)
    emb = (angles if model_type == "gpt_oss" else torch.cat((angles, angles), dim=-1))[None]
    cos, sin = (0.9 * emb.cos()).to(dtype), (0.9 * emb.sin()).to(dtype)
    q_before, k_before = q.clone(), k.clone()
    expected = hf_rope(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)
    patcher.patch_class(model_type)
    try:
        got = getattr(module, name)(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)
    finally:
        patcher.unpatch_class(model_type)
    assert kernel_calls["apply_rope"] == 1
    assert getattr(module, name) is hf_rope
    assert torch.equal(q, q_before) and torch.equal(k, k_before)  # out of place, as HF's
    eps = torch.finfo(dtype).eps
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=2 * eps, atol=2 * eps)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gpt_oss_experts_gate_matches_hugging_face_beyond_the_limit(
    dtype: torch.dtype, kernel_calls: collections.Counter
) -> None:
    experts_cls = patcher.family("gpt_oss").cls("Experts")
    hf_gate = experts_cls._apply_gate
    experts = tiny_model("gpt_oss").model.layers[0].mlp.experts
    # Beyond +-limit (7.0) on both sides: the clamps count.
    gate_up = (6 * torch.randn(5, 2 * experts.intermediate_size)).to(dtype)
    # In bf16 HF rounds after each of its five ops, the kernel once: the reference is
    # HF's formula in float32, rounded once.
    expected = hf_gate(experts, gate_up.float()).to(dtype)
    patcher.patch_class("gpt_oss")
    try:
        got = experts._apply_gate(gate_up)
    finally:
        patcher.unpatch_class("gpt_oss")
    assert experts_cls._apply_gate is hf_gate
    assert kernel_calls["swigluoai_and_mul"] == 1
    tol = 1e-6 if dtype == torch.float32 else torch.finfo(dtype).eps
    torch.testing.assert_close(got.float(), expected.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("model_type", ["deepseek_v3", "gpt_oss"])
def test_patched_model_deep_copies_and_pickles(model_type: str, tmp_path: Path) -> None:
    model = tiny_model(model_type)
    ids = torch.randint(3, 512, (1, 9))
    logits = _logits(model, ids)
    patcher.patch(model)
    try:
        torch.save(model, tmp_path / "model.pt")
        copies = [copy.deepcopy(model), torch.load(tmp_path / "model.pt", weights_only=False)]
    finally:
        patcher.unpatch(model)
    for patched_copy in copies:
        experts = patched_copy.model.layers[1].mlp.experts
        assert experts._apply_gate.args[0] is experts
        _assert_logits_close(_logits(patched_copy, ids), logits)
        assert any(": rmsnorm" in line for line in patcher.patch(patched_copy))
        patcher.unpatch(patched_copy)
        assert torch.equal(_logits(patched_copy, ids), logits)


@pytest.fixture
def mapping() -> Iterator[None]:
    """A scope for kernels' global mapping: what a test registers is gone after it."""
    with kernels.use_kernel_mapping({}, inherit_mapping=False):
        yield


# What `kernelize` reaches: DeepSeek-V3's RMSNorm (its attention calls the module-level
# rotary functions, not a kernelized copy); GPT-OSS's rotary (its RMSNorm is unmarked).
@pytest.mark.parametrize(
    ("model_type", "calls"),
    [("deepseek_v3", {"rmsnorm": 9}), ("gpt_oss", {"apply_rope": 2})],
)
def test_kernelized_model_matches_hugging_face(
    model_type: str, calls: dict[str, int], mapping: None, kernel_calls: collections.Counter
) -> None:
    model = tiny_model(model_type)
    ids = torch.randint(3, 512, (2, 12))
    logits, tokens = _logits(model, ids), _greedy(model, ids)
    patcher.register_kernel_mapping()
    kernels.kernelize(model, device="cpu", mode=kernels.Mode.INFERENCE)
    got = _logits(model, ids)
    assert kernel_calls == calls
    _assert_logits_close(got, logits)
    assert torch.equal(_greedy(model, ids), tokens)
