"""sycl_kernels.integrations.transformers on tiny random models of every family (no downloads)."""

from __future__ import annotations

import collections
import copy
from pathlib import Path

import pytest
import torch
import transformers
from sycl_kernels import ops
from sycl_kernels.integrations import transformers as patcher
from torch import nn

# Small enough for CPU tests, sized onto bundled kernel variants (kernels/variants.toml)
# where a family allows: hidden 512 or 1152 (Gemma norms), intermediate 2048, head_dim 64.
TINY = {
    "hidden_size": 512,
    "intermediate_size": 2048,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 64,
    "vocab_size": 512,
    "max_position_embeddings": 128,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
GEMMA = {"hidden_size": 1152}
OVERRIDES: dict[str, dict] = {
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 2048},
    "gemma": GEMMA,
    "gemma2": GEMMA,
    # Gemma 3's real head size: its q/k norms run on transposed [B, H, S, 256] views.
    "gemma3_text": {**GEMMA, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 256},
    # Partial rotary: 64 of 128.
    "phi3": {
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "partial_rotary_factor": 0.5,
    },
    # k_norm spans kv_heads * head_dim.
    "olmo2": {"num_key_value_heads": 8},
    # Layer 0 dense, layer 1 MoE (4 routed experts, a shared one); MLA with both LoRA norms.
    "deepseek_v3": {
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "n_group": 2,
        "topk_group": 1,
        "moe_intermediate_size": 2048,
        "first_k_dense_replace": 1,
        "q_lora_rank": 256,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 64,
        "v_head_dim": 64,
        "num_key_value_heads": 8,
    },
    "gpt_oss": {
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "layer_types": ["sliding_attention", "full_attention"],
        "sliding_window": 8,
    },
}
MODEL_TYPES = [
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi3",
    "granite",
    "olmo2",
]
KERNELS = ("rmsnorm", "gemma_rmsnorm", "act_and_mul", "apply_rope", "moe_topk")


def tiny_model(model_type: str, dtype: torch.dtype = torch.float32, **config) -> nn.Module:
    settings = {**TINY, **OVERRIDES.get(model_type, {}), **config}
    model = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.for_model(model_type, **settings), dtype=dtype
    ).eval()
    # Initialised norm weights are all ones (or zeros for 1 + w); make them count.
    with torch.no_grad():
        for module in model.modules():
            if type(module).__name__.endswith("RMSNorm"):
                module.weight.add_(0.2 * torch.randn_like(module.weight))
    return model


def count_kernel_calls(
    monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...]
) -> collections.Counter:
    """Counts the calls of these ops by the patched code (it looks them up on
    sycl_kernels.ops at call time, so a fallback to Hugging Face's code counts none)."""
    calls: collections.Counter = collections.Counter()
    for name in names:
        kernel = getattr(ops, name)

        def counted(*args, _kernel=kernel, _name=name, **kwargs):
            calls[_name] += 1
            return _kernel(*args, **kwargs)

        monkeypatch.setattr(ops, name, counted)
    return calls


@pytest.fixture
def kernel_calls(monkeypatch: pytest.MonkeyPatch) -> collections.Counter:
    return count_kernel_calls(monkeypatch, KERNELS)


def _logits(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(ids).logits


def _greedy(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=8, min_new_tokens=8, do_sample=False)


def _rope_on_kernels(model_type: str, kernel_calls: collections.Counter) -> bool:
    """Whether the family's module-level rotary function runs apply_rope now."""
    before = kernel_calls["apply_rope"]
    q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)
    cos, sin = torch.ones(1, 3, 8), torch.zeros(1, 3, 8)
    patcher.family(model_type).module.apply_rotary_pos_emb(q, k, cos, sin)
    return kernel_calls["apply_rope"] > before


def _assert_logits_close(got: torch.Tensor, expected: torch.Tensor) -> None:
    scale = expected.abs().max().item()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_patched_model_matches_hugging_face(
    model_type: str, kernel_calls: collections.Counter
) -> None:
    model = tiny_model(model_type)
    rope = patcher.family(model_type).module.apply_rotary_pos_emb
    ids = torch.randint(3, 512, (2, 12))
    logits, tokens = _logits(model, ids), _greedy(model, ids)

    report = patcher.patch(model)
    try:
        patched_logits, patched_tokens = _logits(model, ids), _greedy(model, ids)
    finally:
        patcher.unpatch(model)
    norm_op = "gemma_rmsnorm" if model_type.startswith("gemma") else "rmsnorm"
    assert any(f"layers.0.post_attention_layernorm: {norm_op}" in line for line in report)
    assert any(".mlp" in line and ": act_and_mul" in line for line in report)
    assert any("apply_rotary_pos_emb: apply_rope" in line for line in report)
    _assert_logits_close(patched_logits, logits)
    assert torch.equal(patched_tokens, tokens)
    # Every kind ran on its kernel, not on a fallback: one rope and one MLP per layer and step.
    layer_steps = 2 * (1 + 8)
    assert kernel_calls["apply_rope"] == kernel_calls["act_and_mul"] == layer_steps
    assert kernel_calls[norm_op] >= 2 * layer_steps
    # MoE families: their routers too, once a layer and step.
    routers = layer_steps if patcher.family(model_type).router else 0
    assert kernel_calls["moe_topk"] == routers
    assert sum(": moe_topk softmax" in line for line in report) == routers // (1 + 8)

    assert patcher.family(model_type).module.apply_rotary_pos_emb is rope
    assert not _rope_on_kernels(model_type, kernel_calls)
    assert torch.equal(_logits(model, ids), logits)


