"""sycl_kernels.compat.vllm: vLLM's custom-op calls on the core ops.

An engine's XPU branch calls these in place of ``vllm._custom_ops.<name>`` or
``torch.ops._C.<name>`` (which ``vllm_xpu_kernels`` registers): the names, argument
order, in-place contract (every function writes its ``out``/``input``/``query``/``key``
and returns None) and dtype rules are vLLM's. An argument that cannot be taken
raises TypeError or ValueError (IndexError for an index out of range on CPU tensors)
naming vLLM's argument and what was expected: a core op's error is re-worded in the
function's own names (``compat._args.engine_names``), and what this module re-views
itself (scale buffers, routing outputs) is checked before.

``register()`` (or vLLM's ``vllm.general_plugins`` entry point ``sycl_kernels``, which
calls it) defines these functions as vLLM's ops, for code that calls
``torch.ops._C.rms_norm(...)`` and for vLLM's fusion passes, which match those op
overloads: 24 in ``_C``, 5 in ``_moe_C`` (``topk_softmax``, ``topk_sigmoid``,
``grouped_topk``, ``moe_align_block_size``, ``moe_sum``) and 5 in ``_C_cache_ops`` (the
paged KV cache ops), each with vLLM's schema (argument names, types, defaults, the
``Tensor!`` of what it writes), CPU and XPU kernels that run the function of its name,
and a fake kernel for torch.compile. An op whose name is taken (by vLLM's own kernels
or vllm-xpu-kernels, both loaded first where installed) is left alone. Importing this
module defines nothing. Called through torch.ops, the schema decides what an argument may
be: ``grouped_topk``'s ``bias`` must be a tensor there, and the KV scales too.

Points where the behaviour could be read two ways, and the reading taken here:

- ``fused_add_rms_norm``: ``residual`` receives ``input + residual`` rounded to the
  dtype, and ``input`` the norm of that rounded sum (its sum of squares too), as
  vLLM's CUDA and XPU kernels do (vLLM's torch-native RMSNorm and SGLang normalize
  the float32 sum instead: at fp16/bf16 some elements differ by one unit in the last
  place).
- Norms round once: ``round(x * rsqrt(mean(x^2) + eps) * weight)`` in float32.
  vLLM's kernels round ``x * rsqrt(...)`` to the dtype before multiplying by the
  weight, so at fp16/bf16 results can differ by one unit in the last place.
  ``weight`` may be None (no scale), the input's dtype, or float32 on fp16/bf16
  input. ``out`` may be any tensor of ``input``'s shape with unit last stride (vLLM
  requires a contiguous one).
- Gated activations round once: ``round(act(x[..., :d]) * x[..., d:])``; vLLM's
  kernels round ``act(x)`` to the dtype before the product (again up to one unit in
  the last place at fp16/bf16). ``mul_and_silu`` activates the second half.
- ``rotary_embedding``: positions ``[tokens]`` with query/key ``[tokens, heads *
  head_size]`` or ``[tokens, heads, head_size]``, or ``[batch, seq]`` with
  ``[batch, seq, heads * head_size]`` or ``[batch, seq, heads, head_size]``; key
  may be None. rotary_dim is ``cos_sin_cache.shape[-1]``; the rotated elements are
  ``rope_dim_offset .. rope_dim_offset + rotary_dim`` of each head and the rest are
  left alone. Positions may be int32 as well as int64 (vLLM: int64). The cache
  may be float32 or the query's dtype; vLLM also accepts other pairs (an fp16 cache
  on bf16 query), refused here. A 3-D (or 4-D) query whose last dimension is not
  ``head_size`` is refused (vLLM would read heads of ``head_size`` at its head
  stride). ``inverse=True`` rotates by minus the angle; it gathers this call's
  cache rows with the sines negated (a ``[tokens, rotary_dim]`` temporary).
- ``fused_qk_norm_rope``: ``qkv`` ``[tokens, (num_heads_q + num_heads_k +
  num_heads_v) * head_dim]`` with any row stride (vLLM: contiguous); the q and k
  heads are normalized and rotated in place (``qknorm_rope``: the normalized value
  is rotated in float32 and rounded once, as vLLM's kernel does), the v heads
  stay. rotary_dim is ``cos_sin_cache.shape[-1]``; head_dim may be any even size
  (vLLM: 64, 128 or 256); the weights may also be float32 on fp16/bf16 ``qkv``, the
  cache float32 or ``qkv``'s dtype (vLLM also takes other pairs, refused here).
  ``forced_token_heads_per_warp`` picks a CUDA launch shape and is ignored.
- ``gelu_new`` and ``gelu_fast`` are one function, gelu's tanh approximation
  ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`` written two ways,
  and both run ``gelu_tanh``: math in float32 in a form without the cancellation of
  ``1 + tanh`` far below zero, rounded once. vLLM's kernels compute in the dtype,
  rounding ``x^3``, the tanh and ``1 + tanh`` (and so on) to fp16/bf16 on the way,
  so there the two differ from each other and from this by a few units in the last
  place, more in relative terms where the result is near 0 (x below about -3).
  ``gelu_quick`` (``x * sigmoid(1.702 * x)``, ``gelu_quick``): vLLM rounds the exp
  to the dtype, which at fp16 overflows to Inf below x of about -6.5 (a result of
  -0 where this gives the tiny negative value).
- ``fatrelu_and_mul``: ``(gate if gate > threshold else 0) * up``, the comparison
  of vLLM's kernel (strict, and a NaN gate counts as 0; its torch-native form,
  ``F.threshold``, keeps NaN); the same bits as vLLM's. vLLM's schema marks
  ``input`` as written (``Tensor! input``) but its kernel only reads it; it is
  only read here.
- ``swigluoai_and_mul``: gate and up interleaved, ``x[..., 0::2]`` and
  ``x[..., 1::2]`` (gpt-oss's layout, as vLLM's kernel reads them); gate clamped to
  at most ``limit``, up to ``[-limit, limit]``, ``(up + 1) * gate * sigmoid(alpha *
  gate)`` in float32, rounded once, as vLLM's. A negative ``limit`` (which vLLM
  takes, clamping inconsistently) or a NaN ``alpha``/``limit`` is refused.
- The activations take ``input`` with any strides but a unit last one, and ``out``
  of the expected shape with a unit last stride (vLLM: contiguous ones).
- Quantization (read against vllm-xpu-kernels 4543b580): ``static_scaled_fp8_quant``,
  ``dynamic_scaled_fp8_quant``, ``dynamic_per_token_scaled_fp8_quant``,
  ``per_token_group_fp8_quant``, ``rms_norm_static_fp8_quant``,
  ``fused_add_rms_norm_static_fp8_quant``, ``rms_norm_dynamic_per_token_quant``,
  ``rms_norm_per_block_quant``, ``silu_and_mul_quant`` and
  ``silu_and_mul_per_block_quant`` take vLLM's schema order and write their outputs
  (None returned). q = saturate(round(v * (1 / s))), the reciprocal taken once in
  float32 as vLLM's kernels do, except ``silu_and_mul_per_block_quant``, which
  divides (``v / s``): there a value can land on the neighbouring fp8/int8 value
  (never with ue8m0's powers of two). fp8 rounds to nearest even and saturates at
  +-448; int8 rounds half to even (vLLM's ``rint``) and clamps to [-128, 127].
- NaN and Inf: vLLM builds without ``-fhonor-nans`` (icpx's fast floating-point
  default) and uses ``sycl::min``/``max``, undefined on NaN, so its results there
  are unspecified. Here the absolute maximum ignores NaN, a NaN value quantizes to
  NaN (fp8) or 0 (int8), and an infinite value makes its dynamic scale infinite (the
  group's other values 0, itself NaN or 0).
- Scale floors: vLLM's ``1 / (448 * 512)`` for the dynamic fp8 scales, except
  ``dynamic_scaled_fp8_quant`` (none: an all-zero input gets scale 0 and quantizes to
  0, where vLLM computes ``0 * inf``). ``per_token_group_fp8_quant``:
  ``max(max(absmax, eps) / 448, 1 / (448 * 512))``, taken as ``max(absmax / 448,
  max(eps / 448, 1 / (448 * 512)))`` (equal: division is monotonic); eps always
  counts (vLLM's scalar kernel drops it when group_size % 4 == 0; it matters only
  above 1 / 512). A static scale of 0 quantizes to 0 (vLLM: ``x * inf``).
- Ignored arguments, as vLLM ignores them: ``per_token_group_fp8_quant``'s
  ``fp8_min``/``fp8_max`` (the range is output_q's dtype's) and both dummies (the
  scale layout is output_s's strides: column-major when stride(0) < stride(1),
  element (t, g) at ``t + g * stride(1)``, else ``t * G + g``; output_s must have
  those strides, stride(0) 1 or (G, 1), where a size exceeds 1: an expanded or
  sliced output_s is refused, where vLLM writes past its elements);
  ``rms_norm_per_block_quant``'s ``scale_ub`` (vLLM never passes it to its kernel);
  the scale tensor's strides in ``rms_norm_per_block_quant`` and
  ``silu_and_mul_per_block_quant`` (element (t, g) at ``t + g * T`` with
  ``is_scale_transposed``, else ``t * G + g``, of a dense tensor: an expanded or
  sliced one is refused); ``scale_ue8m0`` on int8 output of
  ``silu_and_mul_per_block_quant``. A scalar ``scale``/``scale_ub`` is read at its
  first element.
- ue8m0 (fp8 only): the scale rounded up to a power of two by exact bit arithmetic
  and written as float32 (as vLLM; the caller converts to e8m0). vLLM's
  ``exp2(ceil(log2(s)))`` can give a power of two too small where its ``log2`` of a
  value just above one rounds to an integer.
- int8 norms (``rms_norm_dynamic_per_token_quant``, ``rms_norm_per_block_quant``):
  ``absmax / 127`` and, as vLLM, 1.0 for an all-zero row or group (written by a
  second, elementwise op on the scales; the values are 0 either way); ``scale_ub`` is
  fp8 only (ValueError, vLLM's check). The norm values are float32, not rounded to
  the dtype, as vLLM's, multiplied as ``(x * w) * inv_rms`` where vLLM's take
  ``(x * inv_rms) * w`` (a float32 rounding apart: rarely, a value one fp8 step
  away); with ``residual``, ``input + residual`` is rounded to the
  dtype, stored and normalized.
- ``silu_and_mul_quant``: silu and the product rounded to the input's dtype (vLLM's
  kernel: the same bits as ``silu_and_mul`` then ``static_scaled_fp8_quant``).
  ``silu_and_mul_per_block_quant``: float32 values, not rounded; int8 scales floored at
  FLT_EPSILON (2**-23); its ``scale_ub`` clamps the scale (not the absolute maximum as
  elsewhere): applied as the bound ``scale_ub * 448`` (in float32) on the absolute
  maximum, which can move a clamped scale by one unit in the last place.
- Taken here where vLLM refuses: any input strides with a unit last one (vLLM:
  contiguous, or a row stride), weights in float32 on fp16/bf16, float32 input to the
  silu ops, any group_size dividing the row (vLLM: 32, 64 or 128 for
  ``silu_and_mul_per_block_quant``). ``static_scaled_fp8_quant``'s 1-D scale needs
  its group size to divide its dimension (vLLM reads past the scale otherwise).
- The paged KV cache (read against vllm-xpu-kernels 4543b580 csrc/cache.cpp and
  csrc/quantization/fp8/quant_utils.h): ``reshape_and_cache_flash``,
  ``reshape_and_cache`` and ``concat_and_cache_mla`` take vLLM's schema order and
  write the caches in place (None returned), on ``store_kv_cache`` and
  ``concat_and_cache_mla``. Only the first ``slot_mapping.shape[0]`` tokens are
  stored (vLLM's num_tokens; the rest is padding); a negative slot stores nothing
  (vLLM: ``slot < 0``). An fp8 cache (``kv_cache_dtype`` "fp8" or "fp8_e4m3"; the
  cache torch.uint8, as vLLM allocates it, or float8_e4m3fn) stores
  ``fp8(clamp(x / scale, -448, 448))``: divided by the scale in float32, as the
  flash and MLA kernels' ``CopyWithScaleOp`` do (and vLLM's CUDA kernels), rounded
  to nearest even. vLLM-XPU's split-layout ``reshape_and_cache`` kernel at that
  commit multiplies by ``k_scale`` instead, without the clamp; it is read here as
  the divide every other cache kernel does (an engine whose scales are 1.0 sees no
  difference). ``k_scale``/``v_scale``/``scale``: vLLM's schema takes tensors and
  its kernels read their first element (as here, converted to float32); a Python
  float is taken too. With "auto" the scales are ignored (vLLM passes them
  unread) and the cache must have the source's dtype. A slot at or past
  ``num_blocks * block_size`` raises IndexError on CPU tensors; on an XPU the kernel
  skips it (vLLM's writes out of bounds). Taken where vLLM refuses or misreads: any
  key/value strides with a unit last one (vLLM reads heads at ``head_size`` apart
  within a token), any cache strides with a unit last one (vLLM: contiguous, or
  its interleaved K/V pages). The flash layout's interleaved pages work as two
  views of one buffer. ``fp8_e5m2`` caches are not provided (ValueError);
  ``gather_cache`` (csrc/cache.cpp's gather_cache_kernel) runs the core
  ``gather_cache``, writing ``dst`` in place: a copy, bit for bit (``dst`` of
  ``src_cache``'s dtype, as vLLM requires). ``batch_size``: only the first
  ``batch_size`` sequences (rows of block_table and seq_starts, cu_seq_lens up to
  ``batch_size + 1``) are gathered, as vLLM's grid; more than block_table has raises
  ValueError (vLLM reads past it). ``seq_starts`` is rounded down to a whole block
  (vLLM's ``seq_starts[b] / block_size`` block offset: the gather starts at that
  block's first token), by two torch ops on it; the core op takes a token offset.
  Out-of-range block ids, cu_seq_lens past dst's rows or decreasing, or a sequence
  past block_table's columns raise on CPU tensors and are skipped on an XPU (vLLM
  reads and writes out of bounds). Refused where vLLM takes them: caches of other
  dtypes than float32/float16/bfloat16/float8/uint8 (vLLM copies any 8-, 16- or
  32-bit type), and a ``dst`` whose entry shape differs from the cache's (vLLM reads
  dst as rows of the flattened entry).
  ``gather_and_maybe_dequant_cache(src_cache, dst, block_table, cu_seq_lens,
  token_to_seq, num_tokens, kv_cache_dtype, scale, seq_starts=None)`` fills dst's
  first ``num_tokens`` rows: "auto" a copy (dst of the cache's dtype), "fp8" /
  "fp8_e4m3" ``float(x) * scale[0]`` rounded once to dst's dtype; seq_starts a token
  offset (not rounded, as vLLM's kernel). A row's sequence is found from
  ``cu_seq_lens`` (the rows it spans), not read from ``token_to_seq``, which vLLM
  builds from cu_seq_lens (checked int32 only): a token_to_seq that disagrees with
  cu_seq_lens is not followed. cu_seq_lens past num_tokens raises on CPU tensors
  (vLLM leaves those tokens out); fp8_e5m2 caches are refused.
- ``moe_align_block_size`` (vllm-xpu-kernels 4543b580 csrc/moe/moe_align_sum_kernels.cpp):
  writes sorted_token_ids, experts_ids and num_tokens_post_pad in place. Pad value
  ``topk_ids.numel()`` in every entry of sorted_token_ids not holding a slot (vLLM:
  the same, the whole buffer). Within an expert the slots are in increasing flat
  index order (vLLM's atomics leave it unspecified; compare per-expert sets).
  experts_ids past the padded total hold 0 (vLLM's inactive_expert_id 0 up to
  ceil(sorted_token_ids.numel() / block_size)). maybe_expert_map: vLLM's reading:
  topk_ids are global ids in [0, num_experts), counted under expert_map[id] (local),
  -1 left out; experts_ids hold local ids. An id outside [0, num_experts) raises
  IndexError on CPU tensors (vLLM's large-batch path skips ids >= num_experts, its
  small-batch path reads out of bounds); on an XPU it is left out. topk_ids
  int32/int64 only (vLLM also takes other integer dtypes).
- ``moe_sum`` (same file): output = the float32 sum over topk rounded once; with
  topk_ids a slot with a negative id, or with expert_map an id mapped below 0, is
  left out (vLLM's pad-aware path); expert_map without topk_ids raises ValueError
  (vLLM: RuntimeError). Ids at or past expert_map's size: IndexError on CPU.
- MoE routing (read against vllm-xpu-kernels 4543b580, csrc/moe/topk.cpp and
  grouped_topk.cpp): ``topk_softmax``, ``topk_sigmoid`` and ``grouped_topk`` run
  ``moe_topk``. Ties: the lower expert index first, and for groups the lower group
  index first (as vLLM's kernels break them; torch.topk's order among equal values is
  unspecified). Weights are the unbiased scores of the chosen experts; ``bias`` ranks
  them only. ``renormalize``: weights times ``routed_scaling_factor / sum`` (the sum
  of the chosen unbiased scores, when positive; ``grouped_topk``'s ``sum + 1e-20``
  is the same up to a rounding), so the factor applies whether or not the weights
  are renormalized, after renormalizing; ``topk_softmax`` has no factor (1.0).
  Scores are float32 and not rounded: vLLM's ``topk_sigmoid`` rounds the sigmoid to
  the logits' dtype, and its ``grouped_topk`` computes sigmoid, score + bias and the
  group sums in the scores' dtype, so at fp16/bf16 weights differ by up to half a
  unit in that dtype's last place and a near tie can be resolved the other way.
  ``token_expert_indices`` receives ``k * num_tokens + t`` for token t's k-th
  choice (vLLM's source-row map). ``is_padding`` (bool ``[tokens]``): a padding
  token gets weights 0 and ids -1 (uint32: 2**32 - 1, vLLM's cast), its
  token_expert_indices written as any other's.
  topk_weights (float32), topk_indices and token_expert_indices (int32) must be
  ``[tokens, topk]`` (or a view of it) on gating_output's device, each with its own
  memory per element.
  ``topk_indices`` may be int32, uint32 or int64 as vLLM's (not int32: computed
  into a temporary and copied). ``grouped_topk``: ``scoring_func`` 0 takes the
  scores as given (already softmaxed), 1 applies sigmoid; groups are scored by the
  sum of their two best ``score + bias`` (vLLM's kernel, also its torch-native form
  with a bias), ``bias`` any float dtype. ``bias`` None, which vLLM's schema does
  not take (``Tensor bias``): the plain scores, groups scored by their best, as
  vLLM's torch-native ``grouped_topk`` without ``e_score_correction_bias`` (not the
  two best of a zero bias). An infinite score is ranked as it is
  (vLLM's grouped kernel skips infinite inputs; a NaN ranks below every number
  here); vLLM's fallback when the topk_group-th group scores -inf (ids 0..topk-1,
  weights 1 / topk) does not happen here: the best groups are taken anyway.
  Taken here where vLLM refuses: any number of experts up to 1024, non-power-of-two
  ones without a workspace, n_group up to 32 with any group size.
- ``apply_repetition_penalties_`` (vLLM's ``_custom_ops``; vllm-xpu-kernels 4543b580
  has none): runs ``apply_penalties`` with the two masks. Where ``prompt_mask |
  output_mask``, a logit is divided by the row's penalty if positive, multiplied by
  it otherwise, in float32 and rounded once: bit for bit vLLM's CUDA kernel and its
  torch form (one operation). ``repetition_penalties`` may be float32 as well as
  logits' dtype (vLLM's kernel reads it as logits' dtype), any stride; logits any
  row stride (vLLM: contiguous), masks any row stride.
- Not provided: float8_e5m2 outputs (vLLM's fp8 kernels also write them; TypeError
  here): the core ops quantize to float8_e4m3fn and int8 only.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import math

import torch

from .. import ops
from ..ops._checks import check_tensor
from ..ops.quant import DEFAULT_SCALE_MIN
from ._args import (
    check_dense,
    check_group_size,
    check_output,
    check_own_memory,
    check_strides,
    engine_names,
)
from ._heads import split_heads
from ._namespaces import EngineOp, Registration, define_ops

log = logging.getLogger("sycl_kernels")

__all__ = [
    "apply_repetition_penalties_",
    "concat_and_cache_mla",
    "dynamic_per_token_scaled_fp8_quant",
    "dynamic_scaled_fp8_quant",
    "fatrelu_and_mul",
    "fused_add_rms_norm",
    "fused_add_rms_norm_static_fp8_quant",
    "fused_qk_norm_rope",
    "gather_and_maybe_dequant_cache",
    "gather_cache",
    "gelu_and_mul",
    "gelu_fast",
    "gelu_new",
    "gelu_quick",
    "gelu_tanh_and_mul",
    "grouped_topk",
    "moe_align_block_size",
    "moe_sum",
    "mul_and_silu",
    "per_token_group_fp8_quant",
    "register",
    "reshape_and_cache",
    "reshape_and_cache_flash",
    "rms_norm",
    "rms_norm_dynamic_per_token_quant",
    "rms_norm_per_block_quant",
    "rms_norm_static_fp8_quant",
    "rotary_embedding",
    "silu_and_mul",
    "silu_and_mul_per_block_quant",
    "silu_and_mul_quant",
    "static_scaled_fp8_quant",
    "swigluoai_and_mul",
    "topk_sigmoid",
    "topk_softmax",
]


@engine_names(x="input", eps="epsilon")
def rms_norm(
    out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor | None, epsilon: float
) -> None:
    """out = input * rsqrt(mean(input^2) + epsilon) * weight over the last dim."""
    ops.rmsnorm(input, weight, epsilon, out)


@engine_names(x="input", eps="epsilon")
def fused_add_rms_norm(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, epsilon: float
) -> None:
    """In place: residual += input (rounded); input = rms_norm of the rounded sum."""
    ops.fused_add_rmsnorm(input, residual, weight, epsilon, rounded_sum=True)


@engine_names(x="input")
def silu_and_mul(out: torch.Tensor, input: torch.Tensor) -> None:
    """out = silu(input[..., :d]) * input[..., d:]."""
    ops.silu_and_mul(input, out)


@engine_names(x="input")
def mul_and_silu(out: torch.Tensor, input: torch.Tensor) -> None:
    """out = input[..., :d] * silu(input[..., d:])."""
    ops.silu_and_mul(input, out, gate_first=False)


@engine_names(x="input")
def gelu_and_mul(out: torch.Tensor, input: torch.Tensor) -> None:
    """out = gelu(input[..., :d]) * input[..., d:], gelu's erf form."""
    ops.gelu_and_mul(input, out)


