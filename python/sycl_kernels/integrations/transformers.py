"""sycl_kernels.integrations.transformers: the kernels swapped into Hugging Face models.

    model = AutoModelForCausalLM.from_pretrained(...)
    report = patch(model)   # what now runs on the kernels, and what was left alone and why
    ...
    unpatch(model)          # Hugging Face's own code again, bit for bit

or, before a model is built, `patch_class("llama")` / `apply_to_llama()` (Liger-style;
`unpatch_class` undoes it). Families: see `FAMILIES` (model_type -> classes).

What runs on the kernels:

- RMSNorm modules (the hidden-state norms and the per-head q/k norms of Qwen3 and
  Gemma 3) -> `rmsnorm`, or `gemma_rmsnorm` for Gemma's `(1 + weight)` form.
- Gated MLPs, `act(gate_proj(x)) * up_proj(x)` (Phi-3: the halves of `gate_up_proj(x)`;
  MoE experts: their `_apply_gate`) -> `act_and_mul` for SiLU, GELU and GELU-tanh;
  GPT-OSS's experts' `_apply_gate` (clamped SwiGLU, gate and up interleaved) ->
  `swigluoai_and_mul` with the module's alpha and limit.
- The family's `apply_rotary_pos_emb(q, k, cos, sin)` -> `apply_rope` on copies of q
  and k (Hugging Face's function is out of place), partial rotary and GPT-OSS's
  half-width cos/sin included; DeepSeek-V3's `apply_rotary_pos_emb_interleave` ->
  `apply_rope` NeoX style on de-interleaved copies (what it returns).
- MoE routers (Mixtral's and Qwen3-MoE's `TopKRouter`: softmax, top-k, renormalized)
  -> `moe_topk`, the router's linear layer left as it is. Ties between equal scores
  go to the lower expert index (torch.topk does not say which it takes). DeepSeek-V3's
  and GPT-OSS's routers compute something else: reported unpatched.

Every swapped forward checks its inputs per call and runs Hugging Face's own code
where the kernel would not compute what it computes: devices other than CPU and
XPU, other dtypes, a Llama-style norm whose weight dtype differs from the input's
(HF returns the weight's dtype), the rotary function when q or k needs a
gradient (apply_rope is in place; the norms and act_and_mul have gradients), and the
router when its logits need one (moe_topk has none) or it has more than 1024 experts
or 32 picks.

How: `patch(model)` sets `forward` (experts: `_apply_gate`) on each module instance
to a `functools.partial` of a function of this module, so the model deep-copies
and pickles (a loaded copy runs the kernels but holds no rotary function; `patch` it
again), and `unpatch` removes exactly those attributes. A module whose instance
already has its own `forward` (accelerate's hooks) is left unpatched, and says so.

What is global: `patch_class` changes the classes, so every model of the family.
`patch(model)` changes only that model's modules, except the rotary function, which
the attention looks up in its modeling module: it is replaced there while at least
one model of the family is patched (counted per model and per `patch_class`), so an
unpatched model of the same family uses it too in that time; the last `unpatch`
puts Hugging Face's function object back. Where Hugging Face's `kernels` has made
the function a module (`use_kernel_forward_from_hub`, transformers 5.25), that
module's class `forward` is replaced instead: the attention's own copies of the
function (`_kernel_funcs`, which a pickle rebuilds from the modeling module's
object) stay what they were, so a patched model pickles on every transformers.

Generation: `patch_generation(model, sample=False)` (`unpatch_generation` undoes it,
either way) sets `_get_logits_processor` on the instance, independent of `patch(model)`:

- always: `generate` builds `SyclRepetitionPenaltyLogitsProcessor`
  (`repetition_penalty_by_ids`) and `SyclTopKLogitsWarper` (`top_k_mask_logits`) in
  place of Hugging Face's two classes (`on_kernels` converts one): the same processed
  scores bit for bit, so Hugging Face's tokens, greedy or sampled under one seed.
- `sample=True`, with `do_sample=True` and one beam: the trailing TopK / TopP / MinP
  warpers become one `SyclSamplingLogitsProcessor`. It takes softmax(scores) (after
  every processor before it: temperature, repetition penalty, ...), draws each row's
  token with `sample_from_probs` (top-k, then top-p over the top-k mass, then min-p:
  the order and the tie rule of Hugging Face's warpers) and returns scores 0 at the
  drawn token and -inf elsewhere, so Hugging Face's multinomial picks it. The tokens
  come from the kernels' Philox stream, seeded from torch's default generator at each
  step: `torch.manual_seed` makes a run repeat and rows are independent, within the
  support Hugging Face's warpers keep, but they are not Hugging Face's tokens for the
  seed; `output_scores` reports the one-hot scores (`output_logits` the raw logits).
  The list is left as it is for beam search, greedy decoding, a processor after the
  warpers (typical-p, epsilon, eta, watermarking, `renormalize_logits`) or warpers of
  other settings (subclasses, `min_tokens_to_keep`, `filter_value`);
  `processors_on_kernels(processors, sample=True)` converts a hand-built list.

Each processor runs Hugging Face's own code per call where its kernel does not apply
(3-D scores, other devices or dtypes, scores that need a gradient).

Hugging Face's `kernels`: `register_kernel_mapping()` maps its "RMSNorm" and
"rotary_pos_emb" layer names onto SyclRMSNorm and SyclRotaryPosEmb for
`kernels.kernelize(model, device="cpu" or "xpu", mode=Mode.INFERENCE)`, in float32 only
(Hugging Face's code in fp16/bf16). Nothing registers without the call.

Numerics: float32 as Hugging Face's up to the order of float operations; in fp16/bf16
the kernels round once where Hugging Face rounds after each torch op (within an ulp).
Not used: `fused_add_rmsnorm` (the residual add is a step of each decoder layer's
forward). Details: docs/integrations.md.
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import GenerationConfig
from transformers.activations import GELUActivation, GELUTanh, NewGELUActivation, SiLUActivation
from transformers.generation.logits_process import (
    LogitsProcessor,
    LogitsProcessorList,
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TopKLogitsWarper,
    TopPLogitsWarper,
)
from transformers.integrations.moe import _default_apply_gate

from .. import ops
from ..specs.model_variants import MODEL_FAMILIES, ModelFamily, NormStyle
from ..specs.routing import MAX_EXPERTS, MAX_TOPK

_KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# Activation module types -> act_and_mul's activation (the tanh forms are one formula).
_ACTIVATIONS: dict[type, str] = {
    SiLUActivation: "silu",
    nn.SiLU: "silu",
    GELUActivation: "gelu",
    GELUTanh: "gelu_tanh",
    NewGELUActivation: "gelu_tanh",
}

# model_type -> family: the one table, kept torch-free in specs.model_variants for
# `precompile --model`, which names the kernels these patches launch.
FAMILIES: dict[str, ModelFamily] = MODEL_FAMILIES


def family(model_type: str | None) -> ModelFamily:
    """The family of a config's model_type; ValueError naming the supported ones."""
    try:
        return FAMILIES[model_type]
    except KeyError:
        raise ValueError(
            f"sycl_kernels.integrations.transformers: model_type {model_type!r} is not "
            f"supported; supported: {', '.join(FAMILIES)}"
        ) from None