@pytest.mark.parametrize(("hidden_act", "kernel"), [("gelu", "gelu"), ("gelu_new", "gelu_tanh")])
def test_other_gated_activations(hidden_act: str, kernel: str) -> None:
    model = tiny_model("llama", num_hidden_layers=1, hidden_act=hidden_act)
    ids = torch.randint(3, 512, (1, 9))
    logits = _logits(model, ids)
    report = patcher.patch(model)
    try:
        assert f"model.layers.0.mlp: act_and_mul {kernel} (LlamaMLP)" in report
        _assert_logits_close(_logits(model, ids), logits)
    finally:
        patcher.unpatch(model)


def test_report_names_what_is_left_unpatched() -> None:
    model = tiny_model("llama", num_hidden_layers=1, hidden_act="relu")
    report = patcher.patch(model)
    try:
        assert "model.layers.0.mlp: unpatched, activation ReLU has no kernel" in "\n".join(report)
        assert any("LlamaDecoderLayer: unpatched, fused_add_rmsnorm not used" in r for r in report)
        assert patcher.patch(model) == report  # a second patch changes nothing
    finally:
        patcher.unpatch(model)
    with pytest.raises(ValueError, match="not patched"):
        patcher.unpatch(model)


def test_llama_norm_with_float32_weight_on_bf16_is_left_to_hugging_face() -> None:
    model = tiny_model("llama", dtype=torch.bfloat16, num_hidden_layers=1)
    model.model.norm.float()
    report = patcher.patch(model)
    patcher.unpatch(model)
    assert (
        "model.norm: unpatched, no kernel computes HF's llama-style norm of a torch.float32 "
        "weight on torch.bfloat16 activations"
    ) in report
    assert "model.layers.0.input_layernorm: rmsnorm (LlamaRMSNorm)" in report


# Per-call dtype rules, through the class patch: the kernel where it computes what
# HF computes (one rounding where HF rounds twice: within an ulp), HF's code elsewhere.
@pytest.mark.parametrize(
    ("model_type", "hidden"), [("llama", 512), ("olmo2", 512), ("gemma3", 1152)]
)
@pytest.mark.parametrize(
    ("dtype", "weight_dtype"),
    [
        (torch.float32, torch.float32),
        (torch.bfloat16, torch.bfloat16),
        (torch.bfloat16, torch.float32),
        (torch.float16, torch.float16),
        (torch.float16, torch.float32),
    ],
    ids=str,
)
def test_norm_follows_hugging_face_dtype_rules(
    model_type: str,
    hidden: int,
    dtype: torch.dtype,
    weight_dtype: torch.dtype,
    kernel_calls: collections.Counter,
) -> None:
    norm_cls = patcher.family(model_type).cls("RMSNorm")
    hf_forward = norm_cls.forward
    norm = norm_cls(hidden, eps=1e-6).to(weight_dtype)
    with torch.no_grad():
        norm.weight.normal_(0.5, 0.3)
    # A transposed [B, H, S, D]-like view: leading strides are free.
    x = torch.randn(2, 5, 3, hidden).to(dtype).transpose(1, 2)
    expected = hf_forward(norm, x)
    patcher.patch_class(model_type)
    try:
        got = norm(x)
    finally:
        patcher.unpatch_class(model_type)
    assert norm_cls.forward is hf_forward
    assert got.dtype == expected.dtype
    kernel_used = weight_dtype == dtype or model_type != "llama"
    assert sum(kernel_calls.values()) == int(kernel_used)
    tol = 1e-6 if dtype == torch.float32 else torch.finfo(dtype).eps
    torch.testing.assert_close(got.float(), expected.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("unsqueeze_dim", [1, 2])
@pytest.mark.parametrize(
    ("model_type", "head_dim", "rotary_dim"), [("llama", 64, 64), ("phi3", 128, 64)]
)
def test_rotary_function_matches_hugging_face(
    model_type: str,
    head_dim: int,
    rotary_dim: int,
    unsqueeze_dim: int,
    dtype: torch.dtype,
    kernel_calls: collections.Counter,
) -> None:
    module = patcher.family(model_type).module
    hf_rope = module.apply_rotary_pos_emb
    batch, seq = 2, 7

    def heads(count: int) -> torch.Tensor:
        shape = (batch, count, seq) if unsqueeze_dim == 1 else (batch, seq, count)
        return torch.randn(*shape, head_dim).to(dtype)

    q, k = heads(4), heads(2)
    # One position row for the batch, as HF passes it; scaled like attention_scaling.
    angles = torch.arange(seq)[:, None] * 0.3 ** torch.arange(rotary_dim // 2)
    emb = torch.cat((angles, angles), dim=-1)[None]
    cos, sin = (0.9 * emb.cos()).to(dtype), (0.9 * emb.sin()).to(dtype)
    q_before, k_before = q.clone(), k.clone()
    expected = hf_rope(q, k, cos, sin, unsqueeze_dim)
    patcher.patch_class(model_type)
    try:
        got = module.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim)
    finally:
        patcher.unpatch_class(model_type)
    assert module.apply_rotary_pos_emb is hf_rope
    assert kernel_calls["apply_rope"] == 1
    assert not _rope_on_kernels(model_type, kernel_calls)
    assert torch.equal(q, q_before) and torch.equal(k, k_before)  # out of place, as HF's
    eps = torch.finfo(dtype).eps
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=2 * eps, atol=2 * eps)