@engine_names(x="input")
def gelu_tanh_and_mul(out: torch.Tensor, input: torch.Tensor) -> None:
    """out = gelu(input[..., :d]) * input[..., d:], gelu's tanh approximation."""
    ops.gelu_tanh_and_mul(input, out)


@engine_names(x="input")
def fatrelu_and_mul(out: torch.Tensor, input: torch.Tensor, threshold: float) -> None:
    """out = (gate if gate > threshold else 0) * up, gate and up the halves of input."""
    ops.fatrelu_and_mul(input, threshold, out)


@engine_names(x="input")
def swigluoai_and_mul(
    out: torch.Tensor, input: torch.Tensor, alpha: float = 1.702, limit: float = 7.0
) -> None:
    """out = (up + 1) * gate * sigmoid(alpha * gate), gate = input[..., 0::2] clamped to
    at most limit, up = input[..., 1::2] clamped to [-limit, limit]."""
    ops.swigluoai_and_mul(input, alpha, limit, out)


@engine_names(x="input")
def gelu_new(out: torch.Tensor, input: torch.Tensor) -> None:
    """out = 0.5 * input * (1 + tanh(sqrt(2 / pi) * (input + 0.044715 * input^3)))."""
    ops.gelu_tanh(input, out)


@engine_names(x="input")
def gelu_fast(out: torch.Tensor, input: torch.Tensor) -> None:
    """out = 0.5 * input * (1 + tanh(0.7978845608 * input * (1 + 0.044715 * input^2))),
    gelu_new's function."""
    ops.gelu_tanh(input, out)


