"""sycl_kernels.compat.sgl_kernel: SGLang's ``sgl_kernel`` calls on the core ops.

An engine's XPU branch imports these in place of ``sgl_kernel`` (and calls
``rotary_embedding`` in place of ``torch.ops.sgl_kernel.rotary_embedding``), or
``install()`` makes unmodified code find them: ``import sgl_kernel`` then gives this
module's ``__all__`` and ``torch.ops.sgl_kernel.rotary_embedding`` is registered,
where no sgl_kernel is installed (a real one is left alone). The names, argument
order, defaults, return values and in-place contract are sgl_kernel's. An argument
that cannot be taken raises TypeError or ValueError (IndexError for an index out of
range on CPU tensors) naming sgl_kernel's argument and what was expected: a core
op's error is re-worded in the function's own names (``compat._args.engine_names``;
``store_cache_xpu``'s ``indices``, not the core op's ``slot_mapping``), and the
outputs this module re-views itself are checked before.
Points where the behaviour could be read two ways, and the reading taken here:

- ``fused_add_rmsnorm`` / ``gemma_fused_add_rmsnorm``: ``residual`` receives
  ``input + residual`` rounded to the dtype, and ``input`` receives the norm of the
  float32 sum, not of the rounded one (flashinfer's and sgl_kernel's kernels; at
  fp16/bf16 some elements differ by one unit in the last place from normalizing the
  stored sum, which is what vLLM does and what SGLang's torch-native GemmaRMSNorm
  does).
- Norms: math in float32, one rounding of ``x * rsqrt(mean(x^2) + eps) * w`` (or
  ``* (1 + w)``). ``weight`` has the input's dtype, or float32 on fp16/bf16 input
  (sgl-kernel-xpu's float32 weights). Without ``out`` the result is a new contiguous
  tensor, where sgl_kernel's ``empty_like(input)`` keeps a dense input's strides:
  only a permuted dense input tells them apart.
- ``enable_pdl`` (CUDA programmatic dependent launch) is accepted and ignored.
- Gated activations: ``act(input[..., :d]) * input[..., d:]``, math in float32 and
  one rounding, as flashinfer. sgl_kernel refuses rows whose byte length is not a
  multiple of 16 (its vector loads); any even width works here.
- ``apply_rope_with_cos_sin_cache_inplace``: ``cos_sin_cache`` must be float32
  (ValueError otherwise, as sgl_kernel); rotary_dim is its width and head elements
  past it are left alone. int32 positions are used as they are (sgl_kernel converts
  them to int64: the same values). ``query``/``key`` may be ``[tokens, heads *
  head_size]`` or ``[tokens, heads, head_size]``; sgl_kernel re-views the latter as
  ``[tokens, -1, head_size]``, so a 3-D tensor whose last dimension is not
  ``head_size`` is refused here rather than re-cut. With ``fused_set_kv_buffer_arg``
  the rotated key and the value are also stored at rows ``cache_loc`` of
  ``k_buffer``/``v_buffer`` (contiguous ``[slots, heads * head_size]``), head elements
  past rotary_dim included; ``k_scale``/``v_scale`` must be None (as sgl_kernel). A
  negative ``cache_loc`` stores nothing, and that token's query and key are still
  rotated (sgl-kernel-xpu's fused store skips such a token altogether).
- ``rotary_embedding`` (the op SGLang's ``forward_xpu`` calls) always rotates in place
  and returns the same ``query`` and ``key`` objects. sgl-kernel-xpu does so for 2-D
  query/key; for 3-D ones it returns new tensors (the NeoX ones shaped ``[1, tokens,
  heads, head_size]``), leaves the inputs unchanged and needs rotary_dim ==
  head_size. Here 3-D input is rotated in place too, keeps its shape and may be
  partially rotary. The cache may be float32 or the query's dtype (sgl-kernel-xpu:
  the query's dtype only) and positions int32 or int64 (sgl-kernel-xpu: int64).
- ``torch.ops.sgl_kernel.rotary_embedding`` (registered by ``install()``): sgl-kernel-xpu's
  schema, which marks no argument as written, so it returns new tensors (``query``'s
  and ``key``'s shapes, dtypes and, for dense ones, strides) and leaves the inputs
  unchanged, where sgl-kernel-xpu rotates 2-D query/key in place and returns them.
  Otherwise as ``rotary_embedding`` above. CPU and XPU kernels and a fake (meta) one;
  no gradient.
- ``fused_qk_rope_with_cos_sin_cache_inplace`` (sgl-kernel-xpu): ``q``/``k``
  ``[tokens, heads, >= rope_dim]`` with a unit last stride (SGLang passes
  ``[..., :rotary_dim]`` slices of its heads); the first ``rope_dim`` elements of each
  head rotated in place, the rest left alone. ``cos_sin_cache`` ``[max_position,
  rope_dim]`` (sgl reads it by its row stride whatever its width: a wider one is
  refused here), float32 or q's dtype; positions int32 or int64. sgl takes rope_dim
  64, 128, 256 or 512; any even width works here.
- ``fused_inplace_qknorm`` (sgl-kernel-xpu): per-head RMSNorm of ``q`` ``[tokens,
  heads, head_dim]`` and ``k`` in place, math in float32, one rounding.
- Quantization (read against sgl-kernel-xpu 9cf16bf9): ``sgl_per_token_group_quant_8bit``
  (gemm.py's full signature; ``sgl_per_token_group_quant_fp8`` and ``_int8`` are the
  same function), ``sgl_per_token_group_quant_8bit_v2`` (the op's positional schema;
  a plain function, as this module registers no torch ops),
  ``sgl_per_tensor_quant_fp8``, ``sgl_per_token_quant_fp8``: outputs written, None
  returned. q = v * (1 / s), the reciprocal taken once in float32 as sgl's kernels
  do; fp8 rounded to nearest even and saturated at +-448; int8 truncated toward zero
  (sgl's ``static_cast<int8_t>``) and clamped to [-128, 127].
- ``enable_v2=None`` reads ``SGLANG_PER_TOKEN_GROUP_QUANT_8BIT_V2`` as sglang's
  ``get_bool_env_var`` does ("true" or "1" in any case is true), without importing
  sglang (sgl_kernel's wrapper imports it there and fails without it). v1 raises
  AssertionError on ``fuse_silu_and_mul``/``masked_m`` (sgl's asserts; also under
  ``python -O``).
- ``fp8_min``/``fp8_max`` must be -448/448 (float8_e4m3fn) or -128/127 (int8)
  (ValueError; sgl's v2 demands it, its v1 would quantize to any range). The group
  scale ``max(eps, absmax) / fp8_max`` is taken as ``max(absmax / fp8_max, eps /
  fp8_max)`` in float32 (equal: division is monotonic). v2 checks as sgl: eps 1e-10
  (within 1e-13), fp16/bf16 input, group_size 16, 32, 64 or 128. v1 takes any
  group_size dividing the row (sgl: 32 to 512) and float32 input.
- NaN and Inf: sgl builds with ``-fhonor-nans``, so its group kernels quantize a NaN
  value to ``fp8_min`` (-448, or -128 for int8) and its per-tensor and per-token
  kernels to +448; here NaN stays NaN (fp8) or becomes 0 (int8). Both leave NaN out
  of the absolute maximum. An infinite value makes its group's scale infinite: the
  other values 0, itself ``fp8_min`` in sgl, NaN (fp8) or 0 (int8) here; its UE8M0
  byte is 255 here (sgl: ``(int)inf``, undefined).
- UE8M0 (``scale_ue8m0``): the power of two at or above ``max(scale, 1e-10)`` by
  exact bit arithmetic, where sgl computes ``exp2(ceil(log2(fmax(s, 1e-10f))))``
  (its ``log2`` may round a value just above a power of two down onto it, giving a
  power too small); byte = exponent + 127. The float scales go to a temporary and
  are converted (``(bits >> 23) & 0xff``) and stored with torch ops.
- Scale layouts, from ``output_s``'s dtype and strides as sgl's kernels read them:
  float32 row-major: ``t * G + g`` (output_s must have strides (G, 1) where a size
  exceeds 1, where sgl ignores them and writes past an expanded or sliced one).
  float32 column-major (stride(-2) < stride(-1)): v1 ``t + g * stride(1)`` (a
  TMA-aligned tensor's padding rows not written); v2 interleaved: scale (t, g) at the
  [T, G] position (f // G, f % G) of f = t + g * T, i.e. element ``f // G + (f % G) *
  stride(-1)``; column-major output_s must have stride(-2) 1 and its own memory per
  element. UE8M0 row-major: uint8 bytes at ``t * G + g`` of a dense output_s. UE8M0
  column-major: int32 words of 4 bytes (DeepGEMM's layout), byte g % 4 of word ``(g // 4) *
  stride(1) + t`` (v1) or of the interleaved position (v2); v1 leaves the unused
  bytes of a row's last word alone, v2 zeroes them. output_s's shape must fit
  ([T, G], or [T, >= ceil(G / 4)] words) where sgl checks only its dimensions, and
  output_q input's shape (its last dimension halved with fuse_silu_and_mul).
  group_size must be an int dividing the last dimension (v1 and v2).
- ``fuse_silu_and_mul`` (v2): ``silu(gate)`` rounded to the input's dtype, times
  ``up`` rounded to it (sgl's kernel), gate and up the halves of ``input``.
- ``masked_m`` (v2): input ``[experts, tokens, ...]``, output_s ``[experts, ...]``
  (each expert's scales in the layout above at ``e * stride(0)``); every row of every
  expert is quantized and its scales written, rows past ``masked_m[e]`` too, and
  masked_m's values are not read. sgl honours masked_m only in its column-major +
  UE8M0 + fuse_silu_and_mul branch (rows past it left unwritten); its other branches
  ignore it, where their column-major index overlaps experts. Without masked_m an
  input of more than 2 dims is rows of its leading dims (sgl v2's column-major
  index then counts ``output_q.size(-2)`` tokens).
- ``sgl_per_tensor_quant_fp8``: static, the scale is ``output_s``'s first element;
  dynamic, ``output_s = absmax / 448`` (no floor) overwrites it, where sgl takes the
  maximum with the value passed (its callers pass zeros). q = x * (1 / s), where sgl
  multiplies by ``1 / (s + 1e-8)`` (its own test's reference does not add 1e-8):
  for small scales a value can land on the neighbouring fp8 value. An all-zero input
  has scale 0 and q 0 (as sgl).
- ``sgl_per_token_quant_fp8``: ``absmax / 448`` per token, no floor; an all-zero row
  has scale 0 and q 0 (as sgl's ``scale_inv = 0``). output_s ``[T]`` or ``[T, 1]``.
- ``store_cache_xpu`` (sgl-kernel-xpu 9cf16bf9 src/sycl/KVCache.cpp, the KV store
  SGLang's XPU memory pool calls): k/v ``[tokens, row_dim]`` copied bit for bit into
  k_cache/v_cache ``[cache_size, row_dim]`` at ``indices`` (converted to int64 as
  sgl's wrapper does), in place, None returned; a negative index stores nothing
  (sgl: ``< 0``). An index at or past cache_size raises IndexError on CPU tensors;
  on an XPU it is skipped (sgl writes out of bounds). The caches may have any
  strides with a unit last one (sgl: contiguous); the model dtype only, as sgl's
  (no fp8 cache, no scale).
- ``moe_align_block_size`` (sgl-kernel-xpu 9cf16bf9 python/sgl_kernel/moe.py,
  include/sgl_kernel/jit_kernel/moe/moe_align_block_size.hpp): num_experts counts
  sgl's extra bucket (actual experts + 1): a slot's bucket is ``topk_ids + 1``, so
  -1 slots form bucket 0, whose blocks have expert id -1; expert_ids hold bucket -
  1. Pad value ``topk_ids.numel()``: written to every entry of sorted_token_ids not
  holding a slot, whatever pad_sorted_token_ids (sgl: with it True, up to the padded
  total only; accepted, no effect). expert_ids past the padded total hold -1 (sgl
  leaves them unwritten). Within an expert the slots are in increasing flat index
  order (sgl: unspecified on its large path). cumsum_buffer[: num_experts + 1]
  receives the exclusive prefix sums of the padded bucket counts (where each
  bucket's run starts; [num_experts] the total); sgl's large path leaves each
  bucket's start plus its count there, its small path does not write it. An id
  outside [-1, num_experts - 1) raises IndexError on CPU tensors.
- ``moe_sum_reduce``: output = routed_scaling_factor * the float32 sum over topk,
  rounded once (as sgl); the default routed_scaling_factor is sgl's 0 (a zero
  output). ``moe_sum``: the float32 sum over every topk slot, rounded once (sgl's
  kernel adds the first two slots whatever topk, in the input dtype).
- MoE routing (read against sgl-kernel-xpu 9cf16bf9, src/sycl/TopKSoftMax.cpp,
  TopKSigMoid.cpp, MoE_fused_gate.cpp, BiasedTopK.cpp and python/sgl_kernel/moe.py):
  ``topk_softmax``, ``topk_sigmoid``, ``moe_fused_gate`` and ``biased_topk`` run
  ``moe_topk``. Ties: the lower expert index first, and for groups the lower group
  index kept (as sgl's kernels break them). The bias ranks experts only; weights are
  the unbiased float32 scores (sgl's ``topk_sigmoid`` subtracts the bias back from
  score + bias, a float32 rounding apart; ``moe_fused_gate`` computes the scores in
  the input's dtype, rounding them there; its bias has the input's dtype). sgl uses
  ``native::exp`` (a fast, less exact exp) in the softmax/sigmoid of ``topk_softmax``,
  ``topk_sigmoid`` and ``biased_topk``: its weights differ from these in the last
  bits, and a near tie may be resolved the other way.
- Scaling, as each sgl kernel does it: ``topk_softmax``: no factor, weights / sum
  with ``renormalize``. ``topk_sigmoid``: with ``renormalize`` weights times
  ``routed_scaling_factor / sum`` (sgl: ``sum + 1e-20``); without, the raw sigmoid
  scores and the factor is NOT applied. ``moe_fused_gate`` and ``biased_topk``:
  weights / sum with ``renormalize`` (sum > 0), then times ``routed_scaling_factor``
  if ``apply_routed_scaling_factor_on_output`` (``moe_fused_gate``: only when it also
  renormalizes, as sgl's kernel scales inside its renormalization). ``moe_fused_gate`` groups:
  sigmoid scores each group by the sum of its two best ``score + bias``, softmax by
  its best (sgl's rule, not vLLM's bias-driven one); bias may be None.
- Fused shared experts (``num_fused_shared_experts`` = n): the last n of topk slots
  get ids ``num_experts .. num_experts + n - 1`` and the weight ``routed_sum /
  routed_scaling_factor`` (the sum of the routed slots' unbiased scores) before the
  renormalization and scaling above, which apply to them too (``moe_fused_gate``,
  ``biased_topk``). ``topk_sigmoid`` takes n of 0 or 1 (sgl writes one such slot):
  its weight is 1.0 with ``renormalize`` (not scaled), ``routed_sum /
  routed_scaling_factor`` without. sgl's ``routed_scaling_factor`` default 0 in
  ``moe_fused_gate`` makes that weight infinite, as in sgl.
- Routing ids are int32 and weights float32 (sgl's checks). Taken here where sgl
  refuses: any number of experts up to 1024 (sgl: up to 256, ``moe_fused_gate``
  powers of two with groups of at most 32), any group size. ``biased_topk`` takes
  ``scoring_func`` "sigmoid" only (its "sqrtsoftplus" raises NotImplementedError).
- Taken here where sgl refuses: input with any strides but a unit last one (sgl:
  contiguous), float32 input to the per-tensor and per-token ops.
- Sampling (read against sgl-kernel-xpu 9cf16bf9 python/sgl_kernel/sampling.py, which
  follows flashinfer): ``top_k_renorm_probs``, ``top_p_renorm_probs`` (and the aliases
  ``top_k_renorm_prob``, ``top_p_renorm_prob``), ``top_p_sampling_from_probs``,
  ``top_k_top_p_sampling_from_probs`` and ``min_p_sampling_from_probs`` run
  ``ops.top_k_renorm_probs``, ``ops.top_p_renorm_probs`` and ``ops.sample_from_probs``
  (their module doc has the semantics: ties at the top-k / top-p boundary all kept,
  NaN / Inf / negative entries counted as 0, a row without support renormalized to
  zeros and sampled as 0). probs of any float dtype is converted to float32 (sgl's
  ``probs.float()``); samples are int32, one per row of probs or of ``indices``
  (sgl's ``top_p_sampling_from_probs`` sizes them by probs' rows even with
  indices). top_k / top_p / min_p: a number for every row or a per-row tensor
  (top_k converted to int64 unless int32 or int64, the others to float32).
  top_p is a fraction of each row's own mass (of its top-k mass with
  "top_k_first"), where sgl's kernels compare it with the mass itself (the same for
  rows summing to one). Refused where sgl accepts: per-row values out of range on
  CPU (top_k < 1, top_p outside (0, 1], min_p outside [0, 1]; ValueError), a scalar
  min_p outside [0, 1]; taken where sgl refuses: a scalar top_k above the vocabulary
  ("joint") keeps every entry. ``filter_apply_order`` other than "top_k_first" and
  "joint" raises sgl's ValueError; ``check_nan`` raises sgl's ``ValueError("Input
  probs contains NaN.")`` (a host synchronization, as sgl). ``deterministic`` is
  accepted and has no effect: every result here is deterministic (sgl: its
  deterministic prefix sum). ``generator``: a (seed, offset) pair is drawn from it
  (advancing it) for the Philox stream; None draws from the default generator of
  probs' device, so ``torch.manual_seed`` reproduces the samples (sgl: its XPU
  generator's Philox state, so the numbers differ from sgl's).
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .. import ops
from ..ops._checks import check_int, check_tensor
from . import _sgl_kernel_module
from ._args import (
    check_dense,
    check_group_size,
    check_output,
    check_own_memory,
    check_strides,
    engine_names,
)
from ._heads import split_heads
from ._namespaces import EngineOp, define_ops

__all__ = [
    "FusedSetKVBufferArg",
    "apply_rope_with_cos_sin_cache_inplace",
    "biased_topk",
    "fused_add_rmsnorm",
    "fused_inplace_qknorm",
    "fused_qk_rope_with_cos_sin_cache_inplace",
    "gelu_and_mul",
    "gelu_tanh_and_mul",
    "gemma_fused_add_rmsnorm",
    "gemma_rmsnorm",
    "min_p_sampling_from_probs",
    "moe_align_block_size",
    "moe_fused_gate",
    "moe_sum",
    "moe_sum_reduce",
    "rmsnorm",
    "rotary_embedding",
    "sgl_per_tensor_quant_fp8",
    "sgl_per_token_group_quant_8bit",
    "sgl_per_token_group_quant_8bit_v2",
    "sgl_per_token_group_quant_fp8",
    "sgl_per_token_group_quant_int8",
    "sgl_per_token_quant_fp8",
    "silu_and_mul",
    "store_cache_xpu",
    "top_k_renorm_prob",
    "top_k_renorm_probs",
    "top_k_top_p_sampling_from_probs",
    "top_p_renorm_prob",
    "top_p_renorm_probs",
    "top_p_sampling_from_probs",
    "topk_sigmoid",
    "topk_softmax",
]


@engine_names(x="input")
def rmsnorm(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    """input * rsqrt(mean(input^2) + eps) * weight over the last dim; returns out."""
    return ops.rmsnorm(input, weight, eps, out)


@engine_names(x="input")
def fused_add_rmsnorm(
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    enable_pdl: bool | None = None,
) -> None:
    """In place: residual += input; input = rmsnorm of the float32 sum."""
    ops.fused_add_rmsnorm(input, residual, weight, eps, rounded_sum=False)


@engine_names(x="input")
def gemma_rmsnorm(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    """input * rsqrt(mean(input^2) + eps) * (1 + weight); returns out."""
    return ops.gemma_rmsnorm(input, weight, eps, out)


@engine_names(x="input")
def gemma_fused_add_rmsnorm(
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    enable_pdl: bool | None = None,
) -> None:
    """fused_add_rmsnorm scaling by (1 + weight)."""
    ops.gemma_fused_add_rmsnorm(input, residual, weight, eps, rounded_sum=False)


@engine_names()
def fused_inplace_qknorm(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    eps: float = 1e-6,
) -> None:
    """In place, per-head RMSNorm of q [tokens, q_heads, head_dim] and k [tokens, k_heads,
    head_dim]."""
    ops.qknorm(q, k, q_weight, k_weight, eps)


@engine_names(x="input")
def silu_and_mul(input: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """silu(input[..., :d]) * input[..., d:]; returns out."""
    return ops.silu_and_mul(input, out)


@engine_names(x="input")
def gelu_and_mul(input: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """gelu(input[..., :d]) * input[..., d:], gelu's erf form; returns out."""
    return ops.gelu_and_mul(input, out)


