"""sycl_kernels.specs.model_variants: the kernel variants a patched Hugging Face model calls.

`model_specs(config, dtype, tuned_for)` reads a config.json's dict and returns the
specs that the ops ask for when `sycl_kernels.integrations.transformers.patch`
has swapped the kernels into that model (`precompile --model` compiles them).
`MODEL_FAMILIES` is the one table of the families both read; it is here, not in
the integration, because that imports transformers, which precompile does not need.
"""

from __future__ import annotations

import importlib
import types
from dataclasses import dataclass
from typing import Literal

from .._dtypes import DTYPES, DType
from .activation import act_and_mul_spec
from .norm import rmsnorm_spec
from .rope import rope_spec
from .routing import MAX_EXPERTS, MAX_TOPK, moe_topk_spec
from .spec import KernelSpec

# The norm formulas: "llama" = weight * round(x_normed) (two roundings, in the
# weight's dtype); "olmo2" = round(weight * x_normed); "gemma" = round(x_normed * (1 + weight)).
NormStyle = Literal["llama", "olmo2", "gemma"]


@dataclass(frozen=True)
class ModelFamily:
    """A Hugging Face model family: the classes the integration patches in it, and what
    they launch once patched."""

    name: str
    """Its modeling module: transformers.models.<name>.modeling_<name>."""
    prefix: str
    """Class-name prefix: <prefix>RMSNorm, <prefix>MLP, <prefix>Experts, <prefix>TopKRouter."""
    norm: NormStyle = "llama"
    """The RMSNorm's formula; "gemma" runs gemma_rmsnorm, the others rmsnorm."""
    mlp: Literal["split", "fused"] | None = "split"
    """gate_proj and up_proj, one gate_up_proj (Phi-3), or no dense MLP class (Mixtral)."""
    experts: bool = False
    """MoE experts call act_and_mul at moe_intermediate_size (else intermediate_size)."""
    router: Literal["mixtral", "qwen"] | None = None
    """The MoE router, <prefix>TopKRouter, on moe_topk (softmax, top-k, renormalized):
    always, with float32 weights (Mixtral), or per norm_topk_prob, with weights in the
    logits' dtype (Qwen-MoE)."""
    qk_norm: Literal["head", "all_heads"] | None = None
    """Per-head q/k norms at head_dim (Qwen3, Gemma 3), or over all heads at once (OLMo 2)."""
    activation_key: str = "hidden_act"
    default_activation: str = "silu"
    """Hugging Face's default for the activation when config.json leaves it out."""
    float32_rotary: bool = False
    """The rotary embedding returns cos/sin in float32 (OLMo 2), not the model's dtype."""
    experts_gate: Literal["act_and_mul", "swigluoai"] = "act_and_mul"
    """The experts' gate: act(gate) * up of the two halves, or GPT-OSS's clamped SwiGLU
    of interleaved gate and up (swigluoai_and_mul)."""
    half_cos: bool = False
    """cos/sin hold each frequency once (GPT-OSS), not twice (cat(freqs, freqs))."""
    interleaved_rope: bool = False
    """The modeling module also has apply_rotary_pos_emb_interleave (DeepSeek-V3's
    rope_interleave): pairs (x0, x1), (x2, x3), ... rotated, returned de-interleaved."""
    mla: bool = False
    """Multi-head latent attention (DeepSeek-V3): norms at q_lora_rank and kv_lora_rank,
    the rotary on heads of qk_rope_head_dim."""
    unmapped: tuple[tuple[str, str], ...] = ()
    """(class suffix, why): the family's classes no kernel reproduces, for the report."""

    @property
    def module(self) -> types.ModuleType:
        """The modeling module; imports transformers (the integration's use, not precompile's)."""
        return importlib.import_module(f"transformers.models.{self.name}.modeling_{self.name}")

    def cls(self, suffix: str) -> type:
        """The modeling module's class <prefix><suffix>: RMSNorm, MLP, Experts or TopKRouter."""
        return getattr(self.module, self.prefix + suffix)


_GEMMA3 = ModelFamily(
    "gemma3",
    "Gemma3",
    norm="gemma",
    qk_norm="head",
    activation_key="hidden_activation",
    default_activation="gelu_pytorch_tanh",
)