@engine_names(x="input")
def gelu_quick(out: torch.Tensor, input: torch.Tensor) -> None:
    """out = input * sigmoid(1.702 * input)."""
    ops.gelu_quick(input, out)


@engine_names(q="query", k="key")
def rotary_embedding(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
    rope_dim_offset: int = 0,
    inverse: bool = False,
) -> None:
    """Rotates query and key (if not None) in place by the cos/sin rows of positions."""
    op = "vllm.rotary_embedding"
    if rope_dim_offset < 0:
        raise ValueError(f"{op}(): rope_dim_offset is {rope_dim_offset}; expected >= 0")
    token_dims = positions.dim()
    q = split_heads(op, "query", query, token_dims, head_size)
    k = split_heads(op, "key", key, token_dims, head_size)
    if rope_dim_offset:
        q = q[..., rope_dim_offset:]
        k = None if k is None else k[..., rope_dim_offset:]
    if inverse:
        # cos(-a) = cos(a), sin(-a) = -sin(a): a cache of this call's rows, indexed by token.
        cos_sin_cache = cos_sin_cache.index_select(0, positions.flatten())
        cos_sin_cache[:, cos_sin_cache.shape[1] // 2 :].neg_()
        positions = torch.arange(positions.numel(), device=positions.device).view(positions.shape)
    ops.apply_rope(positions, q, k, cos_sin_cache, is_neox)


@engine_names(positions="position_ids", q="qkv's q heads", k="qkv's k heads", head_size="head_dim")
def fused_qk_norm_rope(
    qkv: torch.Tensor,
    num_heads_q: int,
    num_heads_k: int,
    num_heads_v: int,
    head_dim: int,
    eps: float,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
    position_ids: torch.Tensor,
    forced_token_heads_per_warp: int = -1,
) -> None:
    """In place on qkv: RMSNorm of every q head (q_weight) and k head (k_weight), then
    their rotation by the cache rows of position_ids; the v heads stay."""
    op = "vllm.fused_qk_norm_rope"
    sizes = tuple(n * head_dim for n in (num_heads_q, num_heads_k, num_heads_v))
    if not isinstance(qkv, torch.Tensor) or qkv.dim() != 2 or qkv.shape[1] != sum(sizes):
        shape = tuple(qkv.shape) if isinstance(qkv, torch.Tensor) else type(qkv).__name__
        raise ValueError(
            f"{op}(): qkv has shape {shape}; expected [tokens, {sum(sizes)}] "
            "((num_heads_q + num_heads_k + num_heads_v) * head_dim)"
        )
    q, k, _ = qkv.split(sizes, dim=-1)
    ops.qknorm_rope(
        position_ids, q, k, q_weight, k_weight, cos_sin_cache, is_neox, eps, head_size=head_dim
    )


# Quantization (vllm-xpu-kernels 4543b580: csrc/quantization/fp8/fp8_quant.cpp,
# csrc/layernorm_quant.cpp, csrc/quantization/fused_kernels/): float8_e4m3fn or int8
# outputs, float32 scales, everything written in place.

_FP8 = (torch.float8_e4m3fn,)
_FP8_INT8 = (torch.float8_e4m3fn, torch.int8)
_FP8_MAX = 448.0
# vLLM's min_scaling_factor, its fp8 scales' floor: the core ops' default.
_FP8_SCALE_MIN = DEFAULT_SCALE_MIN[torch.float8_e4m3fn]
# numeric_limits<float>::epsilon(), silu_and_mul_per_block_quant's int8 scale floor.
_FLT_EPSILON = 2.0**-23


def _check_qdtype(op: str, name: str, t: torch.Tensor, allowed: tuple[torch.dtype, ...]) -> None:
    if not isinstance(t, torch.Tensor) or t.dtype not in allowed:
        got = t.dtype if isinstance(t, torch.Tensor) else type(t).__name__
        names = " or ".join(str(d) for d in allowed)
        raise TypeError(
            f"{op}(): {name} has dtype {got}; expected {names} (vLLM also takes "
            "torch.float8_e5m2 where it takes fp8, which the core ops do not produce)"
        )


def _first(scale: torch.Tensor) -> torch.Tensor:
    """The element vLLM reads of a scalar scale (or scale_ub): its first."""
    return scale.reshape(-1)[:1]


def _rows(t: torch.Tensor) -> torch.Tensor:
    """t [..., hidden] as [rows, hidden] (a view where the strides allow; t is read)."""
    return t if t.dim() == 2 else t.reshape(-1, t.shape[-1])


def _written_rows(t: torch.Tensor) -> torch.Tensor:
    """t [..., hidden] as a [rows, hidden] view (t is written)."""
    return t if t.dim() == 2 else t.view(-1, t.shape[-1])


def _token_scales(op: str, scale: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A per-token scale buffer ([T] or [T, 1], written at element t) as [*lead, 1], lead
    like's leading dimensions (the core op checks the view's strides as its scales)."""
    check_tensor(op, "input", like)
    check_output(op, "scale", scale, (torch.float32,), like)
    lead = tuple(like.shape[:-1])
    if scale.numel() != math.prod(lead):
        raise ValueError(
            f"{op}(): scale has shape {tuple(scale.shape)}; expected [{math.prod(lead)}] or "
            f"[{math.prod(lead)}, 1] (input's tokens)"
        )
    return scale.view(*lead, 1)


def _block_scales(
    op: str,
    name: str,
    scale: torch.Tensor,
    like: torch.Tensor,
    tokens: int,
    groups: int,
    transposed: bool,
) -> torch.Tensor:
    """vLLM's per-block scale layout, the tensor's own strides ignored: element (t, g) at
    t + g * tokens (transposed) or t * groups + g (of a dense tensor: vLLM's kernel
    writes tokens * groups elements from its first)."""
    check_output(op, name, scale, (torch.float32,), like)
    if scale.numel() != tokens * groups:
        raise ValueError(
            f"{op}(): {name} has shape {tuple(scale.shape)}; expected [{tokens}, {groups}] "
            "(tokens, groups)"
        )
    layout = "t + g * tokens" if transposed else "t * groups + g"
    check_dense(op, name, scale, layout)
    strides = (1, tokens) if transposed else (groups, 1)
    return scale.as_strided((tokens, groups), strides)


def _one_for_zero(scales: torch.Tensor) -> None:
    """vLLM's int8 norm kernels write a scale of 1.0 for an all-zero row or group."""
    scales.masked_fill_(scales == 0, 1.0)


def _fp8_scale_min(eps: float) -> float:
    """max(eps / 448, 1 / (448 * 512)) in float32: vLLM's max(max(absmax, eps) / 448,
    1 / (448 * 512)) is max(absmax / 448, this), division being monotonic."""
    eps_min = (torch.tensor(eps, dtype=torch.float32) / _FP8_MAX).item()
    return max(eps_min, _FP8_SCALE_MIN)


@engine_names(x="input", out="result")
def static_scaled_fp8_quant(
    result: torch.Tensor,
    input: torch.Tensor,
    scale: torch.Tensor,
    group_shape: tuple[int, int] | None = None,
) -> None:
    """result = fp8(input * (1 / scale)): scale float32, one element (per tensor), 1-D
    with group_shape (1, -1) per token or (-1, 1) per channel (or any (m, n) where one
    of the two scale counts is 1), or 2-D [S0, S1] (blocks of tokens / S0 rows by
    hidden / S1 columns; group_shape, if given, must match)."""
    op = "vllm.static_scaled_fp8_quant"
    _check_qdtype(op, "result", result, _FP8)
    if scale.dim() == 0 or scale.numel() == 1:
        ops.quantize(input, scale, dtype=result.dtype, out=result)
        return
    hidden = input.shape[-1]
    tokens = input.numel() // hidden if hidden else 0
    if group_shape is not None:
        group_m, group_n = (
            tokens if group_shape[0] == -1 else group_shape[0],
            hidden if group_shape[1] == -1 else group_shape[1],
        )
    if scale.dim() == 1:
        if group_shape is None:
            raise ValueError(
                f"{op}(): a 1-D scale needs group_shape: (-1, 1) per channel, (1, -1) per token"
            )
        if group_m < 1 or group_n < 1:
            raise ValueError(f"{op}(): group_shape is {group_shape}; expected sizes >= 1 or -1")
        scale_m, scale_n = tokens // group_m, hidden // group_n
        if scale.numel() != scale_m * scale_n:
            raise ValueError(
                f"{op}(): scale has {scale.numel()} elements; expected {scale_m * scale_n} "
                f"for group_shape {group_shape} on input of {tokens} x {hidden}"
            )
        if scale_m == 1 and hidden % group_n == 0:
            scale = scale.unsqueeze(0)  # [1, H / group_n]: every row, groups of columns
        elif scale_n == 1 and scale_m != 1 and tokens % group_m == 0:
            scale = scale.unsqueeze(1)  # [T / group_m, 1]: blocks of rows
        else:
            raise ValueError(
                f"{op}(): group_shape {group_shape} on input of {tokens} x {hidden}: a 1-D "
                "scale needs one of the two scale counts to be 1 and its group size to "
                "divide its dimension"
            )
    elif scale.dim() == 2:
        s0, s1 = scale.shape
        if not s0 or not s1 or tokens % s0 or hidden % s1:
            raise ValueError(
                f"{op}(): scale has shape {tuple(scale.shape)}; its sizes must divide the "
                f"input's {tokens} tokens and {hidden} columns"
            )
        if group_shape is not None and (group_m, group_n) != (tokens // s0, hidden // s1):
            raise ValueError(
                f"{op}(): group_shape {group_shape} does not match the scale's blocks of "
                f"{tokens // s0} x {hidden // s1}"
            )
    else:
        raise ValueError(f"{op}(): scale is {scale.dim()}-D; expected 0-D, 1-D or 2-D")
    ops.quantize(_rows(input), scale, dtype=result.dtype, out=_written_rows(result))


@engine_names(x="input", out="result", scales="scale")
def dynamic_scaled_fp8_quant(
    result: torch.Tensor, input: torch.Tensor, scale: torch.Tensor
) -> None:
    """scale = absmax(input) / 448 (one float32 element); result = fp8(input * (1 / scale))."""
    _check_qdtype("vllm.dynamic_scaled_fp8_quant", "result", result, _FP8)
    ops.dynamic_quantize_per_tensor(
        input, dtype=result.dtype, scale_min=0.0, out=result, scales=scale
    )


@engine_names(x="input", out="result", scales="scale")
def dynamic_per_token_scaled_fp8_quant(
    result: torch.Tensor,
    input: torch.Tensor,
    scale: torch.Tensor,
    scale_ub: torch.Tensor | None = None,
) -> None:
    """Per token: scale[t] = max(min(absmax, scale_ub) / 448, 1 / (448 * 512)); result =
    fp8(input * (1 / scale[t])). scale: float32 [tokens] or [tokens, 1]."""
    op = "vllm.dynamic_per_token_scaled_fp8_quant"
    _check_qdtype(op, "result", result, _FP8)
    ops.dynamic_quantize(
        input,
        dtype=result.dtype,
        scale_ub=None if scale_ub is None else _first(scale_ub),
        out=result,
        scales=_token_scales(op, scale, input),
    )


@engine_names(x="input", out="output_q", scales="output_s")
def per_token_group_fp8_quant(
    input: torch.Tensor,
    output_q: torch.Tensor,
    output_s: torch.Tensor,
    group_size: int,
    eps: float,
    fp8_min: float,
    fp8_max: float,
    scale_ue8m0: bool,
    dummy_is_scale_transposed: bool,
    dummy_is_tma_aligned: bool,
) -> None:
    """Per group of group_size values of a token: scale = max(max(absmax, eps) / 448,
    1 / (448 * 512)) (a power of two at or above with scale_ue8m0, still float32);
    output_q = fp8(input * (1 / scale)). output_s: float32 [tokens, groups], row-major,
    or column-major (stride(0) < stride(1): element (t, g) at t + g * stride(1)).
    fp8_min, fp8_max and the two dummies are ignored, as vLLM does."""
    op = "vllm.per_token_group_fp8_quant"
    _check_qdtype(op, "output_q", output_q, _FP8)
    check_tensor(op, "input", input)
    check_output(op, "output_s", output_s, (torch.float32,), input)
    if input.dim() == 0 or output_s.dim() != 2:
        raise ValueError(
            f"{op}(): input {tuple(input.shape)} and output_s {tuple(output_s.shape)}; "
            "expected [..., hidden] and [tokens, groups]"
        )
    if output_q.shape != input.shape:
        raise ValueError(
            f"{op}(): output_q has shape {tuple(output_q.shape)}; expected input's, "
            f"{tuple(input.shape)}"
        )
    hidden = input.shape[-1]
    groups = hidden // check_group_size(op, group_size, hidden)
    lead = tuple(input.shape[:-1])
    tokens = math.prod(lead)
    if tuple(output_s.shape) != (tokens, groups):
        raise ValueError(
            f"{op}(): output_s has shape {tuple(output_s.shape)}; expected {(tokens, groups)} "
            f"(input's tokens, hidden / group_size)"
        )
    # vLLM's kernel addresses the scales by the layout, not by output_s's strides.
    if output_s.stride(0) < output_s.stride(1):
        check_strides(op, "output_s", output_s, (1, None), "column-major: t + g * stride(1)")
    else:
        check_strides(op, "output_s", output_s, (groups, 1), "row-major: t * groups + g")
    if input.numel() == 0:
        return
    ops.dynamic_quantize(
        input,
        dtype=output_q.dtype,
        group_size=group_size,
        scale_min=_fp8_scale_min(eps),
        ue8m0=bool(scale_ue8m0),
        out=output_q,
        scales=output_s.view(*lead, groups),
    )


@engine_names(x="input", out="result", eps="epsilon")
def rms_norm_static_fp8_quant(
    result: torch.Tensor,
    input: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor,
    epsilon: float,
) -> None:
    """result = fp8(rms_norm(input, weight) * (1 / scale)), the norm in float32."""
    _check_qdtype("vllm.rms_norm_static_fp8_quant", "result", result, _FP8)
    ops.rmsnorm_quantize(input, weight, _first(scale), epsilon, dtype=result.dtype, out=result)


@engine_names(x="input", out="result", eps="epsilon")
def fused_add_rms_norm_static_fp8_quant(
    result: torch.Tensor,
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor,
    epsilon: float,
) -> None:
    """In place: residual = input + residual (rounded); result = fp8(rms_norm of it *
    (1 / scale)); input is only read."""
    _check_qdtype("vllm.fused_add_rms_norm_static_fp8_quant", "result", result, _FP8)
    ops.rmsnorm_quantize(
        input, weight, _first(scale), epsilon, residual=residual, dtype=result.dtype, out=result
    )


@engine_names(x="input", out="result", scales="scale", eps="epsilon")
def rms_norm_dynamic_per_token_quant(
    result: torch.Tensor,
    input: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor,
    epsilon: float,
    scale_ub: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
) -> None:
    """Per token of v = rms_norm(input [+ residual, stored in residual]): fp8 scale[t] =
    max(min(absmax(v), scale_ub) / 448, 1 / (448 * 512)); int8 absmax(v) / 127 (1.0 for
    an all-zero row, no scale_ub); result = quant(v * (1 / scale[t]))."""
    op = "vllm.rms_norm_dynamic_per_token_quant"
    _check_qdtype(op, "result", result, _FP8_INT8)
    int8 = result.dtype == torch.int8
    if int8 and scale_ub is not None:
        raise ValueError(f"{op}(): scale_ub is only supported for fp8 output (as vLLM)")
    scales = _token_scales(op, scale, input)
    ops.rmsnorm_dynamic_quantize(
        input,
        weight,
        epsilon,
        residual=residual,
        dtype=result.dtype,
        scale_ub=None if scale_ub is None else _first(scale_ub),
        scale_min=0.0 if int8 else None,
        out=result,
        scales=scales,
    )
    if int8:
        _one_for_zero(scales)


@engine_names(x="input", out="result", scales="scale", eps="epsilon")
def rms_norm_per_block_quant(
    result: torch.Tensor,
    input: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor,
    epsilon: float,
    scale_ub: torch.Tensor | None,
    residual: torch.Tensor | None,
    group_size: int,
    is_scale_transposed: bool,
    scale_ue8m0: bool = False,
) -> None:
    """rms_norm_dynamic_per_token_quant per group of group_size values of a token; scale
    [tokens, groups] at t * groups + g, or t + g * tokens if is_scale_transposed (its
    strides ignored, as vLLM); scale_ub is ignored (as vLLM); scale_ue8m0 (fp8 only):
    scales rounded up to a power of two."""
    op = "vllm.rms_norm_per_block_quant"
    _check_qdtype(op, "result", result, _FP8_INT8)
    int8 = result.dtype == torch.int8
    if int8 and scale_ue8m0:
        raise ValueError(f"{op}(): scale_ue8m0 is only supported for fp8 output (as vLLM)")
    check_tensor(op, "input", input)
    x = _rows(input)
    tokens, hidden = x.shape
    groups = hidden // check_group_size(op, group_size, hidden)
    scales = _block_scales(op, "scale", scale, x, tokens, groups, bool(is_scale_transposed))
    ops.rmsnorm_dynamic_quantize(
        x,
        weight,
        epsilon,
        residual=None if residual is None else _written_rows(residual),
        dtype=result.dtype,
        group_size=group_size,
        scale_min=0.0 if int8 else None,
        ue8m0=bool(scale_ue8m0),
        out=_written_rows(result),
        scales=scales,
    )
    if int8:
        _one_for_zero(scales)


@engine_names(x="input", out="result")
def silu_and_mul_quant(result: torch.Tensor, input: torch.Tensor, scale: torch.Tensor) -> None:
    """result = fp8((silu(gate) * up) * (1 / scale)), silu and the product rounded to the
    input's dtype (vLLM's kernel), gate and up the halves of input."""
    _check_qdtype("vllm.silu_and_mul_quant", "result", result, _FP8)
    ops.silu_and_mul_quantize(input, _first(scale), dtype=result.dtype, rounded=True, out=result)


@engine_names(x="input")
def silu_and_mul_per_block_quant(
    out: torch.Tensor,
    input: torch.Tensor,
    scales: torch.Tensor,
    group_size: int,
    scale_ub: torch.Tensor | None = None,
    is_scale_transposed: bool = False,
    scale_ue8m0: bool = False,
) -> None:
    """Per group of group_size values of v = silu(gate) * up (float32, not rounded):
    fp8 scale = max(min(max(absmax / 448, 1 / (448 * 512)), scale_ub), 1 / (448 *
    512)) (a power of two at or above with scale_ue8m0); int8 max(absmax / 127,
    2**-23); out = quant(v * (1 / scale)). input [tokens, 2 * hidden], scales
    [tokens, groups] laid out as rms_norm_per_block_quant's."""
    op = "vllm.silu_and_mul_per_block_quant"
    _check_qdtype(op, "out", out, _FP8_INT8)
    int8 = out.dtype == torch.int8
    if int8 and scale_ub is not None:
        raise ValueError(f"{op}(): scale_ub is only supported for fp8 output (as vLLM)")
    if input.dim() != 2 or out.dim() != 2:
        raise ValueError(
            f"{op}(): input {tuple(input.shape)} and out {tuple(out.shape)} must be 2-D "
            "([tokens, 2 * hidden] and [tokens, hidden])"
        )
    tokens, hidden = input.shape[0], input.shape[1] // 2
    groups = hidden // check_group_size(op, group_size, hidden)
    bound = None
    if scale_ub is not None:
        # The kernel clamps the scale to scale_ub; the core op bounds the absolute
        # maximum: scale_ub * 448 (in float32) bounds it alike.
        bound = _first(scale_ub).float() * _FP8_MAX
    ops.silu_and_mul_dynamic_quantize(
        input,
        dtype=out.dtype,
        group_size=group_size,
        scale_ub=bound,
        scale_min=_FLT_EPSILON if int8 else None,
        ue8m0=bool(scale_ue8m0) and not int8,
        rounded=False,
        out=out,
        scales=_block_scales(
            op, "scales", scales, input, tokens, groups, bool(is_scale_transposed)
        ),
    )


# The paged KV cache (vllm-xpu-kernels 4543b580 csrc/cache.cpp, _C_cache_ops).

_KV_FP8 = ("fp8", "fp8_e4m3")


def _kv_cache(
    op: str, cache: torch.Tensor, kv_cache_dtype: str, like: torch.Tensor
) -> torch.Tensor:
    """The cache as the core ops take it: "auto" as it is (the source's dtype), fp8 as
    float8_e4m3fn (a view of vLLM's uint8 cache: the same memory)."""
    if kv_cache_dtype == "auto":
        return cache
    if kv_cache_dtype not in _KV_FP8:
        raise ValueError(
            f"{op}(): kv_cache_dtype is {kv_cache_dtype!r}; expected 'auto', 'fp8' or "
            "'fp8_e4m3' (fp8_e5m2 caches are not provided)"
        )
    if not isinstance(cache, torch.Tensor) or cache.dtype not in (torch.uint8, torch.float8_e4m3fn):
        got = cache.dtype if isinstance(cache, torch.Tensor) else type(cache).__name__
        raise TypeError(
            f"{op}(): an {kv_cache_dtype} cache is torch.uint8 or torch.float8_e4m3fn, got {got}"
        )
    return cache.view(torch.float8_e4m3fn)


def _kv_scale(
    scale: torch.Tensor | float, kv_cache_dtype: str, cache: torch.Tensor
) -> torch.Tensor | None:
    """The scale vLLM reads (the first element of a tensor, or a float) as a float32
    one-element tensor on the cache's device; None for an "auto" cache."""
    if kv_cache_dtype == "auto":
        return None
    if isinstance(scale, torch.Tensor):
        return _first(scale).to(torch.float32)
    return torch.tensor([float(scale)], dtype=torch.float32, device=cache.device)


def _slot_tokens(t: torch.Tensor, slot_mapping: torch.Tensor) -> torch.Tensor:
    """The tokens vLLM stores: the first slot_mapping.shape[0] (the rest is padding)."""
    return t[: slot_mapping.shape[0]] if isinstance(t, torch.Tensor) else t


def _store_kv(
    op: str,
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    kv_cache_dtype: str,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
) -> None:
    """Both layouts' store: store_kv_cache tells them apart by the key cache's rank."""
    ops.store_kv_cache(
        _slot_tokens(key, slot_mapping),
        _slot_tokens(value, slot_mapping),
        _kv_cache(op, key_cache, kv_cache_dtype, key),
        _kv_cache(op, value_cache, kv_cache_dtype, key),
        slot_mapping,
        _kv_scale(k_scale, kv_cache_dtype, key_cache),
        _kv_scale(v_scale, kv_cache_dtype, key_cache),
    )


@engine_names()
def reshape_and_cache_flash(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    kv_cache_dtype: str,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
) -> None:
    """key/value [tokens, heads, head_size] into key_cache/value_cache [num_blocks,
    block_size, heads, head_size] at slot_mapping (module doc: the paged KV cache)."""
    _store_kv(
        "vllm.reshape_and_cache_flash",
        key,
        value,
        key_cache,
        value_cache,
        slot_mapping,
        kv_cache_dtype,
        k_scale,
        v_scale,
    )


@engine_names()
def reshape_and_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    kv_cache_dtype: str,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
) -> None:
    """vLLM's split layout: key_cache [num_blocks, heads, head_size / x, block_size, x],
    value_cache [num_blocks, heads, head_size, block_size] (module doc)."""
    _store_kv(
        "vllm.reshape_and_cache",
        key,
        value,
        key_cache,
        value_cache,
        slot_mapping,
        kv_cache_dtype,
        k_scale,
        v_scale,
    )


@engine_names()
def concat_and_cache_mla(
    kv_c: torch.Tensor,
    k_pe: torch.Tensor,
    kv_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    kv_cache_dtype: str,
    scale: torch.Tensor,
) -> None:
    """kv_c [tokens, kv_lora_rank] and k_pe [tokens, pe_dim] side by side into kv_cache
    [num_blocks, block_size, kv_lora_rank + pe_dim] at slot_mapping (module doc)."""
    op = "vllm.concat_and_cache_mla"
    ops.concat_and_cache_mla(
        _slot_tokens(kv_c, slot_mapping),
        _slot_tokens(k_pe, slot_mapping),
        _kv_cache(op, kv_cache, kv_cache_dtype, kv_c),
        slot_mapping,
        _kv_scale(scale, kv_cache_dtype, kv_cache),
    )


def _first_rows(t: object, rows: int) -> object:
    """t's first `rows` rows (a view); anything else as it is, for the core op to refuse."""
    return t[:rows] if isinstance(t, torch.Tensor) and t.dim() >= 1 else t


@engine_names()
def gather_cache(
    src_cache: torch.Tensor,
    dst: torch.Tensor,
    block_table: torch.Tensor,
    cu_seq_lens: torch.Tensor,
    batch_size: int,
    seq_starts: torch.Tensor | None = None,
) -> None:
    """vLLM's ``gather_cache``: the first batch_size sequences' tokens from src_cache
    [num_blocks, block_size, *entry] into dst [tokens, *entry] through block_table,
    in place; seq_starts rounded down to a whole block (module doc)."""
    op = "vllm.gather_cache"
    if isinstance(batch_size, bool) or not isinstance(batch_size, int):
        raise TypeError(f"{op}(): batch_size must be an int, got {type(batch_size).__name__}")
    for name, t, rows in (
        ("block_table", block_table, batch_size),
        ("cu_seq_lens", cu_seq_lens, batch_size + 1),
        ("seq_starts", seq_starts, batch_size),
    ):
        if isinstance(t, torch.Tensor) and t.dim() >= 1 and not 0 <= rows <= t.shape[0]:
            raise ValueError(
                f"{op}(): batch_size is {batch_size} but {name} has {t.shape[0]} rows; "
                f"expected 0 <= batch_size and at least {rows} rows"
            )
    seq_starts = _first_rows(seq_starts, batch_size)
    if isinstance(seq_starts, torch.Tensor) and isinstance(src_cache, torch.Tensor):
        block_size = src_cache.shape[1] if src_cache.dim() >= 2 else 0
        if block_size > 0:
            seq_starts = seq_starts - seq_starts % block_size
    ops.gather_cache(
        src_cache,
        dst,
        _first_rows(block_table, batch_size),
        _first_rows(cu_seq_lens, batch_size + 1),
        seq_starts,
    )


@engine_names()
def gather_and_maybe_dequant_cache(
    src_cache: torch.Tensor,
    dst: torch.Tensor,
    block_table: torch.Tensor,
    cu_seq_lens: torch.Tensor,
    token_to_seq: torch.Tensor,
    num_tokens: int,
    kv_cache_dtype: str,
    scale: torch.Tensor,
    seq_starts: torch.Tensor | None = None,
) -> None:
    """vLLM's ``gather_and_maybe_dequant_cache``: dst's first num_tokens rows from
    src_cache through block_table, in place; an fp8 cache dequantized (module doc)."""
    op = "vllm.gather_and_maybe_dequant_cache"
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int):
        raise TypeError(f"{op}(): num_tokens must be an int, got {type(num_tokens).__name__}")
    if isinstance(dst, torch.Tensor) and dst.dim() >= 1 and not 0 <= num_tokens <= dst.shape[0]:
        raise ValueError(
            f"{op}(): num_tokens is {num_tokens} but dst has {dst.shape[0]} rows; "
            "expected 0 <= num_tokens <= dst.shape[0]"
        )
    if not isinstance(token_to_seq, torch.Tensor) or token_to_seq.dtype != torch.int32:
        got = token_to_seq.dtype if isinstance(token_to_seq, torch.Tensor) else token_to_seq
        raise TypeError(f"{op}(): token_to_seq must be an int32 tensor, got {got}")
    cache = _kv_cache(op, src_cache, kv_cache_dtype, dst)
    ops.gather_cache(
        cache,
        _first_rows(dst, num_tokens),
        block_table,
        cu_seq_lens,
        seq_starts,
        _kv_scale(scale, kv_cache_dtype, src_cache),
    )