@engine_names(x="input")
def gelu_tanh_and_mul(input: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """gelu(input[..., :d]) * input[..., d:], gelu's tanh approximation; returns out."""
    return ops.gelu_tanh_and_mul(input, out)


@dataclass
class FusedSetKVBufferArg:
    """Where apply_rope_with_cos_sin_cache_inplace also stores the rotated key and the value.

    value: [tokens, kv_heads * head_size]; k_buffer, v_buffer: contiguous [slots,
    kv_heads * head_size]; cache_loc: int64 [tokens], the slot of each token.
    k_scale, v_scale: must be None.
    """

    value: torch.Tensor
    k_buffer: torch.Tensor
    v_buffer: torch.Tensor
    k_scale: float | None
    v_scale: float | None
    cache_loc: torch.Tensor


@engine_names(
    q="query",
    k="key",
    v="fused_set_kv_buffer_arg.value",
    k_cache="fused_set_kv_buffer_arg.k_buffer",
    v_cache="fused_set_kv_buffer_arg.v_buffer",
    out_loc="fused_set_kv_buffer_arg.cache_loc",
)
def apply_rope_with_cos_sin_cache_inplace(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool = True,
    fused_set_kv_buffer_arg: FusedSetKVBufferArg | None = None,
    enable_pdl: bool | None = None,
) -> None:
    """Rotates query and key in place by the float32 cos/sin rows of positions."""
    op = "sgl_kernel.apply_rope_with_cos_sin_cache_inplace"
    if cos_sin_cache.dtype != torch.float32:
        raise ValueError(
            f"{op}(): cos_sin_cache has dtype {cos_sin_cache.dtype}; expected torch.float32"
        )
    kv: dict[str, torch.Tensor | None] = {}
    if (arg := fused_set_kv_buffer_arg) is not None:
        if arg.k_scale is not None or arg.v_scale is not None:
            raise ValueError(
                f"{op}(): fused_set_kv_buffer_arg has k_scale={arg.k_scale}, "
                f"v_scale={arg.v_scale}; scaled KV stores are not supported, pass None"
            )
        kv = {
            "v": split_heads(op, "value", arg.value, 1, head_size),
            "k_cache": split_heads(op, "k_buffer", arg.k_buffer, 1, head_size),
            "v_cache": split_heads(op, "v_buffer", arg.v_buffer, 1, head_size),
            "out_loc": arg.cache_loc,
        }
    _rotate(op, positions, query, key, head_size, cos_sin_cache, is_neox, **kv)


@engine_names(q="query", k="key")
def rotary_embedding(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotates query and key in place; returns (query, key), the same objects."""
    _rotate("sgl_kernel.rotary_embedding", positions, query, key, head_size, cos_sin_cache, is_neox)
    return query, key


@engine_names(rotary_dim="rope_dim")
def fused_qk_rope_with_cos_sin_cache_inplace(
    q: torch.Tensor,
    k: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    positions: torch.Tensor,
    rope_dim: int,
    is_neox: bool,
) -> None:
    """Rotates the first rope_dim elements of each head of q and k [tokens, heads,
    >= rope_dim] in place by the cos/sin rows of positions (module doc)."""
    op = "sgl_kernel.fused_qk_rope_with_cos_sin_cache_inplace"
    for name, t in (("q", q), ("k", k)):
        check_tensor(op, name, t)
        if t.dim() != 3:
            raise ValueError(
                f"{op}(): {name} has shape {tuple(t.shape)}; expected [tokens, heads, rope_dim]"
            )
    ops.apply_rope(positions, q, k, cos_sin_cache, is_neox, rope_dim)


def _rotate(
    op: str,
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
    **kv: torch.Tensor | None,
) -> None:
    ops.apply_rope(
        positions,
        split_heads(op, "query", query, 1, head_size),
        split_heads(op, "key", key, 1, head_size),
        cos_sin_cache,
        is_neox,
        **kv,
    )


# Quantization (sgl-kernel-xpu 9cf16bf9: python/sgl_kernel/gemm.py,
# src/sycl/per_token_group_quant_8bit{,_v2}.cpp, per_tensor_quant_fp8.cpp,
# per_token_quant_fp8.cpp): float8_e4m3fn or int8 outputs, written in place.

# The range each output dtype's min/max arguments must name (the v2 kernel's DtypeInfo).
_RANGE = {torch.float8_e4m3fn: (-448.0, 448.0), torch.int8: (-128.0, 127.0)}
_V2_GROUP_SIZES = (16, 32, 64, 128)
_V2_EPS = 1e-10  # the v2 kernel's LOCAL_ABSMAX_ABS, the only eps it takes


def _v2_from_env() -> bool:
    """sglang's get_bool_env_var("SGLANG_PER_TOKEN_GROUP_QUANT_8BIT_V2"): "true" or "1",
    any case, is true; anything else (or unset) false."""
    return os.getenv("SGLANG_PER_TOKEN_GROUP_QUANT_8BIT_V2", "false").lower() in ("true", "1")


def _check_range(op: str, output_q: torch.Tensor, fp8_min: float, fp8_max: float) -> float:
    """The dtype's qmax, with fp8_min/fp8_max checked to be its range."""
    dtype = output_q.dtype if isinstance(output_q, torch.Tensor) else None
    if dtype not in _RANGE:
        raise TypeError(
            f"{op}(): output_q has dtype {dtype}; expected torch.float8_e4m3fn or torch.int8"
        )
    if (fp8_min, fp8_max) != _RANGE[dtype]:
        low, high = _RANGE[dtype]
        raise ValueError(
            f"{op}(): fp8_min, fp8_max are {fp8_min}, {fp8_max}; output_q of {dtype} "
            f"quantizes to [{low:g}, {high:g}], so expected {low:g}, {high:g}"
        )
    return _RANGE[dtype][1]


def _scale_min(eps: float, qmax: float, ue8m0: bool) -> float:
    """sgl's scale max(eps, absmax) / qmax as max(absmax / qmax, eps / qmax) (float32,
    division being monotonic); with ue8m0 the power of two is taken of max(that, 1e-10)."""
    scale_min = (torch.tensor(eps, dtype=torch.float32) / qmax).item()
    if ue8m0:
        scale_min = max(scale_min, torch.tensor(1e-10, dtype=torch.float32).item())
    return scale_min


def _ue8m0_bytes(scales: torch.Tensor) -> torch.Tensor:
    """The UE8M0 byte (exponent + 127) of float32 powers of two."""
    return ((scales.view(torch.int32) >> 23) & 0xFF).to(torch.uint8)


def _check_scale_shape(op: str, output_s: torch.Tensor, shape: tuple, what: str) -> None:
    if tuple(output_s.shape) != shape:
        raise ValueError(
            f"{op}(): output_s has shape {tuple(output_s.shape)}; expected {shape} ({what})"
        )


def _row_major_bytes(output_s: torch.Tensor, shape: tuple) -> torch.Tensor:
    """output_s (1-byte elements, dense: _check_scales_out) as a row-major uint8 tensor
    of shape, its strides ignored as sgl's kernels do."""
    flat = output_s.as_strided((1,), (1,), 0).view(torch.uint8)
    strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    return flat.as_strided(shape, strides, output_s.storage_offset())


def _check_scales_out(
    op: str, output_s: torch.Tensor, lead: tuple, groups: int, column: bool, ue8m0: bool
) -> None:
    """output_s fits the layout it is written in (the module doc), checked before
    anything is written: its dtype's size and shape, and strides that keep what is
    written within its own elements (sgl's kernels address it by the layout alone)."""
    if ue8m0 and column:
        words = -(-groups // 4)
        if output_s.element_size() != 4:
            raise ValueError(
                f"{op}(): column-major UE8M0 scales are packed 4 a word; output_s has dtype "
                f"{output_s.dtype} (expected torch.int32)"
            )
        if tuple(output_s.shape[:-1]) != lead or output_s.shape[-1] < words:
            raise ValueError(
                f"{op}(): output_s has shape {tuple(output_s.shape)}; expected "
                f"[{', '.join(map(str, lead))}, >= {words}] (tokens, words of 4 groups)"
            )
    else:
        if ue8m0 and output_s.element_size() != 1:
            raise ValueError(
                f"{op}(): row-major UE8M0 scales are bytes; output_s has dtype "
                f"{output_s.dtype} (expected torch.uint8)"
            )
        _check_scale_shape(op, output_s, (*lead, groups), "tokens, groups")
    if column:
        layout = "column-major: t + column * stride(-1)"
        check_strides(op, "output_s", output_s, (None,) * (len(lead) - 1) + (1, None), layout)
        check_own_memory(op, "output_s", output_s)
    elif ue8m0:
        check_dense(op, "output_s", output_s, "row-major bytes")
    else:
        strides = (lead[-1] * groups, groups, 1)[-len(lead) - 1 :]
        check_strides(op, "output_s", output_s, strides, "row-major: t * groups + g")


def _write_packed(output_s: torch.Tensor, scale_bytes: torch.Tensor, zero_tail: bool) -> None:
    """Stores UE8M0 bytes [experts, tokens, groups] in DeepGEMM's packed layout: 4 a
    32-bit word, (t, g) in word (g // 4) * output_s.stride(-1) + t (+ e * stride(0)),
    byte g % 4 (by address), output_s checked by _check_scales_out. zero_tail: the unused
    bytes of each row's last word are zeroed (v2), else left alone (v1)."""
    experts, tokens, groups = scale_bytes.shape
    words = -(-groups // 4)
    expert_stride = output_s.stride(0) if output_s.dim() == 3 else 0
    flat = output_s.as_strided((1,), (1,), 0).view(torch.uint8)
    packed = flat.as_strided(
        (experts, tokens, words, 4),
        (4 * expert_stride, 4, 4 * output_s.stride(-1), 1),
        4 * output_s.storage_offset(),
    )
    full = groups // 4
    if zero_tail:
        padded = scale_bytes.new_zeros(experts, tokens, 4 * words)
        padded[..., :groups] = scale_bytes
        packed.copy_(padded.view(experts, tokens, words, 4))
        return
    packed[:, :, :full].copy_(scale_bytes[..., : 4 * full].reshape(experts, tokens, full, 4))
    if groups % 4:
        packed[:, :, full, : groups % 4].copy_(scale_bytes[..., 4 * full :])


def _check_io(
    op: str, input: torch.Tensor, output_q: torch.Tensor, output_s: torch.Tensor, fused: bool
) -> None:
    """input and the outputs: tensors on input's device, output_q of input's shape (its
    last dimension halved when fused, silu(gate) * up); the core op checks what it is
    given again, the compat layer re-views output_q and output_s first."""
    check_tensor(op, "input", input)
    check_output(op, "output_q", output_q, tuple(_RANGE), input)
    check_output(op, "output_s", output_s, None, input)
    if input.dim() == 0:
        raise ValueError(f"{op}(): input is a 0-d tensor; expected [..., hidden]")
    shape = (*input.shape[:-1], input.shape[-1] // 2 if fused else input.shape[-1])
    if tuple(output_q.shape) != shape:
        raise ValueError(
            f"{op}(): output_q has shape {tuple(output_q.shape)}; expected {shape} "
            f"(input's{', its last dimension halved' if fused else ''})"
        )


def _q_rows(op: str, output_q: torch.Tensor) -> torch.Tensor:
    """output_q [..., hidden] as the [rows, hidden] view written."""
    try:
        return output_q.view(-1, output_q.shape[-1])
    except RuntimeError:  # strides that merge no leading dimensions
        raise ValueError(
            f"{op}(): output_q of shape {tuple(output_q.shape)} and strides "
            f"{output_q.stride()} cannot be viewed as [rows, hidden] (call .contiguous())"
        ) from None


def _quantize_groups(
    x: torch.Tensor,
    output_q: torch.Tensor,
    group_size: int,
    scale_min: float,
    ue8m0: bool,
    fuse_silu_and_mul: bool,
    scales: torch.Tensor | None,
) -> torch.Tensor:
    """Quantizes x (or silu(gate) * up, rounded as torch's, of its halves) per group into
    output_q; the scales written into scales, or a new row-major tensor returned."""
    quantize = ops.silu_and_mul_dynamic_quantize if fuse_silu_and_mul else ops.dynamic_quantize
    if scales is None:
        groups = output_q.shape[-1] // group_size
        scales = torch.empty((*output_q.shape[:-1], groups), dtype=torch.float32, device=x.device)
    quantize(
        x,
        dtype=output_q.dtype,
        group_size=group_size,
        scale_min=scale_min,
        ue8m0=ue8m0,
        truncate=output_q.dtype == torch.int8,
        out=output_q,
        scales=scales,
        **({"rounded": True} if fuse_silu_and_mul else {}),
    )
    return scales


@engine_names(x="input", out="output_q", scales="output_s")
def sgl_per_token_group_quant_8bit(
    input: torch.Tensor,
    output_q: torch.Tensor,
    output_s: torch.Tensor,
    group_size: int,
    eps: float,
    fp8_min: float,
    fp8_max: float,
    scale_ue8m0: bool = False,
    fuse_silu_and_mul: bool = False,
    masked_m: torch.Tensor | None = None,
    enable_v2: bool | None = None,
) -> None:
    """Per group of group_size values of a token: scale = max(eps, absmax) / fp8_max
    (rounded up to a power of two with scale_ue8m0); output_q = input * (1 / scale),
    fp8 rounded to nearest even, int8 truncated toward zero. output_s's dtype and
    strides choose the layout (the module doc). enable_v2 None: the environment
    variable SGLANG_PER_TOKEN_GROUP_QUANT_8BIT_V2, as sglang reads it; v2 also takes
    fuse_silu_and_mul and masked_m."""
    if enable_v2 is None:
        enable_v2 = _v2_from_env()
    if enable_v2:
        return sgl_per_token_group_quant_8bit_v2(
            input,
            output_q,
            output_s,
            group_size,
            eps,
            fp8_min,
            fp8_max,
            scale_ue8m0,
            fuse_silu_and_mul,
            masked_m,
        )
    if fuse_silu_and_mul:
        raise AssertionError("only v2 support fuse_silu_and_mul")
    if masked_m is not None:
        raise AssertionError("only v2 support masked_m")
    op = "sgl_kernel.sgl_per_token_group_quant_8bit"
    qmax = _check_range(op, output_q, fp8_min, fp8_max)
    _check_io(op, input, output_q, output_s, fused=False)
    if output_s.dim() != 2:
        raise ValueError(f"{op}(): output_s is {output_s.dim()}-D; expected 2-D")
    hidden = input.shape[-1]
    groups = hidden // check_group_size(op, group_size, hidden)
    if input.numel() == 0:
        return
    x, q = _rows(input), _q_rows(op, output_q)
    tokens = x.shape[0]
    column = output_s.stride(0) < output_s.stride(1)
    _check_scales_out(op, output_s, (tokens,), groups, column, scale_ue8m0)
    scale_min = _scale_min(eps, qmax, scale_ue8m0)
    if not scale_ue8m0:
        _quantize_groups(x, q, group_size, scale_min, False, False, output_s)
        return
    scale_bytes = _ue8m0_bytes(_quantize_groups(x, q, group_size, scale_min, True, False, None))
    if column:
        _write_packed(output_s, scale_bytes.unsqueeze(0), zero_tail=False)
    else:
        _row_major_bytes(output_s, (tokens, groups)).copy_(scale_bytes)


@engine_names(x="input", out="output_q", scales="output_s")
def sgl_per_token_group_quant_8bit_v2(
    input: torch.Tensor,
    output_q: torch.Tensor,
    output_s: torch.Tensor,
    group_size: int,
    eps: float,
    fp8_min: float,
    fp8_max: float,
    scale_ue8m0: bool,
    fuse_silu_and_mul: bool,
    masked_m: torch.Tensor | None,
) -> None:
    """sgl_per_token_group_quant_8bit's v2 kernel: eps 1e-10 only, fp16/bf16 input,
    group_size 16, 32, 64 or 128; fuse_silu_and_mul quantizes silu(gate) * up (the
    halves of input, silu and the product rounded to its dtype); masked_m: input
    [experts, tokens, ...] and output_s [experts, ...], every row quantized; column-major
    scales interleaved (the module doc)."""
    op = "sgl_kernel.sgl_per_token_group_quant_8bit_v2"
    qmax = _check_range(op, output_q, fp8_min, fp8_max)
    if not abs(_V2_EPS - eps) < 1e-13:
        raise ValueError(f"{op}(): eps is {eps}; the v2 kernel takes 1e-10 only")
    _check_io(op, input, output_q, output_s, fused=fuse_silu_and_mul)
    if input.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"{op}(): input has dtype {input.dtype}; expected float16 or bfloat16")
    check_group_size(op, group_size, output_q.shape[-1])
    if group_size not in _V2_GROUP_SIZES:
        raise ValueError(f"{op}(): group_size is {group_size}; expected one of {_V2_GROUP_SIZES}")
    if input.numel() == 0:
        raise ValueError(f"{op}(): input is empty")
    masked = masked_m is not None
    if output_s.dim() != (3 if masked else 2):
        expected = "3-D with" if masked else "2-D without"
        raise ValueError(f"{op}(): output_s is {output_s.dim()}-D; expected {expected} masked_m")
    hidden = output_q.shape[-1]
    if masked:
        if input.dim() != 3 or output_q.dim() != 3:
            raise ValueError(
                f"{op}(): with masked_m, input {tuple(input.shape)} and output_q "
                f"{tuple(output_q.shape)} must be 3-D (experts, tokens, hidden)"
            )
        x, q = input, output_q
    else:
        x, q = _rows(input), _q_rows(op, output_q)
    experts = x.shape[0] if masked else 1
    tokens, groups = q.shape[-2], hidden // group_size
    scale_min = _scale_min(eps, qmax, scale_ue8m0)
    column = output_s.stride(-2) < output_s.stride(-1)
    lead = (experts, tokens) if masked else (tokens,)
    _check_scales_out(op, output_s, lead, groups, column, scale_ue8m0)
    if not column and not scale_ue8m0:
        _quantize_groups(x, q, group_size, scale_min, False, fuse_silu_and_mul, output_s)
        return
    scales = _quantize_groups(x, q, group_size, scale_min, scale_ue8m0, fuse_silu_and_mul, None)
    scales = scales.view(experts, tokens, groups)
    if not column:
        _row_major_bytes(output_s, (*lead, groups)).copy_(_ue8m0_bytes(scales).view(*lead, groups))
        return
    # Interleaved: scale (t, g) at the position (f // groups, f % groups), f = t + g * tokens.
    interleaved = scales.transpose(1, 2).reshape(experts, tokens, groups)
    if scale_ue8m0:
        _write_packed(output_s, _ue8m0_bytes(interleaved), zero_tail=True)
        return
    expert_stride = output_s.stride(0) if masked else 0
    view = output_s.as_strided((experts, tokens, groups), (expert_stride, 1, output_s.stride(-1)))
    view.copy_(interleaved)


# For legacy usage (sgl_kernel's aliases).
sgl_per_token_group_quant_fp8 = sgl_per_token_group_quant_8bit
sgl_per_token_group_quant_int8 = sgl_per_token_group_quant_8bit


@engine_names(x="input", out="output_q", scales="output_s", scale="output_s")
def sgl_per_tensor_quant_fp8(
    input: torch.Tensor, output_q: torch.Tensor, output_s: torch.Tensor, is_static: bool
) -> None:
    """output_q = fp8(input * (1 / scale)): is_static, scale = output_s (one float32
    element), else scale = absmax(input) / 448 written into output_s."""
    op = "sgl_kernel.sgl_per_tensor_quant_fp8"
    check_tensor(op, "input", input)
    check_output(op, "output_q", output_q, (torch.float8_e4m3fn,), input)
    check_output(op, "output_s", output_s, (torch.float32,), input)
    if is_static:
        ops.quantize(input, output_s.reshape(-1)[:1], dtype=output_q.dtype, out=output_q)
    else:
        ops.dynamic_quantize_per_tensor(
            input, dtype=output_q.dtype, scale_min=0.0, out=output_q, scales=output_s
        )


@engine_names(x="input", out="output_q", scales="output_s")
def sgl_per_token_quant_fp8(
    input: torch.Tensor, output_q: torch.Tensor, output_s: torch.Tensor
) -> None:
    """Per token: output_s[t] = absmax / 448 (0 for an all-zero row, quantized to 0);
    output_q = fp8(input * (1 / output_s[t])). output_s: float32 [tokens] or [tokens, 1]."""
    op = "sgl_kernel.sgl_per_token_quant_fp8"
    check_tensor(op, "input", input)
    check_output(op, "output_q", output_q, (torch.float8_e4m3fn,), input)
    check_output(op, "output_s", output_s, (torch.float32,), input)
    lead = tuple(input.shape[:-1])
    if output_s.numel() != math.prod(lead):
        raise ValueError(
            f"{op}(): output_s has shape {tuple(output_s.shape)}; expected {math.prod(lead)} "
            "elements ([tokens] or [tokens, 1])"
        )
    ops.dynamic_quantize(
        input, dtype=output_q.dtype, scale_min=0.0, out=output_q, scales=output_s.view(*lead, 1)
    )


def _rows(t: torch.Tensor) -> torch.Tensor:
    """t [..., hidden] as [rows, hidden] (a view where the strides allow; t is read)."""
    return t if t.dim() == 2 else t.reshape(-1, t.shape[-1])


@engine_names(
    key="k", value="v", key_cache="k_cache", value_cache="v_cache", slot_mapping="indices"
)
def store_cache_xpu(
    k: torch.Tensor,
    v: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    indices: torch.Tensor,
) -> None:
    """sgl-kernel-xpu's fused KV-cache store (9cf16bf9 python/sgl_kernel/elementwise.py):
    k/v [tokens, row_dim] (unit last stride) into k_cache/v_cache [cache_size, row_dim]
    at indices (any integer dtype, taken as int64 as sgl's ``indices.long()``); a
    negative index stores nothing (module doc)."""
    op = "sgl_kernel.store_cache_xpu"
    for name, t in (("k", k), ("v", v), ("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(t, torch.Tensor) or t.dim() != 2:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{op}(): {name} is {shape}; expected a 2-D tensor")
    ops.store_kv_cache(
        k.unsqueeze(1),
        v.unsqueeze(1),
        k_cache.unsqueeze(1).unsqueeze(1),
        v_cache.unsqueeze(1).unsqueeze(1),
        indices.long() if isinstance(indices, torch.Tensor) else indices,
    )


@engine_names(expert_ids="experts_ids", num_tokens_post_padded="num_tokens_post_pad")
def moe_align_block_size(
    topk_ids: torch.Tensor,
    num_experts: int,
    block_size: int,
    sorted_token_ids: torch.Tensor,
    experts_ids: torch.Tensor,
    num_tokens_post_pad: torch.Tensor,
    cumsum_buffer: torch.Tensor,
    pad_sorted_token_ids: bool = False,
) -> None:
    """sgl_kernel's ``moe_align_block_size``, in place (module doc)."""
    op = "sgl_kernel.moe_align_block_size"
    check_tensor(op, "topk_ids", topk_ids)
    check_int(op, "num_experts", num_experts, minimum=1)
    # Written here with torch ops, after the core op: checked before it runs.
    check_output(op, "cumsum_buffer", cumsum_buffer, (torch.int32,), topk_ids, "topk_ids")
    if cumsum_buffer.dim() != 1 or cumsum_buffer.shape[0] < num_experts + 1:
        raise ValueError(
            f"{op}(): cumsum_buffer has shape {tuple(cumsum_buffer.shape)}; expected "
            f"[>= {num_experts + 1}] (num_experts + 1)"
        )
    check_own_memory(op, "cumsum_buffer", cumsum_buffer[: num_experts + 1])
    buckets = topk_ids + 1
    ops.moe_align_block_size(
        buckets,
        num_experts,
        block_size,
        sorted_token_ids=sorted_token_ids,
        expert_ids=experts_ids,
        num_tokens_post_padded=num_tokens_post_pad,
    )
    experts_ids.sub_(1).clamp_(min=-1)
    counts = torch.bincount(buckets.reshape(-1), minlength=num_experts)[:num_experts]
    padded = (counts + block_size - 1) // block_size * block_size
    cumsum_buffer[0] = 0
    cumsum_buffer[1 : num_experts + 1] = padded.cumsum(0)


@engine_names(x="input_tensor", out="output_tensor", scale="routed_scaling_factor")
def moe_sum_reduce(
    input_tensor: torch.Tensor, output_tensor: torch.Tensor, routed_scaling_factor: float = 0
) -> None:
    """sgl_kernel's ``moe_sum_reduce``, in place (module doc)."""
    ops.moe_sum(input_tensor, scale=float(routed_scaling_factor), out=output_tensor)


@engine_names(x="input_tensor", out="output_tensor")
def moe_sum(input_tensor: torch.Tensor, output_tensor: torch.Tensor) -> None:
    """sgl_kernel's ``moe_sum``, in place (module doc)."""
    ops.moe_sum(input_tensor, out=output_tensor)


# MoE routing (module doc).


@engine_names()
def topk_softmax(
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    gating_output: torch.Tensor,
    renormalize: bool = False,
) -> None:
    """sgl_kernel's ``topk_softmax``: each token's top-k experts of softmax(gating_output),
    written into topk_weights and topk_ids (module doc)."""
    op = "sgl_kernel.topk_softmax"
    topk = _routed_slots(op, "topk_weights", topk_weights, "topk_ids", topk_ids, 0)
    ops.moe_topk(
        gating_output, topk, renormalize=renormalize, topk_weights=topk_weights, topk_ids=topk_ids
    )


def _routed_slots(
    op: str,
    weights_name: str,
    weights: torch.Tensor,
    ids_name: str,
    ids: torch.Tensor,
    shared: int,
) -> int:
    """The number of routed slots of the outputs [tokens, topk] (2-D, one shape, their
    own memory: the shared slots are written here with torch ops; the core op checks the
    routed slots' dtype, device and tokens), at least 1."""
    for name, t in ((weights_name, weights), (ids_name, ids)):
        check_tensor(op, name, t)
        if t.dim() != 2:
            raise ValueError(f"{op}(): {name} has shape {tuple(t.shape)}; expected [tokens, topk]")
        check_own_memory(op, name, t)
    if ids.shape != weights.shape:
        raise ValueError(
            f"{op}(): {ids_name} has shape {tuple(ids.shape)}; expected {weights_name}'s, "
            f"{tuple(weights.shape)}"
        )
    return _routed_count(op, weights.shape[1], shared)


def _routed_count(op: str, topk: int, shared: int) -> int:
    """topk - shared, the routed slots: at least 1."""
    check_int(op, "topk", topk, minimum=1)
    check_int(op, "num_fused_shared_experts", shared, minimum=0)
    if topk - shared < 1:
        raise ValueError(
            f"{op}(): num_fused_shared_experts is {shared}; expected fewer than topk, {topk}"
        )
    return topk - shared


def _shared_slots(
    weights: torch.Tensor, ids: torch.Tensor, routed: int, experts: int, factor: float
) -> None:
    """The fused shared experts' slots, past the first `routed` (module doc)."""
    shared = weights.shape[1] - routed
    routed_sum = weights[:, :routed].sum(dim=1, keepdim=True)
    weights[:, routed:] = routed_sum / factor if factor else routed_sum * math.inf
    ids[:, routed:] = torch.arange(experts, experts + shared, dtype=ids.dtype, device=ids.device)


@engine_names()
def topk_sigmoid(
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    gating_output: torch.Tensor,
    renormalize: bool = False,
    correction_bias: torch.Tensor | None = None,
    routed_scaling_factor: float = 1.0,
    num_fused_shared_experts: int = 0,
) -> None:
    """sgl_kernel's ``topk_sigmoid``: each token's top-k experts of sigmoid(gating_output)
    (+ correction_bias for the ranking), in place (module doc: scaling, shared experts)."""
    op = "sgl_kernel.topk_sigmoid"
    if num_fused_shared_experts not in (0, 1):
        raise ValueError(
            f"{op}(): num_fused_shared_experts is {num_fused_shared_experts!r}; "
            "expected 0 or 1 (sgl writes one shared slot)"
        )
    routed = _routed_slots(
        op, "topk_weights", topk_weights, "topk_ids", topk_ids, num_fused_shared_experts
    )
    factor = float(routed_scaling_factor)
    ops.moe_topk(
        gating_output,
        routed,
        scoring="sigmoid",
        correction_bias=correction_bias,
        topk_weights=topk_weights[:, :routed],
        topk_ids=topk_ids[:, :routed],
    )
    if num_fused_shared_experts:
        _shared_slots(topk_weights, topk_ids, routed, gating_output.shape[-1], factor)
        if renormalize:
            topk_weights[:, routed:] = 1.0
    if renormalize:
        routed_weights = topk_weights[:, :routed]
        routed_weights.mul_(factor / routed_weights.sum(dim=1, keepdim=True).clamp_min(1e-20))


def _scaled(
    weights: torch.Tensor,
    ids: torch.Tensor,
    routed: int,
    experts: int,
    renormalize: bool,
    factor: float,
    apply_factor: bool,
) -> None:
    """Shared slots, then weights / routed sum (renormalize, sum > 0) times the factor
    (apply_factor), as moe_fused_gate and biased_topk (module doc)."""
    if routed < weights.shape[1]:
        _shared_slots(weights, ids, routed, experts, factor)
    if renormalize:
        routed_sum = weights[:, :routed].sum(dim=1, keepdim=True)
        weights.div_(torch.where(routed_sum > 0, routed_sum, 1.0))
    if apply_factor:
        weights.mul_(factor)


@engine_names(gating_output="input_tensor", correction_bias="bias")
def moe_fused_gate(
    input_tensor: torch.Tensor,
    bias: torch.Tensor | None,
    num_expert_group: int,
    topk_group: int,
    topk: int,
    renormalize: bool = True,
    scoring_func: str = "sigmoid",
    num_fused_shared_experts: int = 0,
    routed_scaling_factor: float = 0,
    apply_routed_scaling_factor_on_output: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """sgl_kernel's ``moe_fused_gate``: grouped top-k, (weights float32, ids int32)
    [tokens, topk] (module doc)."""
    scoring = scoring_func.lower() if isinstance(scoring_func, str) else scoring_func
    if scoring not in ("sigmoid", "softmax"):
        raise ValueError(
            f"Unknown scoring_func '{scoring_func}', must be one of ['sigmoid', 'softmax']"
        )
    routed = _routed_count("sgl_kernel.moe_fused_gate", topk, num_fused_shared_experts)
    weights = torch.empty(
        (input_tensor.shape[0], topk), dtype=torch.float32, device=input_tensor.device
    )
    ids = torch.empty_like(weights, dtype=torch.int32)
    ops.moe_topk(
        input_tensor,
        routed,
        scoring=scoring,
        correction_bias=bias,
        num_expert_group=num_expert_group,
        topk_group=topk_group,
        group_scoring="top2_sum" if scoring == "sigmoid" else "max",
        topk_weights=weights[:, :routed],
        topk_ids=ids[:, :routed],
    )
    _scaled(
        weights,
        ids,
        routed,
        input_tensor.shape[-1],
        renormalize,
        float(routed_scaling_factor),
        renormalize and apply_routed_scaling_factor_on_output,  # sgl scales in its renorm
    )
    return weights, ids


@engine_names(
    gating_output="input_tensor", correction_bias="bias", topk_weights="output", topk_ids="indices"
)
def biased_topk(
    input_tensor: torch.Tensor,
    bias: torch.Tensor,
    output: torch.Tensor,
    indices: torch.Tensor,
    topk: int,
    scoring_func: str,
    num_fused_shared_experts: int = 0,
    renormalize: bool = False,
    routed_scaling_factor: float = 1.0,
    apply_routed_scaling_factor_on_output: bool = False,
) -> None:
    """sgl_kernel's ``biased_topk``: top-k of sigmoid(input) + bias, unbiased weights,
    written into output and indices (module doc)."""
    scoring = scoring_func.lower() if isinstance(scoring_func, str) else scoring_func
    if scoring == "sqrtsoftplus":
        raise NotImplementedError("biased_topk(): scoring_func 'sqrtsoftplus' is not provided")
    if scoring != "sigmoid":
        raise ValueError(
            f"Unknown scoring_func '{scoring_func}', must be one of ['sigmoid', 'sqrtsoftplus']"
        )
    op = "sgl_kernel.biased_topk"
    routed = _routed_slots(op, "output", output, "indices", indices, num_fused_shared_experts)
    if output.shape[1] != topk:
        raise ValueError(
            f"{op}(): output has shape {tuple(output.shape)}; expected [tokens, {topk}] (topk)"
        )
    ops.moe_topk(
        input_tensor,
        routed,
        scoring="sigmoid",
        correction_bias=bias,
        topk_weights=output[:, :routed],
        topk_ids=indices[:, :routed],
    )
    _scaled(
        output,
        indices,
        routed,
        input_tensor.shape[-1],
        renormalize,
        float(routed_scaling_factor),
        apply_routed_scaling_factor_on_output,
    )


def _per_row_int(t: torch.Tensor) -> torch.Tensor:
    """A per-row top_k as the core op takes it: int32 or int64 (sgl: ``.long()``/``.int()``)."""
    return t if t.dtype in (torch.int32, torch.int64) else t.long()


def _check_nan(probs: torch.Tensor) -> None:
    if torch.any(torch.isnan(probs)):
        raise ValueError("Input probs contains NaN.")


def _seed(generator: torch.Generator | None, probs: torch.Tensor) -> torch.Tensor | None:
    """The core op's seed pair: drawn from `generator`, or None (the default generator
    of probs' device, drawn by the op)."""
    return None if generator is None else ops.sampling.philox_seed(generator, probs.device)


@engine_names(top_k_per_row="top_k")
def top_k_renorm_probs(probs: torch.Tensor, top_k: torch.Tensor | int) -> torch.Tensor:
    """sgl_kernel's ``top_k_renorm_probs``: each row kept to its top_k largest entries
    (ties with the k-th all kept) and renormalized, float32 (module doc)."""
    probs = probs.float()
    if isinstance(top_k, torch.Tensor):
        return ops.top_k_renorm_probs(probs, top_k_per_row=_per_row_int(top_k))
    return ops.top_k_renorm_probs(probs, top_k)


@engine_names(top_p_per_row="top_p")
def top_p_renorm_probs(probs: torch.Tensor, top_p: torch.Tensor | float) -> torch.Tensor:
    """sgl_kernel's ``top_p_renorm_probs``: each row kept to its top-p nucleus and
    renormalized, float32 (module doc)."""
    probs = probs.float()
    if isinstance(top_p, torch.Tensor):
        return ops.top_p_renorm_probs(probs, top_p_per_row=top_p.float())
    return ops.top_p_renorm_probs(probs, top_p)


top_k_renorm_prob = top_k_renorm_probs
top_p_renorm_prob = top_p_renorm_probs


def _filter(name: str, value: torch.Tensor | float | int, per_row: Callable) -> dict:
    """A sampling filter as the core op's keyword arguments."""
    if isinstance(value, torch.Tensor):
        return {f"{name}_per_row": per_row(value)}
    return {name: value}


def _sample(
    probs: torch.Tensor,
    indices: torch.Tensor | None,
    generator: torch.Generator | None,
    check_nan: bool,
    **filters: object,
) -> torch.Tensor:
    if check_nan:
        _check_nan(probs)
    probs = probs.float()
    return ops.sample_from_probs(probs, indices=indices, seed=_seed(generator, probs), **filters)


@engine_names(top_p_per_row="top_p")
def top_p_sampling_from_probs(
    probs: torch.Tensor,
    top_p: torch.Tensor | float,
    indices: torch.Tensor | None = None,
    deterministic: bool = True,
    generator: torch.Generator | None = None,
    check_nan: bool = False,
) -> torch.Tensor:
    """sgl_kernel's ``top_p_sampling_from_probs``: int32 samples, one per row of probs
    (of indices, when given), from each row's top-p nucleus (module doc)."""
    top_p_filter = _filter("top_p", top_p, lambda t: t.float())
    return _sample(probs, indices, generator, check_nan, **top_p_filter)


@engine_names(top_k_per_row="top_k", top_p_per_row="top_p")
def top_k_top_p_sampling_from_probs(
    probs: torch.Tensor,
    top_k: torch.Tensor | int,
    top_p: torch.Tensor | float,
    indices: torch.Tensor | None = None,
    filter_apply_order: str = "top_k_first",
    deterministic: bool = True,
    generator: torch.Generator | None = None,
    check_nan: bool = False,
) -> torch.Tensor:
    """sgl_kernel's ``top_k_top_p_sampling_from_probs``: int32 samples from each row's
    top-k and top-p entries, top-p over the top-k mass ("top_k_first") or both on
    the whole row ("joint") (module doc)."""
    if filter_apply_order not in ("top_k_first", "joint"):
        raise ValueError(f"Invalid filter_apply_order: {filter_apply_order}")
    filters = {
        **_filter("top_k", top_k, _per_row_int),
        **_filter("top_p", top_p, lambda t: t.float()),
    }
    joint = filter_apply_order == "joint"
    return _sample(probs, indices, generator, check_nan, joint=joint, **filters)


@engine_names(min_p_per_row="min_p")
def min_p_sampling_from_probs(
    probs: torch.Tensor,
    min_p: torch.Tensor | float,
    indices: torch.Tensor | None = None,
    deterministic: bool = True,
    generator: torch.Generator | None = None,
    check_nan: bool = False,
) -> torch.Tensor:
    """sgl_kernel's ``min_p_sampling_from_probs``: int32 samples from each row's
    entries of at least min_p times its largest (module doc)."""
    min_p_filter = _filter("min_p", min_p, lambda t: t.float())
    return _sample(probs, indices, generator, check_nan, **min_p_filter)


# install(): unmodified SGLang code on this module (module doc).

# sgl-kernel-xpu 9cf16bf9 src/torch_extension_sycl.cc's schema.
_ROTARY_EMBEDDING_SCHEMA = (
    "rotary_embedding(Tensor positions, Tensor query, Tensor key, int head_size, "
    "Tensor cos_sin_cache, bool is_neox) -> (Tensor, Tensor)"
)


def install() -> bool:
    """Makes ``import sgl_kernel`` give this module's ``__all__`` and registers
    ``torch.ops.sgl_kernel.rotary_embedding`` (CPU and XPU kernels, a fake one), where
    no sgl_kernel is installed: call it before SGLang is imported. Returns True when
    they are in place (a second call does nothing more), False when another
    ``sgl_kernel`` is imported or importable: that one is left alone, nothing is
    registered, and a warning says so."""
    shim = _sgl_kernel_module
    present = sys.modules.get("sgl_kernel")
    if present is shim:
        return True
    # find_spec looks in sys.modules first, where a module without a spec raises.
    spec = None if present is not None else importlib.util.find_spec("sgl_kernel")
    if present is not None or spec is not None:
        where = getattr(present, "__file__", None) or (spec.origin if spec else None)
        warnings.warn(
            f"sycl_kernels.compat.sgl_kernel.install(): an sgl_kernel is already "
            f"{'imported' if present is not None else 'installed'} ({where}); it is left "
            "in place and sycl_kernels' sgl_kernel functions are not installed",
            stacklevel=2,
        )
        return False
    _register_ops()
    vars(shim).update({name: globals()[name] for name in __all__})
    shim.__all__ = list(__all__)
    sys.modules["sgl_kernel"] = shim
    return True


def _register_ops() -> None:
    """torch.ops.sgl_kernel's ops SGLang's XPU layers call (compat/_namespaces.py: an op
    already registered is left alone; a second call finds them registered)."""
    table = [
        EngineOp(
            "sgl_kernel", _ROTARY_EMBEDDING_SCHEMA, _rotary_embedding_op, _rotary_embedding_fake
        )
    ]
    define_ops("sycl_kernels.compat.sgl_kernel.install()", table)


def _rotary_embedding_op(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.ops.sgl_kernel.rotary_embedding: rotated copies (the schema writes nothing)."""
    q, k = query.clone(), key.clone()
    return rotary_embedding(positions, q, k, head_size, cos_sin_cache, is_neox)


def _rotary_embedding_fake(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    # clone's strides: empty_like keeps a dense tensor's, as clone does.
    return torch.empty_like(query), torch.empty_like(key)