# model_type -> family.
MODEL_FAMILIES: dict[str, ModelFamily] = {
    "llama": ModelFamily("llama", "Llama"),
    "mistral": ModelFamily("mistral", "Mistral"),
    "mixtral": ModelFamily("mixtral", "Mixtral", mlp=None, experts=True, router="mixtral"),
    "qwen2": ModelFamily("qwen2", "Qwen2"),
    "qwen3": ModelFamily("qwen3", "Qwen3", qk_norm="head"),
    "qwen3_moe": ModelFamily("qwen3_moe", "Qwen3Moe", experts=True, qk_norm="head", router="qwen"),
    # GemmaMLP reads hidden_act; Gemma 2 and 3 read hidden_activation.
    "gemma": ModelFamily("gemma", "Gemma", norm="gemma", default_activation="gelu_pytorch_tanh"),
    "gemma2": ModelFamily(
        "gemma2",
        "Gemma2",
        norm="gemma",
        activation_key="hidden_activation",
        default_activation="gelu_pytorch_tanh",
    ),
    "gemma3": _GEMMA3,
    # Gemma 3's text-only model_type: the same modeling module and classes.
    "gemma3_text": _GEMMA3,
    "phi3": ModelFamily("phi3", "Phi3", mlp="fused"),
    "granite": ModelFamily("granite", "Granite"),
    "olmo2": ModelFamily("olmo2", "Olmo2", norm="olmo2", qk_norm="all_heads", float32_rotary=True),
    # Its MoE block is DeepseekV3MoE; DeepseekV3MLP is the dense MLP and the shared experts.
    "deepseek_v3": ModelFamily(
        "deepseek_v3",
        "DeepseekV3",
        experts=True,
        interleaved_rope=True,
        mla=True,
        unmapped=(
            (
                "TopkRouter",
                "its sigmoid scores, e_score_correction_bias and group-limited top-k "
                "are not moe_topk's softmax top-k",
            ),
        ),
    ),
    # GptOssMLP is the MoE block (router and experts): no dense MLP.
    "gpt_oss": ModelFamily(
        "gpt_oss",
        "GptOss",
        norm="olmo2",
        mlp=None,
        experts=True,
        experts_gate="swigluoai",
        half_cos=True,
        unmapped=(
            (
                "TopKRouter",
                "not mapped: it takes the top-k of its biased logits and softmaxes those "
                "k; the mapped routers (moe_topk) softmax over all experts first",
            ),
        ),
    ),
}

# Hugging Face activation names (transformers.activations.ACT2CLS) whose modules the
# integration maps to an act_and_mul kernel; others run Hugging Face's code.
HF_ACTIVATIONS = {
    "silu": "silu",
    "swish": "silu",
    "gelu": "gelu",
    "gelu_python": "gelu",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_python_tanh": "gelu_tanh",
    "gelu_new": "gelu_tanh",
}

BY_TORCH_NAME: dict[str, DType] = {d.torch_name: d for d in DTYPES}


def _family(config: dict) -> ModelFamily:
    model_type = config.get("model_type")
    try:
        return MODEL_FAMILIES[model_type]
    except KeyError:
        raise ValueError(
            f"model_specs(): model_type {model_type!r} is not supported; "
            f"supported: {', '.join(MODEL_FAMILIES)}"
        ) from None


def _text_config(config: dict) -> dict:
    """The language model's settings: a multimodal config (Gemma 3) nests them."""
    return {**config, **config.get("text_config", {})}


def _int(config: dict, *keys: str) -> int:
    """The first of `keys` the config has, which must be an int."""
    key = next((k for k in keys if k in config), keys[-1])
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(
            f"model_specs(): config has {key}={value!r}; expected an int "
            f"(model_type {config.get('model_type')!r})"
        )
    return value


def config_dtype(config: dict) -> DType:
    """The model's dtype from config.json (dtype, or the older torch_dtype); bf16 if unset."""
    text = _text_config(config)
    name = next((c[k] for c in (config, text) for k in ("dtype", "torch_dtype") if c.get(k)), None)
    if name is None:
        return BY_TORCH_NAME["bfloat16"]
    try:
        return BY_TORCH_NAME[name]
    except KeyError:
        raise ValueError(
            f"config_dtype(): config dtype {name!r} has no kernels; "
            f"expected one of {', '.join(BY_TORCH_NAME)} (or pass --dtype)"
        ) from None