@engine_names(
    expert_map="maybe_expert_map",
    expert_ids="experts_ids",
    num_tokens_post_padded="num_tokens_post_pad",
)
def moe_align_block_size(
    topk_ids: torch.Tensor,
    num_experts: int,
    block_size: int,
    sorted_token_ids: torch.Tensor,
    experts_ids: torch.Tensor,
    num_tokens_post_pad: torch.Tensor,
    maybe_expert_map: torch.Tensor | None = None,
) -> None:
    """vLLM's ``moe_align_block_size``, in place (module doc)."""
    ops.moe_align_block_size(
        topk_ids,
        num_experts,
        block_size,
        maybe_expert_map,
        sorted_token_ids=sorted_token_ids,
        expert_ids=experts_ids,
        num_tokens_post_padded=num_tokens_post_pad,
    )
    experts_ids.clamp_(min=0)  # vLLM's inactive_expert_id past the padded total


@engine_names(x="input", out="output")
def moe_sum(
    input: torch.Tensor,
    output: torch.Tensor,
    topk_ids: torch.Tensor | None = None,
    expert_map: torch.Tensor | None = None,
) -> None:
    """vLLM's ``moe_sum``: output [tokens, hidden] = the sum of input [tokens, topk,
    hidden] over topk, in place (module doc)."""
    ops.moe_sum(input, topk_ids, expert_map, out=output)