# --- Hugging Face's own methods, under any class patch of ours ---

_CLASS_ORIGINALS: dict[tuple[type, str], Callable] = {}


def _hf(module: nn.Module, name: str = "forward") -> Callable:
    for cls in type(module).__mro__:
        if (cls, name) in _CLASS_ORIGINALS:
            return _CLASS_ORIGINALS[cls, name]
        if name in cls.__dict__:
            return cls.__dict__[name]
    raise AttributeError(f"{type(module).__name__} has no {name}")


# --- The swapped forwards. They look the kernels up on sycl_kernels.ops at call
# time, where `bench --model` times them. ---


def _kernel_takes(x: torch.Tensor) -> bool:
    return x.device.type in ("cpu", "xpu") and x.dtype in _KERNEL_DTYPES


def _norm_weight_ok(style: NormStyle, weight: torch.dtype, x: torch.dtype) -> bool:
    # A Llama-style norm multiplies in the weight's dtype after rounding: a float32
    # weight on half activations gives a float32 result, the kernel x's dtype.
    return weight == x or (style != "llama" and weight == torch.float32)


def _norm(self: nn.Module, x: torch.Tensor, style: NormStyle, eps: float) -> torch.Tensor:
    weight = self.weight
    if (
        not _kernel_takes(x)
        or x.stride(-1) != 1
        or not _norm_weight_ok(style, weight.dtype, x.dtype)
    ):
        return _hf(self)(self, x)
    return (ops.gemma_rmsnorm if style == "gemma" else ops.rmsnorm)(x, weight, eps)


def _llama_norm_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return _norm(self, x, "llama", self.variance_epsilon)


def _olmo2_norm_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return _norm(self, x, "olmo2", self.variance_epsilon)


def _gemma_norm_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return _norm(self, x, "gemma", self.eps)


_NORM_FORWARDS = {
    "llama": _llama_norm_forward,
    "olmo2": _olmo2_norm_forward,
    "gemma": _gemma_norm_forward,
}


def _mlp_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    activation = _ACTIVATIONS.get(type(self.act_fn))
    if activation is None or not _kernel_takes(x):
        return _hf(self)(self, x)
    return self.down_proj(ops.act_and_mul(self.gate_proj(x), self.up_proj(x), activation))


def _fused_mlp_forward(self: nn.Module, x: torch.Tensor) -> torch.Tensor:
    activation = _ACTIVATIONS.get(type(self.activation_fn))
    if activation is None or not _kernel_takes(x):
        return _hf(self)(self, x)
    gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
    return self.down_proj(ops.act_and_mul(gate, up, activation))


def _experts_apply_gate(self: nn.Module, gate_up: torch.Tensor) -> torch.Tensor:
    activation = _ACTIVATIONS.get(type(self.act_fn))
    if activation is None or not _kernel_takes(gate_up):
        return _hf(self, "_apply_gate")(self, gate_up)
    gate, up = gate_up.chunk(2, dim=-1)
    return ops.act_and_mul(gate, up, activation)


def _swigluoai_apply_gate(self: nn.Module, gate_up: torch.Tensor) -> torch.Tensor:
    # GPT-OSS's _apply_gate is swigluoai_and_mul's formula; the kernel takes no
    # negative (or NaN) limit.
    if not (_kernel_takes(gate_up) and gate_up.stride(-1) == 1 and self.limit >= 0):
        return _hf(self, "_apply_gate")(self, gate_up)
    return ops.swigluoai_and_mul(gate_up, alpha=self.alpha, limit=self.limit)


