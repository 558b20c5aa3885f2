"""sycl_kernels.specs.model_variants: a config.json -> the variants a patched model calls."""

from __future__ import annotations

import pytest
import torch
from sycl_kernels._dtypes import BY_NAME
from sycl_kernels.specs.model_variants import MODEL_FAMILIES, config_dtype, model_specs
from sycl_kernels.specs.spec import KernelSpec

from tests.conftest import unkept_launches

# Config.json-shaped, small; shared sizes so the three name few distinct kernels
# (tests/test_cli.py compiles them).
_COMMON = {
    "hidden_size": 96,
    "intermediate_size": 160,
    "num_hidden_layers": 2,
    "num_attention_heads": 3,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "vocab_size": 128,
    "dtype": "bfloat16",
}
LLAMA = {"model_type": "llama", **_COMMON, "hidden_act": "silu"}
QWEN3 = {"model_type": "qwen3", **_COMMON, "hidden_act": "silu"}
GEMMA3 = {"model_type": "gemma3_text", **_COMMON, "hidden_activation": "gelu_pytorch_tanh"}

EXPECTED = {
    "llama": [
        "rmsnorm_bf16_h96_cpu",
        "silu_and_mul_bf16_d160_cpu",
        "rope_bf16_d32_r32_neox_i64_cbf16_cpu",
    ],
    "qwen3": [
        "rmsnorm_bf16_h96_cpu",
        "rmsnorm_bf16_h32_cpu",
        "silu_and_mul_bf16_d160_cpu",
        "rope_bf16_d32_r32_neox_i64_cbf16_cpu",
    ],
    "gemma3_text": [
        "gemma_rmsnorm_bf16_h96_cpu",
        "gemma_rmsnorm_bf16_h32_cpu",
        "gelu_tanh_and_mul_bf16_d160_cpu",
        "rope_bf16_d32_r32_neox_i64_cbf16_cpu",
    ],
}


@pytest.mark.parametrize("config", [LLAMA, QWEN3, GEMMA3], ids=lambda c: c["model_type"])
def test_model_specs_names(config: dict) -> None:
    specs = model_specs(config, config_dtype(config), "cpu")
    assert [s.name for s in specs] == EXPECTED[config["model_type"]]


def test_dtype_and_tuning_are_in_every_name() -> None:
    names = [s.name for s in model_specs(LLAMA, BY_NAME["fp32"], "gpu")]
    # A float32 cos/sin cache is the kernel's default: no cache suffix.
    assert names == [
        "rmsnorm_fp32_h96_gpu",
        "silu_and_mul_fp32_d160_gpu",
        "rope_fp32_d32_r32_neox_i64_gpu",
    ]


def test_config_shapes_other_families_take() -> None:
    bf16 = BY_NAME["bf16"]
    phi3 = {"model_type": "phi3", **_COMMON, "head_dim": None, "partial_rotary_factor": 0.5}
    rope = model_specs(phi3, bf16, "cpu")[-1]
    assert rope.name == "rope_bf16_d32_r16_neox_i64_cbf16_cpu"
    olmo2 = {"model_type": "olmo2", **_COMMON}
    assert [s.name for s in model_specs(olmo2, bf16, "cpu")][:2] == [
        "rmsnorm_bf16_h96_cpu",
        "rmsnorm_bf16_h32_cpu",  # k_norm: 1 kv head of 32; q_norm (3 x 32) is hidden's
    ]
    moe = {"model_type": "qwen3_moe", **_COMMON, "moe_intermediate_size": 48}
    assert "silu_and_mul_bf16_d48_cpu" in [s.name for s in model_specs(moe, bf16, "cpu")]
    assert "silu_and_mul_bf16_d160_cpu" not in [s.name for s in model_specs(moe, bf16, "cpu")]
    unpatched_act = {**LLAMA, "hidden_act": "relu"}
    assert not any("_and_mul" in s.name for s in model_specs(unpatched_act, bf16, "cpu"))
    assert config_dtype({"model_type": "llama"}) == bf16
    assert config_dtype({"torch_dtype": "float16"}) == BY_NAME["fp16"]


def test_unknown_model_type_lists_the_supported_ones() -> None:
    with pytest.raises(ValueError, match=r"'bert' is not supported; supported: llama, mistral"):
        model_specs({**LLAMA, "model_type": "bert"}, BY_NAME["bf16"], "cpu")
    with pytest.raises(ValueError, match=r"hidden_size=None; expected an int"):
        model_specs({"model_type": "llama"}, BY_NAME["bf16"], "cpu")


# --- Cross-check against the integration: what a patched model's forward looks up ---


def test_the_integration_patches_the_families_of_this_table() -> None:
    patcher = pytest.importorskip("sycl_kernels.integrations.transformers")
    assert patcher.FAMILIES is MODEL_FAMILIES


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("model_type", sorted(MODEL_FAMILIES))
def test_model_specs_are_what_a_patched_model_launches(
    model_type: str, dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    transformers = pytest.importorskip("transformers")
    from sycl_kernels.integrations import transformers as patcher
    from sycl_kernels.ops import _launch

    from tests.integrations.test_transformers import OVERRIDES, TINY

    # Qwen3-MoE with a dense layer too, at another width than the experts'.
    moe = {"qwen3_moe": {"moe_intermediate_size": 1024, "mlp_only_layers": [0]}}
    settings = {**TINY, **OVERRIDES.get(model_type, {}), **moe.get(model_type, {})}
    if model_type == "gemma3":  # multimodal: text settings nested; a text-only forward
        vision = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1}
        settings = {
            "text_config": {**settings, **OVERRIDES["gemma3_text"]},
            "vision_config": {**vision, "num_attention_heads": 2, "image_size": 28},
            "mm_tokens_per_image": 4,
        }
    hf_config = transformers.AutoConfig.for_model(model_type, **settings)
    torch_dtype = BY_NAME[dtype].torch_dtype
    model = transformers.AutoModelForCausalLM.from_config(hf_config, dtype=torch_dtype).eval()
    launched: set[str] = set()

    class _NoKernel:
        """Launches nothing: no compile; the ops' outputs stay as allocated."""

        def _bind(self, *args: object) -> _NoKernel:
            return self

        def __call__(self, *args: object) -> None:
            pass

    def record(spec: KernelSpec, queue: object) -> _NoKernel:
        launched.add(spec.name)
        return _NoKernel()

    monkeypatch.setattr(_launch, "get_kernel", record)
    unkept_launches(monkeypatch)
    patcher.patch(model)
    try:
        with torch.no_grad():
            model(torch.randint(3, 100, (1, 5)))
    finally:
        patcher.unpatch(model)
    # The config as save_pretrained writes it (transformers 5: rope_parameters).
    expected = {s.name for s in model_specs(hf_config.to_dict(), BY_NAME[dtype], "cpu")}
    assert launched == expected


def test_text_config_of_a_multimodal_config() -> None:
    gemma3 = {
        "model_type": "gemma3",
        "text_config": {k: v for k, v in GEMMA3.items() if k != "model_type"},
    }
    assert [s.name for s in model_specs(gemma3, config_dtype(gemma3), "cpu")] == EXPECTED[
        "gemma3_text"
    ]