# MoE routing (module doc).


# The dtypes vLLM takes for topk_indices (int64 and uint32 through an int32 temporary).
_IDS_DTYPES = (torch.int32, torch.uint32, torch.int64)


def _routing_output(
    op: str,
    name: str,
    t: object,
    dtypes: tuple[torch.dtype, ...],
    like: torch.Tensor,
    tokens: int,
    topk: int,
) -> torch.Tensor:
    """A routing output as the [tokens, topk] view written (vLLM: [tokens, topk])."""
    check_output(op, name, t, dtypes, like, "gating_output")
    if t.dim() == 0 or t.shape[-1] != topk or t.numel() != tokens * topk:
        raise ValueError(
            f"{op}(): {name} has shape {tuple(t.shape)}; expected [{tokens}, {topk}] "
            "(gating_output's tokens, topk_weights' topk)"
        )
    try:
        rows = t.view(tokens, topk)
    except RuntimeError:  # strides that merge no leading dimensions
        raise ValueError(
            f"{op}(): {name} of shape {tuple(t.shape)} and strides {t.stride()} cannot be "
            f"viewed as [{tokens}, {topk}] (call .contiguous())"
        ) from None
    check_own_memory(op, name, rows)
    return rows


def _route(
    op: str,
    topk_weights: torch.Tensor,
    topk_indices: torch.Tensor,
    token_expert_indices: torch.Tensor,
    gating_output: torch.Tensor,
    is_padding: torch.Tensor | None,
    **options: object,
) -> None:
    check_tensor(op, "gating_output", gating_output)
    check_tensor(op, "topk_weights", topk_weights)
    if gating_output.dim() == 0 or topk_weights.dim() == 0:
        raise ValueError(
            f"{op}(): gating_output {tuple(gating_output.shape)} and topk_weights "
            f"{tuple(topk_weights.shape)}; expected [tokens, num_experts] and [tokens, topk]"
        )
    experts = gating_output.shape[-1]
    logits = gating_output.reshape(-1, experts)
    tokens, topk = logits.shape[0], topk_weights.shape[-1]
    if is_padding is not None and (
        not isinstance(is_padding, torch.Tensor)
        or is_padding.dtype != torch.bool
        or is_padding.shape != (tokens,)
    ):
        got = (
            f"dtype {is_padding.dtype} and shape {tuple(is_padding.shape)}"
            if isinstance(is_padding, torch.Tensor)
            else f"type {type(is_padding).__name__}"
        )
        raise ValueError(f"{op}(): is_padding has {got}; expected torch.bool [{tokens}]")
    weights = _routing_output(
        op, "topk_weights", topk_weights, (torch.float32,), logits, tokens, topk
    )
    ids = _routing_output(op, "topk_indices", topk_indices, _IDS_DTYPES, logits, tokens, topk)
    sources = _routing_output(
        op, "token_expert_indices", token_expert_indices, (torch.int32,), logits, tokens, topk
    )
    # int32 ids are written in place; int64 and uint32 ones through an int32 temporary.
    ids32 = ids if ids.dtype == torch.int32 else torch.empty_like(ids, dtype=torch.int32)
    ops.moe_topk(logits, topk, topk_weights=weights, topk_ids=ids32, **options)
    if is_padding is not None:
        weights.masked_fill_(is_padding[:, None], 0.0)
        ids32.masked_fill_(is_padding[:, None], -1)  # uint32: 2**32 - 1, as vLLM's cast
    if ids32 is not ids:
        ids.copy_(ids32)
    rows = torch.arange(tokens, dtype=torch.int32, device=logits.device)
    slots = torch.arange(topk, dtype=torch.int32, device=logits.device)
    sources.copy_(slots[None, :] * tokens + rows[:, None])