def _router(
    self: nn.Module, hidden_states: torch.Tensor, renormalize: bool, float32_weights: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    hidden_states = hidden_states.reshape(-1, self.hidden_dim)
    logits = F.linear(hidden_states, self.weight)
    if (
        not _kernel_takes(logits)
        or logits.requires_grad
        or self.num_experts > MAX_EXPERTS
        or self.top_k > min(MAX_TOPK, self.num_experts)
    ):
        return _hf(self)(self, hidden_states)
    weights, ids = ops.moe_topk(logits, self.top_k, renormalize=renormalize)
    return logits, weights if float32_weights else weights.to(logits.dtype), ids.long()


def _mixtral_router_forward(self: nn.Module, hidden_states: torch.Tensor) -> tuple:
    return _router(self, hidden_states, renormalize=True, float32_weights=True)


def _qwen_router_forward(self: nn.Module, hidden_states: torch.Tensor) -> tuple:
    return _router(self, hidden_states, self.norm_topk_prob, float32_weights=False)


_ROUTER_FORWARDS = {"mixtral": _mixtral_router_forward, "qwen": _qwen_router_forward}

# What patch() sets on instances (unpatch() removes exactly these).
_INSTANCE_FUNCTIONS = frozenset(
    {
        *_NORM_FORWARDS.values(),
        *_ROUTER_FORWARDS.values(),
        _mlp_forward,
        _fused_mlp_forward,
        _experts_apply_gate,
        _swigluoai_apply_gate,
    }
)

_ROPE_LAYOUTS = {1: "HND", 2: "NHD"}  # unsqueeze_dim -> where the heads are


def _rope_ok(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, half_cos: bool
) -> bool:
    width = cos.shape[-1]
    return (
        q.dim() == k.dim() == 4
        and cos.dim() == 3
        and cos.shape == sin.shape
        and q.dtype == k.dtype
        and _kernel_takes(q)
        # Half-width cos/sin (GPT-OSS): HF rotates the halves of the whole head.
        and (2 * width == q.shape[-1] == k.shape[-1] if half_cos else width % 2 == 0)
        and width <= q.shape[-1]
        and q.stride(-1) == k.stride(-1) == 1
        and not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad))
    )


def _rope_in_place(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    half_cos: bool,
) -> None:
    # cos and sin are [batch, seq, rotary_dim] with both halves equal (HF's
    # rotary embeddings concatenate the frequencies twice), or [batch, seq,
    # rotary_dim / 2] (half_cos); one cache row per token.
    batch, seq, width = cos.shape
    half = width if half_cos else width // 2
    cache = torch.cat((cos[..., :half], sin[..., :half]), dim=-1).reshape(batch * seq, 2 * half)
    if cache.dtype not in (torch.float32, q.dtype):
        cache = cache.float()
    positions = torch.arange(batch * seq, device=q.device).view(batch, seq)
    ops.apply_rope(positions, q, k, cache, True, layout=layout)


