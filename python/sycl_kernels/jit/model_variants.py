"""sycl_kernels.jit.model_variants: the kernel variants a patched Hugging Face model calls.

`model_specs(config, dtype, tuned_for)` reads a config.json's dict and returns the
specs that the ops ask for when `sycl_kernels.integrations.transformers.patch`
has swapped the kernels into that model (`precompile --model` compiles them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from .._dtypes import DTYPES, DType
from .activation import act_and_mul_spec
from .norm import rmsnorm_spec
from .rope import rope_spec
from .spec import KernelSpec


@dataclass(frozen=True)
class ModelFamily:
    """What a family's patched layers launch (integrations/transformers.py patches them)."""

    gemma: bool = False
    """Norms are Gemma's (1 + weight) form: gemma_rmsnorm."""
    qk_norm: Literal["head", "all_heads"] | None = None
    """Per-head q/k norms at head_dim (Qwen3, Gemma 3), or over all heads at once (OLMo 2)."""
    experts: bool = False
    """MoE experts call act_and_mul at moe_intermediate_size (else intermediate_size)."""
    dense_mlp: bool = True
    activation_key: str = "hidden_act"
    default_activation: str = "silu"
    """Hugging Face's default for the activation when config.json leaves it out."""
    float32_rotary: bool = False
    """The rotary embedding returns cos/sin in float32 (OLMo 2), not the model's dtype."""


_GEMMA = ModelFamily(
    gemma=True, activation_key="hidden_activation", default_activation="gelu_pytorch_tanh"
)

# model_type -> family. The same keys as integrations.transformers.FAMILIES (a test
# checks); kept here because that module imports transformers, which precompile
# does not need.
MODEL_FAMILIES: dict[str, ModelFamily] = {
    "llama": ModelFamily(),
    "mistral": ModelFamily(),
    "mixtral": ModelFamily(experts=True, dense_mlp=False),
    "qwen2": ModelFamily(),
    "qwen3": ModelFamily(qk_norm="head"),
    "qwen3_moe": ModelFamily(qk_norm="head", experts=True),
    # GemmaMLP reads hidden_act; Gemma 2 and 3 read hidden_activation.
    "gemma": ModelFamily(gemma=True, default_activation="gelu_pytorch_tanh"),
    "gemma2": _GEMMA,
    "gemma3": replace(_GEMMA, qk_norm="head"),
    "phi3": ModelFamily(),
    "granite": ModelFamily(),
    "olmo2": ModelFamily(qk_norm="all_heads", float32_rotary=True),
}
MODEL_FAMILIES["gemma3_text"] = MODEL_FAMILIES["gemma3"]

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

    norm_widths = [hidden]
    if family.qk_norm == "head":
        norm_widths.append(head_dim)
    elif family.qk_norm == "all_heads":
        kv_heads = text.get("num_key_value_heads") or heads
        norm_widths += [heads * head_dim, kv_heads * head_dim]
    specs = [rmsnorm_spec(dtype, width, tuned_for, gemma=family.gemma) for width in norm_widths]

    activation = HF_ACTIVATIONS.get(text.get(family.activation_key) or family.default_activation)
    if activation is not None:
        mlp_widths = []
        if family.experts:
            mlp_widths.append(_int(text, "moe_intermediate_size", "intermediate_size"))
        if family.dense_mlp and (not family.experts or _has_dense_layers(text)):
            mlp_widths.append(_int(text, "intermediate_size"))
        specs += [act_and_mul_spec(activation, dtype, d, tuned_for) for d in mlp_widths]

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


def _has_dense_layers(config: dict) -> bool:
    """Qwen3-MoE: layers listed in mlp_only_layers, or off the decoder_sparse_step, or
    all when there are no experts, have a dense MLP at intermediate_size."""
    return (
        bool(config.get("mlp_only_layers"))
        or config.get("decoder_sparse_step", 1) > 1
        or config.get("num_experts", 1) == 0
    )