def _rotary_dims(config: dict, head_dim: int) -> set[int]:
    """Rotary widths: head_dim * partial_rotary_factor, top level or in rope_parameters
    (per layer type in some families)."""
    params = config.get("rope_parameters") or {}
    tables = [p for p in params.values() if isinstance(p, dict)] or [params]
    default = config.get("partial_rotary_factor", 1.0)
    return {int(head_dim * t.get("partial_rotary_factor", default)) for t in tables}


def model_specs(config: dict, dtype: DType, tuned_for: str) -> list[KernelSpec]:
    """The specs a patched model of `config` launches in `dtype` on a `tuned_for` device.

    ValueError for an unsupported model_type (naming the supported ones) or a
    missing size.
    """
    family = _family(config)
    text = _text_config(config)
    hidden = _int(text, "hidden_size")
    heads = _int(text, "num_attention_heads")
    head_dim = text.get("head_dim") or hidden // heads
    if family.mla:
        head_dim = _int(text, "qk_rope_head_dim")

    norm_widths = [hidden]
    if family.mla:
        # q_lora_rank null: q_proj, no q_a_layernorm.
        norm_widths += [text["q_lora_rank"]] if text.get("q_lora_rank") else []
        norm_widths.append(_int(text, "kv_lora_rank"))
    if family.qk_norm == "head":
        norm_widths.append(head_dim)
    elif family.qk_norm == "all_heads":
        kv_heads = text.get("num_key_value_heads") or heads
        norm_widths += [heads * head_dim, kv_heads * head_dim]
    gemma = family.norm == "gemma"
    specs = [rmsnorm_spec(dtype, width, tuned_for, gemma=gemma) for width in norm_widths]

    activation = HF_ACTIVATIONS.get(text.get(family.activation_key) or family.default_activation)
    if family.experts_gate == "swigluoai":
        dim = _int(text, "intermediate_size")
        specs.append(act_and_mul_spec("swigluoai", dtype, dim, tuned_for, interleaved=True))
    elif activation is not None:
        mlp_widths = []
        if family.experts:
            mlp_widths.append(_int(text, "moe_intermediate_size", "intermediate_size"))
        if family.mlp is not None and (not family.experts or _has_dense_layers(text, family)):
            mlp_widths.append(_int(text, "intermediate_size"))
        if family.mla:
            # DeepSeek-V3's shared experts, a DeepseekV3MLP (Hugging Face's default: 1).
            shared = text.get("n_shared_experts", 1)
            mlp_widths.append(_int(text, "moe_intermediate_size") * shared)
        specs += [act_and_mul_spec(activation, dtype, d, tuned_for) for d in mlp_widths]

    # The router's, where config.json gives its sizes (else it compiles on first use).
    experts = text.get("num_local_experts", text.get("num_experts"))
    topk = text.get("num_experts_per_tok")
    sized = isinstance(experts, int) and isinstance(topk, int)
    if family.router is not None and sized and 0 < topk <= min(experts, MAX_TOPK, MAX_EXPERTS):
        specs.append(moe_topk_spec(dtype, dtype, experts, topk, "softmax"))

    # The rotary replacement: NeoX style, int64 positions from torch.arange, cos/sin
    # as HF's rotary embedding returns them, no KV store; an odd width runs HF's code.
    cache = BY_TORCH_NAME["float32"] if family.float32_rotary else dtype
    specs += [
        rope_spec(dtype, head_dim, width, True, "i64", False, cache, tuned_for)
        for width in sorted(_rotary_dims(text, head_dim))
        if width % 2 == 0 and 0 < width <= head_dim
    ]
    unique = {spec.name: spec for spec in specs}
    return list(unique.values())


def _has_dense_layers(config: dict, family: ModelFamily) -> bool:
    """Qwen3-MoE: layers listed in mlp_only_layers, or off the decoder_sparse_step, or
    all when there are no experts, have a dense MLP at intermediate_size; DeepSeek-V3:
    the first_k_dense_replace first layers (Hugging Face's default: 3)."""
    return (
        bool(config.get("mlp_only_layers"))
        or (family.mla and config.get("first_k_dense_replace", 3) > 0)
        or config.get("decoder_sparse_step", 1) > 1
        or config.get("num_experts", 1) == 0
    )