def _rope_or_fallback(
    fallback: Callable,
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    unsqueeze_dim: int,
    half_cos: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    layout = _ROPE_LAYOUTS.get(unsqueeze_dim)
    if layout is None or not _rope_ok(q, k, cos, sin, half_cos):
        return fallback(q, k, cos, sin, unsqueeze_dim)
    q, k = q.clone(), k.clone()
    _rope_in_place(q, k, cos, sin, layout, half_cos)
    return q, k


def _interleaved_rope_function(original: Callable, half_cos: bool) -> Callable:
    """The replacement of DeepSeek-V3's `apply_rotary_pos_emb_interleave`. It rotates
    the pairs (x0, x1), (x2, x3), ... and returns them de-interleaved (the pairs' first
    elements, then their second): NeoX style on a de-interleaved copy computes that."""

    @functools.wraps(original)
    def apply_rotary_pos_emb_interleave(
        q: torch.Tensor,
        k: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        position_ids: torch.Tensor | None = None,
        unsqueeze_dim: int = 1,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        layout = _ROPE_LAYOUTS.get(unsqueeze_dim)
        if (
            layout is None
            or not _rope_ok(q, k, cos, sin, half_cos)
            or not cos.shape[-1] == q.shape[-1] == k.shape[-1]
        ):
            return original(q, k, cos, sin, position_ids, unsqueeze_dim)
        q = torch.cat((q[..., 0::2], q[..., 1::2]), dim=-1)
        k = torch.cat((k[..., 0::2], k[..., 1::2]), dim=-1)
        _rope_in_place(q, k, cos, sin, layout, half_cos)
        return q, k

    return apply_rotary_pos_emb_interleave


def _rope_function(original: Callable, half_cos: bool) -> Callable:
    """The replacement of a plain module-level `apply_rotary_pos_emb`."""

    @functools.wraps(original)
    def apply_rotary_pos_emb(
        q: torch.Tensor,
        k: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        unsqueeze_dim: int = 1,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return _rope_or_fallback(original, q, k, cos, sin, unsqueeze_dim, half_cos)

    return apply_rotary_pos_emb


def _rope_forward(original: Callable, half_cos: bool) -> Callable:
    """The replacement of the `forward` of the module class that Hugging Face's
    `kernels` makes of an `apply_rotary_pos_emb` decorated `use_kernel_forward_from_hub`
    (transformers 5.25). The function stays in its modeling module, and the attention's
    private copies of it (`_kernel_funcs`) stay instances of that class, so a patched
    model pickles and deep-copies as an unpatched one does."""

    @functools.wraps(original)
    def forward(
        self: nn.Module,
        q: torch.Tensor,
        k: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        unsqueeze_dim: int = 1,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hf = functools.partial(original, self)
        return _rope_or_fallback(hf, q, k, cos, sin, unsqueeze_dim, half_cos)

    return forward


@dataclass
class _Installed:
    owner: object
    """The modeling module (its function is replaced) or kernels' class (its forward)."""
    name: str
    original: Callable
    users: int = 0


# "<modeling module>.<function>" -> what was replaced
_ROPE_INSTALLED: dict[str, _Installed] = {}
_LOCK = threading.RLock()


def _rope_names(fam: ModelFamily) -> tuple[str, ...]:
    """The family's module-level rotary functions, as "<modeling module>.<function>"."""
    functions = ("apply_rotary_pos_emb",)
    if fam.interleaved_rope:
        functions += ("apply_rotary_pos_emb_interleave",)
    return tuple(f"{fam.module.__name__}.{function}" for function in functions)


def _acquire_rope(fam: ModelFamily) -> tuple[str, ...]:
    module = fam.module
    names = _rope_names(fam)
    for qualified in names:
        entry = _ROPE_INSTALLED.get(qualified)
        if entry is None:
            function = qualified.rpartition(".")[2]
            hf = getattr(module, function)
            if isinstance(hf, nn.Module):
                owner, name, replacement = type(hf), "forward", _rope_forward
            elif function == "apply_rotary_pos_emb":
                owner, name, replacement = module, function, _rope_function
            else:
                owner, name, replacement = module, function, _interleaved_rope_function
            original = getattr(owner, name)
            entry = _ROPE_INSTALLED[qualified] = _Installed(owner, name, original)
            setattr(owner, name, replacement(original, fam.half_cos))
        entry.users += 1
    return names


def _release_rope(names: tuple[str, ...]) -> None:
    with _LOCK:
        for qualified in names:
            entry = _ROPE_INSTALLED[qualified]
            entry.users -= 1
            if entry.users == 0:
                setattr(entry.owner, entry.name, entry.original)
                del _ROPE_INSTALLED[qualified]


# --- Patching models ---


@dataclass(frozen=True)
class _ModelPatch:
    report: list[str]
    release_rope: weakref.finalize
    """Gives the rotary function back: at unpatch, or when the model is collected."""


_PATCHED: weakref.WeakKeyDictionary[nn.Module, _ModelPatch] = weakref.WeakKeyDictionary()


def _ours(value: object) -> bool:
    return isinstance(value, functools.partial) and value.func in _INSTANCE_FUNCTIONS


def _set_instance(module: nn.Module, name: str, function: Callable) -> bool:
    """False, changing nothing, if the instance has its own `name` (not one of ours:
    a copy of a patched model is patched again)."""
    if name in module.__dict__ and not _ours(module.__dict__[name]):
        return False
    setattr(module, name, functools.partial(function, module))
    return True


def _unset_instances(model: nn.Module) -> int:
    removed = 0
    for module in model.modules():
        for name in ("forward", "_apply_gate"):
            if _ours(module.__dict__.get(name)):
                delattr(module, name)
                removed += 1
    return removed


_OWN_FORWARD = "unpatched, the instance has its own {} already (accelerate hooks?)"


def _patch_norm(fam: ModelFamily, path: str, module: nn.Module, dtype: torch.dtype) -> str:
    weight = module.weight.dtype
    if not _norm_weight_ok(fam.norm, weight, dtype):
        return (
            f"{path}: unpatched, no kernel computes HF's {fam.norm}-style norm of a "
            f"{weight} weight on {dtype} activations"
        )
    if not _set_instance(module, "forward", _NORM_FORWARDS[fam.norm]):
        return f"{path}: {_OWN_FORWARD.format('forward')}"
    op = "gemma_rmsnorm" if fam.norm == "gemma" else "rmsnorm"
    return f"{path}: {op} ({type(module).__name__})"


def _no_kernel(path: str, act: nn.Module) -> str:
    return f"{path}: unpatched, activation {type(act).__name__} has no kernel (SiLU and GELUs have)"


def _patch_mlp(fam: ModelFamily, path: str, module: nn.Module) -> str:
    act = module.activation_fn if fam.mlp == "fused" else module.act_fn
    activation = _ACTIVATIONS.get(type(act))
    if activation is None:
        return _no_kernel(path, act)
    forward = _fused_mlp_forward if fam.mlp == "fused" else _mlp_forward
    if not _set_instance(module, "forward", forward):
        return f"{path}: {_OWN_FORWARD.format('forward')}"
    return f"{path}: act_and_mul {activation} ({type(module).__name__})"


def _patch_swigluoai_experts(path: str, module: nn.Module) -> str:
    kind = type(module).__name__
    if not _set_instance(module, "_apply_gate", _swigluoai_apply_gate):
        return f"{path}: {_OWN_FORWARD.format('_apply_gate')}"
    # GPT-OSS's eager experts forward calls _apply_gate too.
    return (
        f"{path}: swigluoai_and_mul alpha={module.alpha} limit={module.limit} in "
        f"_apply_gate ({kind})"
    )


def _patch_experts(fam: ModelFamily, path: str, module: nn.Module) -> str:
    if fam.experts_gate == "swigluoai":
        return _patch_swigluoai_experts(path, module)
    kind = type(module).__name__
    activation = _ACTIVATIONS.get(type(module.act_fn))
    if activation is None:
        return _no_kernel(path, module.act_fn)
    if _hf(module, "_apply_gate") is not _default_apply_gate:
        return f"{path}: unpatched, {kind} has its own _apply_gate"
    if not _set_instance(module, "_apply_gate", _experts_apply_gate):
        return f"{path}: {_OWN_FORWARD.format('_apply_gate')}"
    # The eager experts forward computes act(gate) * up inline; grouped_mm and
    # batched_mm call _apply_gate.
    implementation = getattr(module.config, "_experts_implementation", None)
    calls = "does not call" if implementation == "eager" else "calls"
    return (
        f"{path}: act_and_mul {activation} in _apply_gate ({kind}; "
        f"experts_implementation {implementation!r} {calls} it)"
    )


def _patch_router(fam: ModelFamily, path: str, module: nn.Module) -> str:
    assert fam.router is not None
    if not _set_instance(module, "forward", _ROUTER_FORWARDS[fam.router]):
        return f"{path}: {_OWN_FORWARD.format('forward')}"
    return f"{path}: moe_topk softmax ({type(module).__name__})"


def patch(model: nn.Module) -> list[str]:
    """Swaps the kernels into an already-built model; returns what it did, one line each.

    Lines are `<module path>: <kernel> (<class>)`, `<module path>: unpatched, <why>`,
    and the rotary function's module-level name. Patching a patched model returns
    the first report and changes nothing. ValueError for an unsupported model_type.
    """
    fam = family(getattr(getattr(model, "config", None), "model_type", None))
    with _LOCK:
        if model in _PATCHED:
            return list(_PATCHED[model].report)
        norm_cls = fam.cls("RMSNorm")
        mlp_cls = fam.cls("MLP") if fam.mlp else None
        experts_cls = fam.cls("Experts") if fam.experts else None
        router_cls = fam.cls("TopKRouter") if fam.router else None
        unmapped = {fam.cls(suffix): why for suffix, why in fam.unmapped}
        dtype = getattr(model, "dtype", torch.float32)
        report = []
        for path, module in model.named_modules():
            if type(module) is norm_cls:
                report.append(_patch_norm(fam, path, module, dtype))
            elif type(module) is mlp_cls:
                report.append(_patch_mlp(fam, path, module))
            elif type(module) is experts_cls:
                report.append(_patch_experts(fam, path, module))
            elif type(module) is router_cls:
                report.append(_patch_router(fam, path, module))
            elif type(module) in unmapped:
                report.append(f"{path}: unpatched, {unmapped[type(module)]}")
        ropes = _acquire_rope(fam)
        report += [
            *(
                f"{rope}: apply_rope (module-level: any {fam.name} model uses it now)"
                for rope in ropes
            ),
            f"{fam.prefix}DecoderLayer: unpatched, fused_add_rmsnorm not used: the residual "
            "add and the next norm are two steps of the decoder layer's forward",
        ]
        release = weakref.finalize(model, _release_rope, ropes)
        _PATCHED[model] = _ModelPatch(report, release)
        return list(report)


def unpatch(model: nn.Module) -> None:
    """Undoes patch(model): the model runs Hugging Face's code again (bit-identical).

    The rotary function goes back once no other model or class patch of the family
    uses it. Also clears a deep copy or unpickled copy of a patched model. ValueError
    if the model is not patched.
    """
    with _LOCK:
        patched = _PATCHED.pop(model, None)
        if not _unset_instances(model) and patched is None:
            raise ValueError("unpatch(): this model is not patched (patch(model) first)")
        if patched is not None:
            patched.release_rope()


# --- Patching classes, before a model is built ---

_CLASS_PATCHED: dict[str, list[str]] = {}  # family name -> report


def _set_class(cls: type, name: str, function: Callable, report: list[str], what: str) -> None:
    _CLASS_ORIGINALS[cls, name] = cls.__dict__[name]
    setattr(cls, name, function)
    report.append(f"{cls.__module__}.{cls.__qualname__}.{name}: {what}")


def patch_class(model_type: str) -> list[str]:
    """Swaps the kernels into the family's classes: every model built (or already
    built) from them uses them. Returns what it changed; a second call is a no-op.
    Activations and dtypes are checked per call (HF's code where no kernel fits)."""
    fam = family(model_type)
    with _LOCK:
        if fam.name in _CLASS_PATCHED:
            return list(_CLASS_PATCHED[fam.name])
        report: list[str] = []
        op = "gemma_rmsnorm" if fam.norm == "gemma" else "rmsnorm"
        _set_class(fam.cls("RMSNorm"), "forward", _NORM_FORWARDS[fam.norm], report, op)
        if fam.mlp:
            forward = _fused_mlp_forward if fam.mlp == "fused" else _mlp_forward
            _set_class(fam.cls("MLP"), "forward", forward, report, "act_and_mul")
        if fam.experts_gate == "swigluoai":
            experts = fam.cls("Experts")
            _set_class(experts, "_apply_gate", _swigluoai_apply_gate, report, "swigluoai_and_mul")
        elif fam.experts:
            experts = fam.cls("Experts")
            if experts.__dict__.get("_apply_gate") is _default_apply_gate:
                _set_class(experts, "_apply_gate", _experts_apply_gate, report, "act_and_mul")
        if fam.router:
            router = _ROUTER_FORWARDS[fam.router]
            _set_class(fam.cls("TopKRouter"), "forward", router, report, "moe_topk")
        report += [f"{rope}: apply_rope" for rope in _acquire_rope(fam)]
        _CLASS_PATCHED[fam.name] = report
        return list(report)


def unpatch_class(model_type: str) -> None:
    """Undoes patch_class(model_type). ValueError if the family's classes are not patched."""
    fam = family(model_type)
    with _LOCK:
        if _CLASS_PATCHED.pop(fam.name, None) is None:
            raise ValueError(f"unpatch_class(): {model_type!r} is not patched")
        for (cls, name), original in list(_CLASS_ORIGINALS.items()):
            if cls.__module__ == fam.module.__name__:
                setattr(cls, name, original)
                del _CLASS_ORIGINALS[cls, name]
        _release_rope(_rope_names(fam))


# Liger-style entry points: patch the family's classes before building a model.


def apply_to_llama() -> list[str]:
    return patch_class("llama")


def apply_to_mistral() -> list[str]:
    return patch_class("mistral")


def apply_to_mixtral() -> list[str]:
    return patch_class("mixtral")


def apply_to_qwen2() -> list[str]:
    return patch_class("qwen2")


def apply_to_qwen3() -> list[str]:
    return patch_class("qwen3")


def apply_to_qwen3_moe() -> list[str]:
    return patch_class("qwen3_moe")


def apply_to_gemma() -> list[str]:
    return patch_class("gemma")


def apply_to_gemma2() -> list[str]:
    return patch_class("gemma2")


def apply_to_gemma3() -> list[str]:
    return patch_class("gemma3")


def apply_to_phi3() -> list[str]:
    return patch_class("phi3")


def apply_to_granite() -> list[str]:
    return patch_class("granite")


def apply_to_olmo2() -> list[str]:
    return patch_class("olmo2")


# --- Hugging Face's `kernels`: the layers for kernelize ---
#
# `kernelize` binds a layer class's `forward` to each module of the layer's name, so
# these classes are stateless (no constructor, no members but `forward`, as `kernels`
# checks) and their `forward` takes the arguments of the forward it replaces. They
# run the kernels for float32 only: in half precision Hugging Face rounds after each
# torch op (its Llama-style norm rounds `weight * hidden.to(input_dtype)` twice), the
# kernels once.

# Modeling module name -> its family, without importing the modeling modules.
_BY_MODULE: dict[str, ModelFamily] = {
    f"transformers.models.{fam.name}.modeling_{fam.name}": fam for fam in FAMILIES.values()
}


def _norm_family(cls: type) -> ModelFamily | None:
    fam = _BY_MODULE.get(cls.__module__)
    return fam if fam is not None and cls.__name__ == f"{fam.prefix}RMSNorm" else None


class SyclRMSNorm(nn.Module):
    """The `kernels` layer for "RMSNorm": `rmsnorm` (`gemma_rmsnorm` for Gemma's) for
    the RMSNorm classes of `FAMILIES` in float32, Hugging Face's forward otherwise."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        fam = _norm_family(type(self))
        if fam is None or hidden_states.dtype != torch.float32:
            return _hf(self)(self, hidden_states)
        # Checks device, strides and the weight's dtype, and falls back itself.
        return _NORM_FORWARDS[fam.norm](self, hidden_states)


class SyclRotaryPosEmb(nn.Module):
    """The `kernels` layer for "rotary_pos_emb": `apply_rope` on copies of q and k for
    the `apply_rotary_pos_emb` of `FAMILIES` in float32, Hugging Face's function
    otherwise."""

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        unsqueeze_dim: int = 1,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # The class forward of kernels' function module calls Hugging Face's function
        # (this instance is a model's private copy, not the module-level one it routes).
        original = type(self).forward.__get__(self)
        fam = _BY_MODULE.get(type(self).__module__)
        if fam is None or q.dtype != torch.float32:
            return original(q, k, cos, sin, unsqueeze_dim)
        return _rope_or_fallback(original, q, k, cos, sin, unsqueeze_dim, fam.half_cos)


# kernels' layer name -> the layer class.
KERNELS_LAYERS: dict[str, type[nn.Module]] = {
    "RMSNorm": SyclRMSNorm,
    "rotary_pos_emb": SyclRotaryPosEmb,
}


@dataclass(frozen=True)
class SyclLayerRepository:
    """A `kernels` layer repository for one of KERNELS_LAYERS (its protocol: `load()`
    returns the layer class): no Hub, no build directory. Frozen, so `kernels`'
    per-repository cache and a second registration see one repository."""

    layer_name: str

    def load(self) -> type[nn.Module]:
        return KERNELS_LAYERS[self.layer_name]

    def __str__(self) -> str:
        return f"sycl_kernels (layer `{self.layer_name}`)"


def register_kernel_mapping() -> list[str]:
    """Registers KERNELS_LAYERS with Hugging Face's `kernels` for devices "cpu" and
    "xpu" and Mode.INFERENCE, so that `kernels.kernelize(model, device="cpu",
    mode=Mode.INFERENCE)` runs `rmsnorm` / `gemma_rmsnorm` for the families' RMSNorm and
    `apply_rope` for their `apply_rotary_pos_emb`, in float32 (Hugging Face's code in
    fp16/bf16 and for other classes of those names). Replaces what was registered for
    those names and devices; a second call changes nothing. Returns the layer names it
    mapped. ImportError naming `kernels` if that package is absent.
    """
    try:
        import kernels
    except ImportError as error:
        raise ImportError(
            "register_kernel_mapping() needs Hugging Face's `kernels` package (pip install kernels)"
        ) from error
    kernels.register_kernel_mapping(
        {
            name: {
                device: {kernels.Mode.INFERENCE: SyclLayerRepository(name)}
                for device in ("cpu", "xpu")
            }
            for name in KERNELS_LAYERS
        }
    )
    return list(KERNELS_LAYERS)


# --- Generation: Hugging Face's logits processors on the kernels ---


def _rows_ok(scores: torch.Tensor) -> bool:
    return (
        scores.dim() == 2
        and scores.device.type in ("cpu", "xpu")
        and not (torch.is_grad_enabled() and scores.requires_grad)
    )


def _scores_ok(scores: torch.Tensor) -> bool:
    return _rows_ok(scores) and scores.dtype in _KERNEL_DTYPES and scores.stride(-1) == 1


class SyclRepetitionPenaltyLogitsProcessor(RepetitionPenaltyLogitsProcessor):
    """Hugging Face's RepetitionPenaltyLogitsProcessor on `repetition_penalty_by_ids`: the
    same processed scores, bit for bit (one float32 operation a penalized logit,
    rounded once), prompt_ignore_length (an int or a per-row tensor) included. Hugging
    Face's own code runs for 3-D scores (continuous batching), 1-D input_ids, other
    devices and dtypes, and scores that need a gradient. Negative ids are skipped
    (Hugging Face raises for them)."""

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        if not (
            _scores_ok(scores)
            and input_ids.dim() == 2
            and input_ids.dtype in (torch.int32, torch.int64)
            and input_ids.device == scores.device
            and (input_ids.shape[-1] <= 1 or input_ids.stride(-1) == 1)
        ):
            return super().__call__(input_ids, scores)
        ids = input_ids
        ignore = self.prompt_ignore_length
        if isinstance(ignore, int):
            ids = ids[:, ignore:]
        elif isinstance(ignore, torch.Tensor):
            if ids.shape[0] != ignore.shape[0]:
                raise ValueError("Incompatible `prompt_ignore_length` batch size")
            self.prompt_ignore_length = ignore = ignore.to(ids.device)
            positions = torch.arange(ids.shape[1], device=ids.device)
            ids = ids.masked_fill(positions[None, :] < ignore[:, None], -1)
        return ops.repetition_penalty_by_ids(scores, ids, repetition_penalty=self.penalty)


class SyclTopKLogitsWarper(TopKLogitsWarper):
    """Hugging Face's TopKLogitsWarper on `top_k_mask_logits`: every score below the k-th
    largest set to -inf, ties with it kept (the same scores, bit for bit). Hugging
    Face's own code runs for another filter_value and where _scores_ok refuses."""

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        if self.filter_value != -math.inf or not _scores_ok(scores):
            return super().__call__(input_ids, scores)
        return ops.top_k_mask_logits(scores, self.top_k)


class SyclSamplingLogitsProcessor(LogitsProcessor):
    """Draws each row's token from softmax(scores) kept by top_k, top_p and min_p (None:
    off) with `sample_from_probs`, and returns scores 0 at it and -inf elsewhere (module
    doc, sample=True). `warpers`: the Hugging Face warpers it stands for, run instead
    (and the scores returned as they leave them) for scores that are not 2-D float
    rows on CPU or XPU or that need a gradient."""

    def __init__(
        self,
        top_k: int | None,
        top_p: float | None,
        min_p: float | None,
        warpers: tuple[LogitsProcessor, ...] = (),
    ) -> None:
        self.top_k, self.top_p, self.min_p = top_k, top_p, min_p
        self.warpers = warpers

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        if not (_rows_ok(scores) and scores.is_floating_point()):
            for warper in self.warpers:
                scores = warper(input_ids, scores)
            return scores
        probs = torch.softmax(scores.float(), dim=-1)
        seed = ops.sampling.philox_seed(device=scores.device)
        tokens = ops.sample_from_probs(
            probs, top_k=self.top_k, top_p=self.top_p, min_p=self.min_p, seed=seed
        )
        chosen = torch.full_like(scores, -math.inf)
        return chosen.scatter_(1, tokens[:, None].long(), 0.0)


def on_kernels(processor: LogitsProcessor) -> LogitsProcessor:
    """The kernels' counterpart of one of Hugging Face's processors (exactly its class),
    with its settings; any other processor as it is."""
    if type(processor) is RepetitionPenaltyLogitsProcessor:
        ours = SyclRepetitionPenaltyLogitsProcessor(processor.penalty)
        ours.__dict__.update(processor.__dict__)
        return ours
    if type(processor) is TopKLogitsWarper:
        ours = SyclTopKLogitsWarper(processor.top_k, processor.filter_value)
        ours.__dict__.update(processor.__dict__)
        return ours
    return processor


# Warper class -> its place in sample_from_probs' order (top-k, top-p, min-p).
_SAMPLED_WARPERS: dict[type, int] = {
    TopKLogitsWarper: 0,
    SyclTopKLogitsWarper: 0,
    TopPLogitsWarper: 1,
    MinPLogitsWarper: 2,
}


def _sampled(processors: LogitsProcessorList) -> LogitsProcessorList:
    """`processors` with its trailing TopK / TopP / MinP warpers (exactly those classes,
    each in that order at most once, keeping at least one token, filter_value -inf)
    replaced by one SyclSamplingLogitsProcessor; as it is otherwise."""
    start = len(processors)
    while start > 0 and type(processors[start - 1]) in _SAMPLED_WARPERS:
        start -= 1
    block = list(processors[start:])
    places = [_SAMPLED_WARPERS[type(w)] for w in block]
    if (
        not block
        or places != sorted(set(places))  # a filter twice, or top-p before top-k
        or any(w.min_tokens_to_keep != 1 or w.filter_value != -math.inf for w in block)
    ):
        return processors
    settings = dict(zip(places, block, strict=True))
    ours = SyclSamplingLogitsProcessor(
        settings[0].top_k if 0 in settings else None,
        settings[1].top_p if 1 in settings else None,
        settings[2].min_p if 2 in settings else None,
        tuple(block),
    )
    return LogitsProcessorList([*processors[:start], ours])


def processors_on_kernels(
    processors: LogitsProcessorList, *, sample: bool = False
) -> LogitsProcessorList:
    """A list of logits processors on the kernels, as patch_generation(model, sample=)
    builds it: each processor through on_kernels and, with `sample`, the trailing TopK /
    TopP / MinP warpers (exactly those classes, each at most once and in that order,
    `min_tokens_to_keep=1`, `filter_value=-inf`) replaced by one
    SyclSamplingLogitsProcessor. Only for do_sample=True with one beam: the processor
    returns one-hot scores."""
    if sample:
        processors = _sampled(processors)
    return LogitsProcessorList(on_kernels(p) for p in processors)


def _get_logits_processor(
    self: nn.Module,
    generation_config: GenerationConfig,
    *args: object,
    sample: bool,
    **kwargs: object,
) -> LogitsProcessorList:
    processors = _hf(self, "_get_logits_processor")(self, generation_config, *args, **kwargs)
    one_draw = generation_config.do_sample and (generation_config.num_beams or 1) == 1
    return processors_on_kernels(processors, sample=sample and one_draw)


def _ours_generation(value: object) -> bool:
    return isinstance(value, functools.partial) and value.func is _get_logits_processor


def patch_generation(model: nn.Module, *, sample: bool = False) -> list[str]:
    """Makes `model.generate` build its logits processors on the kernels (module doc):
    RepetitionPenaltyLogitsProcessor and TopKLogitsWarper become
    SyclRepetitionPenaltyLogitsProcessor and SyclTopKLogitsWarper, the same scores bit
    for bit, hence Hugging Face's tokens (sampled under one seed too). `sample=True`:
    with do_sample=True and one beam, the trailing TopK / TopP / MinP warpers also
    become one SyclSamplingLogitsProcessor drawing the token with `sample_from_probs`
    (reproducible under torch.manual_seed, but not Hugging Face's tokens for it).

    Sets `_get_logits_processor` on the instance (an instance with its own already is
    left alone, and reported); calling it again sets `sample` again (the same
    arguments change nothing). Independent of patch(model). Returns what it did, one
    line each, as patch() does.
    """
    where = f"{type(model).__name__}._get_logits_processor"
    with _LOCK:
        current = model.__dict__.get("_get_logits_processor")
        if current is not None and not _ours_generation(current):
            return [f"{where}: unpatched, the instance has its own already"]
        if current is None or current.keywords["sample"] != sample:
            model._get_logits_processor = functools.partial(
                _get_logits_processor, model, sample=sample
            )
    report = [f"{where}: repetition_penalty_by_ids (RepetitionPenaltyLogitsProcessor)"]
    if sample:
        return [
            *report,
            f"{where}: top_k_mask_logits (TopKLogitsWarper, where not sampled)",
            f"{where}: sample_from_probs (the trailing TopKLogitsWarper, TopPLogitsWarper, "
            "MinPLogitsWarper with do_sample=True and one beam; not Hugging Face's tokens)",
        ]
    return [
        *report,
        f"{where}: top_k_mask_logits (TopKLogitsWarper)",
        f"{where}: unpatched, TopPLogitsWarper, MinPLogitsWarper and torch.multinomial "
        "(Hugging Face's tokens; sample=True draws with sample_from_probs)",
    ]


def unpatch_generation(model: nn.Module) -> None:
    """Undoes patch_generation(model), with or without `sample`: Hugging Face's
    processors and tokens again. ValueError if it is not patched."""
    with _LOCK:
        if not _ours_generation(model.__dict__.get("_get_logits_processor")):
            raise ValueError(
                "unpatch_generation(): this model's generation is not patched "
                "(patch_generation(model) first)"
            )
        del model._get_logits_processor