@engine_names(topk_ids="topk_indices", correction_bias="bias")
def topk_softmax(
    topk_weights: torch.Tensor,
    topk_indices: torch.Tensor,
    token_expert_indices: torch.Tensor,
    gating_output: torch.Tensor,
    renormalize: bool,
    bias: torch.Tensor | None = None,
    is_padding: torch.Tensor | None = None,
) -> None:
    """vLLM's ``topk_softmax``: each token's top-k experts of softmax(gating_output)
    (+ bias for the ranking), written in place (module doc)."""
    _route(
        "vllm.topk_softmax",
        topk_weights,
        topk_indices,
        token_expert_indices,
        gating_output,
        is_padding,
        scoring="softmax",
        correction_bias=bias,
        renormalize=renormalize,
    )


@engine_names(topk_ids="topk_indices", correction_bias="bias")
def topk_sigmoid(
    topk_weights: torch.Tensor,
    topk_indices: torch.Tensor,
    token_expert_indices: torch.Tensor,
    gating_output: torch.Tensor,
    renormalize: bool,
    bias: torch.Tensor | None,
    routed_scaling_factor: float,
    is_padding: torch.Tensor | None = None,
) -> None:
    """vLLM's ``topk_sigmoid``: each token's top-k experts of sigmoid(gating_output)
    (+ bias for the ranking), times routed_scaling_factor, written in place (module doc)."""
    _route(
        "vllm.topk_sigmoid",
        topk_weights,
        topk_indices,
        token_expert_indices,
        gating_output,
        is_padding,
        scoring="sigmoid",
        correction_bias=bias,
        renormalize=renormalize,
        routed_scaling_factor=float(routed_scaling_factor),
    )