def test_two_models_patch_and_unpatch_independently(kernel_calls: collections.Counter) -> None:
    first, second = tiny_model("qwen2"), tiny_model("qwen2")
    module = patcher.family("qwen2").module
    hf_rope = module.apply_rotary_pos_emb
    ids = torch.randint(3, 512, (1, 9))
    first_logits, second_logits = _logits(first, ids), _logits(second, ids)
    patcher.patch(first)
    patcher.patch(second)
    patcher.unpatch(first)
    # The rotary function is module-level: it stays while `second` is patched.
    assert "forward" not in first.model.norm.__dict__
    assert "forward" in second.model.norm.__dict__
    assert _rope_on_kernels("qwen2", kernel_calls)
    _assert_logits_close(_logits(second, ids), second_logits)
    patcher.unpatch(second)
    assert module.apply_rotary_pos_emb is hf_rope
    assert not _rope_on_kernels("qwen2", kernel_calls)
    assert torch.equal(_logits(first, ids), first_logits)
    assert torch.equal(_logits(second, ids), second_logits)


def test_patched_model_deep_copies_and_pickles(tmp_path: Path) -> None:
    model = tiny_model("qwen3", num_hidden_layers=1)
    ids = torch.randint(3, 512, (1, 9))
    logits = _logits(model, ids)
    patcher.patch(model)
    try:
        torch.save(model, tmp_path / "model.pt")
        copies = [copy.deepcopy(model), torch.load(tmp_path / "model.pt", weights_only=False)]
    finally:
        patcher.unpatch(model)
    for patched_copy in copies:
        assert patched_copy.model.norm.forward.args[0] is patched_copy.model.norm
        _assert_logits_close(_logits(patched_copy, ids), logits)
        assert "model.norm: rmsnorm (Qwen3RMSNorm)" in patcher.patch(patched_copy)
        patcher.unpatch(patched_copy)
        assert torch.equal(_logits(patched_copy, ids), logits)


def test_apply_to_family_patches_classes_before_the_model_is_built(
    kernel_calls: collections.Counter,
) -> None:
    ids = torch.randint(3, 512, (1, 9))
    torch.manual_seed(1)
    reference = _logits(tiny_model("mistral"), ids)
    report = patcher.apply_to_mistral()
    try:
        assert patcher.apply_to_mistral() == report
        torch.manual_seed(1)
        model = tiny_model("mistral")
        _assert_logits_close(_logits(model, ids), reference)
    finally:
        patcher.unpatch_class("mistral")
    assert set(kernel_calls) == {"rmsnorm", "act_and_mul", "apply_rope"}
    assert torch.equal(_logits(model, ids), reference)
    with pytest.raises(ValueError, match="not patched"):
        patcher.unpatch_class("mistral")


def test_gradients_match_hugging_face() -> None:
    # rmsnorm and act_and_mul have gradients; the rotary function runs HF's code under
    # autograd (apply_rope is in place).
    model = tiny_model("llama", num_hidden_layers=1).train()
    ids = torch.randint(3, 512, (2, 8))

    def grads() -> list[torch.Tensor]:
        model.zero_grad()
        model(ids, labels=ids).loss.backward()
        return [p.grad.clone() for p in model.parameters()]

    expected = grads()
    patcher.patch(model)
    try:
        got = grads()
    finally:
        patcher.unpatch(model)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("model_type", ["qwen3", "gemma3_text"])
def test_compiled_patched_model_matches_eager(model_type: str) -> None:
    model = tiny_model(model_type)
    ids = torch.randint(3, 512, (2, 12))
    patcher.patch(model)
    try:
        eager = _logits(model, ids)
        compiled = _logits(torch.compile(model, fullgraph=True), ids)
    finally:
        patcher.unpatch(model)
    _assert_logits_close(compiled, eager)


def test_unknown_family_lists_the_supported_ones() -> None:
    model = transformers.AutoModelForCausalLM.from_config(
        transformers.GPT2Config(n_layer=1, n_embd=64, n_head=2, vocab_size=64)
    )
    with pytest.raises(ValueError, match=r"'gpt2' is not supported; supported: llama, mistral"):
        patcher.patch(model)
    with pytest.raises(ValueError, match=r"supported: .*gemma3_text, phi3, granite, olmo2"):
        patcher.patch_class("bert")