@engine_names(gating_output="scores", correction_bias="bias", num_expert_group="n_group")
def grouped_topk(
    scores: torch.Tensor,
    n_group: int,
    topk_group: int,
    topk: int,
    renormalize: bool,
    routed_scaling_factor: float,
    bias: torch.Tensor | None,
    scoring_func: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's ``grouped_topk`` (DeepSeek-V3's routing): (weights float32, ids int32)
    [tokens, topk]; scoring_func 0: the scores as given, 1: sigmoid. bias None: the
    plain scores, groups ranked by their best (vLLM's torch-native grouped_topk without
    e_score_correction_bias; module doc)."""
    op = "vllm.grouped_topk"
    if scoring_func not in (0, 1):
        raise ValueError(f"{op}(): scoring_func is {scoring_func!r}; expected 0 or 1")
    check_tensor(op, "scores", scores)
    if bias is not None:
        check_tensor(op, "bias", bias)
        if bias.dtype != scores.dtype and bias.dtype != torch.float32:
            bias = bias.float()
    return ops.moe_topk(
        scores,
        topk,
        scoring=("none", "sigmoid")[scoring_func],
        correction_bias=bias,
        renormalize=renormalize,
        num_expert_group=n_group,
        topk_group=topk_group,
        group_scoring="max" if bias is None else "top2_sum",
        routed_scaling_factor=float(routed_scaling_factor),
    )


@engine_names()
def apply_repetition_penalties_(
    logits: torch.Tensor,
    prompt_mask: torch.Tensor,
    output_mask: torch.Tensor,
    repetition_penalties: torch.Tensor,
) -> None:
    """vLLM's ``apply_repetition_penalties_``, in place on logits [num_seqs, vocab]: where
    ``prompt_mask | output_mask`` (bool, logits' shape), logits divided by the row's
    penalty if positive, else multiplied by it (module doc)."""
    ops.apply_penalties(
        logits, prompt_mask, None, output_mask, repetition_penalties=repetition_penalties
    )


# vLLM's op namespaces (module doc: register()). The schemas are vllm-xpu-kernels
# 4543b580's (csrc/torch_bindings.cpp, csrc/moe/torch_bindings.cpp), character for
# character but whitespace, except two of vLLM's own csrc/torch_bindings.cpp: its
# rotary_embedding (vllm-xpu-kernels' lacks rope_dim_offset and inverse, which
# vllm._custom_ops.rotary_embedding passes when either is set) and
# apply_repetition_penalties_ (not in vllm-xpu-kernels). Each op runs the function of
# its name in this module.
_VLLM_SCHEMAS: dict[str, tuple[str, ...]] = {
    "_C": (
        "rms_norm(Tensor! result, Tensor input, Tensor? weight, float epsilon) -> ()",
        "fused_add_rms_norm(Tensor! input, Tensor! residual, Tensor? weight, float epsilon) -> ()",
        "silu_and_mul(Tensor! result, Tensor input) -> ()",
        "mul_and_silu(Tensor! out, Tensor input) -> ()",
        "gelu_and_mul(Tensor! out, Tensor input) -> ()",
        "gelu_tanh_and_mul(Tensor! out, Tensor input) -> ()",
        "fatrelu_and_mul(Tensor! out, Tensor! input, float threshold) -> ()",
        "swigluoai_and_mul(Tensor! out, Tensor input, float alpha=1.702, float limit=7.0) -> ()",
        "gelu_new(Tensor! out, Tensor input) -> ()",
        "gelu_fast(Tensor! out, Tensor input) -> ()",
        "gelu_quick(Tensor! out, Tensor input) -> ()",
        (
            "rotary_embedding(Tensor positions, Tensor! query, Tensor!? key, int head_size, "
            "Tensor cos_sin_cache, bool is_neox, int rope_dim_offset=0, bool inverse=False) -> ()"
        ),
        (
            "fused_qk_norm_rope(Tensor! qkv, int num_heads_q, int num_heads_k, int num_heads_v, "
            "int head_dim, float eps, Tensor q_weight, Tensor k_weight, Tensor cos_sin_cache, "
            "bool is_neox, Tensor position_ids, int forced_token_heads_per_warp=-1) -> ()"
        ),
        (
            "static_scaled_fp8_quant(Tensor! result, Tensor input, Tensor scale, (int, int)? "
            "group_shape=None) -> ()"
        ),
        "dynamic_scaled_fp8_quant(Tensor! result, Tensor input, Tensor! scale) -> ()",
        (
            "dynamic_per_token_scaled_fp8_quant(Tensor! result, Tensor input, Tensor! scale, "
            "Tensor? scale_ub) -> ()"
        ),
        (
            "per_token_group_fp8_quant(Tensor input, Tensor! output_q, Tensor! output_s, int "
            "group_size, float eps, float fp8_min, float fp8_max, bool scale_ue8m0, bool "
            "dummy_is_scale_transposed, bool dummy_is_tma_aligned) -> ()"
        ),
        (
            "rms_norm_static_fp8_quant(Tensor! result, Tensor input, Tensor weight, Tensor scale, "
            "float epsilon) -> ()"
        ),
        (
            "fused_add_rms_norm_static_fp8_quant(Tensor! result, Tensor input, Tensor! residual, "
            "Tensor weight, Tensor scale, float epsilon) -> ()"
        ),
        (
            "rms_norm_dynamic_per_token_quant(Tensor! result, Tensor input, Tensor weight, "
            "Tensor! scale, float epsilon, Tensor? scale_ub, Tensor!? residual) -> ()"
        ),
        (
            "rms_norm_per_block_quant(Tensor! result, Tensor input, Tensor weight, Tensor! scale, "
            "float epsilon, Tensor? scale_ub, Tensor!? residual, int group_size, bool "
            "is_scale_transposed, bool scale_ue8m0=False) -> ()"
        ),
        "silu_and_mul_quant(Tensor! result, Tensor input, Tensor scale) -> ()",
        (
            "silu_and_mul_per_block_quant(Tensor! out, Tensor input, Tensor! scales, int "
            "group_size, Tensor? scale_ub=None, bool is_scale_transposed=False, bool "
            "scale_ue8m0=False) -> ()"
        ),
        (
            "apply_repetition_penalties_(Tensor! logits, Tensor prompt_mask, Tensor output_mask, "
            "Tensor repetition_penalties) -> ()"
        ),
    ),
    "_moe_C": (
        (
            "topk_softmax(Tensor! topk_weights, Tensor! topk_indices, Tensor! "
            "token_expert_indices, Tensor gating_output, bool renormalize, Tensor? bias, Tensor? "
            "is_padding) -> ()"
        ),
        (
            "topk_sigmoid(Tensor! topk_weights, Tensor! topk_indices, Tensor! "
            "token_expert_indices, Tensor gating_output, bool renormalize, Tensor? bias, float "
            "routed_scaling_factor, Tensor? is_padding) -> ()"
        ),
        (
            "grouped_topk(Tensor scores, int n_group, int topk_group, int topk, bool renormalize, "
            "float routed_scaling_factor, Tensor bias, int scoring_func) -> (Tensor, Tensor)"
        ),
        (
            "moe_align_block_size(Tensor topk_ids, int num_experts, int block_size, Tensor! "
            "sorted_token_ids, Tensor! experts_ids, Tensor! num_tokens_post_pad, Tensor? "
            "maybe_expert_map) -> ()"
        ),
        "moe_sum(Tensor input, Tensor! output, Tensor? topk_ids, Tensor? expert_map) -> ()",
    ),
    "_C_cache_ops": (
        (
            "reshape_and_cache(Tensor key, Tensor value, Tensor! key_cache, Tensor! value_cache, "
            "Tensor slot_mapping, str kv_cache_dtype, Tensor k_scale, Tensor v_scale) -> ()"
        ),
        (
            "reshape_and_cache_flash(Tensor key, Tensor value, Tensor! key_cache, Tensor! "
            "value_cache, Tensor slot_mapping, str kv_cache_dtype, Tensor k_scale, Tensor "
            "v_scale) -> ()"
        ),
        (
            "concat_and_cache_mla(Tensor kv_c, Tensor k_pe, Tensor! kv_cache, Tensor "
            "slot_mapping, str kv_cache_dtype, Tensor scale) -> ()"
        ),
        (
            "gather_cache(Tensor src_cache, Tensor! dst, Tensor block_table, Tensor cu_seq_lens, "
            "int batch_size, Tensor? seq_starts) -> ()"
        ),
        (
            "gather_and_maybe_dequant_cache(Tensor src_cache, Tensor! dst, Tensor block_table, "
            "Tensor cu_seq_lens, Tensor token_to_seq, int num_tokens, str kv_cache_dtype, Tensor "
            "scale, Tensor? seq_starts) -> ()"
        ),
    ),
}

# vllm-xpu-kernels' extensions, which define these namespaces (_C holds _C_cache_ops).
_VLLM_XPU_KERNELS = ("vllm_xpu_kernels._C", "vllm_xpu_kernels._moe_C")


def _grouped_topk_fake(
    scores: torch.Tensor,
    n_group: int,
    topk_group: int,
    topk: int,
    renormalize: bool,
    routed_scaling_factor: float,
    bias: torch.Tensor,
    scoring_func: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """grouped_topk's outputs for tracing: float32 weights and int32 ids [tokens, topk]."""
    shape = (scores.shape[0], topk)
    return scores.new_empty(shape, dtype=torch.float32), scores.new_empty(shape, dtype=torch.int32)


def _load_vllm_kernels() -> None:
    """Loads the libraries that define vLLM's ops, where installed, before anything is
    defined here: their ops are then found and kept. Loaded after, their definitions
    would collide with these (torch refuses a second schema of a name) and fail."""
    if importlib.util.find_spec("vllm") is not None:
        try:
            from vllm.platforms import current_platform

            current_platform.import_kernels()  # what vllm._custom_ops loads on this platform
        except (ImportError, OSError) as error:  # a vLLM built for another torch or device
            log.info("sycl_kernels.compat.vllm.register(): vLLM's kernels not loaded: %s", error)
    if importlib.util.find_spec("vllm_xpu_kernels") is None:
        return
    for module in _VLLM_XPU_KERNELS:
        try:
            importlib.import_module(module)
        except (ImportError, OSError) as error:  # built for another torch, or no GPU runtime
            log.info("sycl_kernels.compat.vllm.register(): %s not loaded: %s", module, error)


def _engine_op(namespace: str, schema: str) -> EngineOp:
    """The op of a schema: this module's function of the op's name."""
    name = schema.split("(", 1)[0]
    fake = _grouped_topk_fake if name == "grouped_topk" else None
    return EngineOp(namespace, schema, globals()[name], fake)


# register()'s report, once it has run.
_registration: Registration | None = None


def register() -> Registration:
    """Defines vLLM's ops on this module's functions, under vLLM's names and schemas:
    ``torch.ops._C.rms_norm``, ``torch.ops._moe_C.topk_softmax``,
    ``torch.ops._C_cache_ops.reshape_and_cache_flash`` and the rest (module doc), with
    CPU and XPU kernels and fake ones for torch.compile. An op already defined (by vLLM's
    own kernels or vllm-xpu-kernels, loaded first where installed) is left as it is,
    with a warning. The second call does nothing and returns the first one's report:
    the ops defined, per namespace, and those left alone with where they were
    registered. Also vLLM's ``vllm.general_plugins`` entry point ``sycl_kernels``."""
    global _registration
    if _registration is None:
        _load_vllm_kernels()
        table = [
            _engine_op(ns, schema) for ns, schemas in _VLLM_SCHEMAS.items() for schema in schemas
        ]
        _registration = define_ops("sycl_kernels.compat.vllm.register()", table)
    return _registration
