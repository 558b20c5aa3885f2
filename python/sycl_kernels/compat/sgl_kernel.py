"""sycl_kernels.compat.sgl_kernel: SGLang's ``sgl_kernel`` calls on the core ops.

An engine's XPU branch imports these in place of ``sgl_kernel`` (and calls
``rotary_embedding`` in place of ``torch.ops.sgl_kernel.rotary_embedding``): the
names, argument order, defaults, return values and in-place contract are
sgl_kernel's. Points where the behaviour could be read two ways, and the reading
taken here:

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
  float32 row-major: ``t * G + g`` (strides otherwise ignored, as sgl). float32
  column-major (stride(-2) < stride(-1)): v1 ``t + g * stride(1)`` (a TMA-aligned
  tensor's padding rows not written); v2 interleaved: scale (t, g) at the [T, G]
  position (f // G, f % G) of f = t + g * T, i.e. element ``f // G + (f % G) *
  stride(-1)``. UE8M0 row-major: uint8 bytes at ``t * G + g``. UE8M0 column-major:
  int32 words of 4 bytes (DeepGEMM's layout), byte g % 4 of word ``(g // 4) *
  stride(1) + t`` (v1) or of the interleaved position (v2); v1 leaves the unused
  bytes of a row's last word alone, v2 zeroes them. output_s's shape must fit
  ([T, G], or [T, >= ceil(G / 4)] words) where sgl checks only its dimensions.
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
- Taken here where sgl refuses: input with any strides but a unit last one (sgl:
  contiguous), float32 input to the per-tensor and per-token ops.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch

from .. import ops
from ._heads import split_heads

__all__ = [
    "FusedSetKVBufferArg",
    "apply_rope_with_cos_sin_cache_inplace",
    "fused_add_rmsnorm",
    "fused_inplace_qknorm",
    "gelu_and_mul",
    "gelu_tanh_and_mul",
    "gemma_fused_add_rmsnorm",
    "gemma_rmsnorm",
    "rmsnorm",
    "rotary_embedding",
    "sgl_per_tensor_quant_fp8",
    "sgl_per_token_group_quant_8bit",
    "sgl_per_token_group_quant_8bit_v2",
    "sgl_per_token_group_quant_fp8",
    "sgl_per_token_group_quant_int8",
    "sgl_per_token_quant_fp8",
    "silu_and_mul",
]


def rmsnorm(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    """input * rsqrt(mean(input^2) + eps) * weight over the last dim; returns out."""
    return ops.rmsnorm(input, weight, eps, out)


def fused_add_rmsnorm(
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    enable_pdl: bool | None = None,
) -> None:
    """In place: residual += input; input = rmsnorm of the float32 sum."""
    ops.fused_add_rmsnorm(input, residual, weight, eps, rounded_sum=False)


def gemma_rmsnorm(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
    enable_pdl: bool | None = None,
) -> torch.Tensor:
    """input * rsqrt(mean(input^2) + eps) * (1 + weight); returns out."""
    return ops.gemma_rmsnorm(input, weight, eps, out)


def gemma_fused_add_rmsnorm(
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    enable_pdl: bool | None = None,
) -> None:
    """fused_add_rmsnorm scaling by (1 + weight)."""
    ops.gemma_fused_add_rmsnorm(input, residual, weight, eps, rounded_sum=False)


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


def silu_and_mul(input: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """silu(input[..., :d]) * input[..., d:]; returns out."""
    return ops.silu_and_mul(input, out)


def gelu_and_mul(input: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """gelu(input[..., :d]) * input[..., d:], gelu's erf form; returns out."""
    return ops.gelu_and_mul(input, out)


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


def _row_major_bytes(op: str, output_s: torch.Tensor, shape: tuple) -> torch.Tensor:
    """output_s (1-byte elements) as a row-major uint8 tensor of shape, its strides
    ignored as sgl's kernels do."""
    if output_s.element_size() != 1:
        raise ValueError(
            f"{op}(): row-major UE8M0 scales are bytes; output_s has dtype {output_s.dtype} "
            "(expected torch.uint8)"
        )
    _check_scale_shape(op, output_s, shape, "tokens, groups")
    flat = output_s.as_strided((1,), (1,), 0).view(torch.uint8)
    strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    return flat.as_strided(shape, strides, output_s.storage_offset())


def _write_packed(
    op: str, output_s: torch.Tensor, scale_bytes: torch.Tensor, zero_tail: bool
) -> None:
    """Stores UE8M0 bytes [experts, tokens, groups] in DeepGEMM's packed layout: 4 a
    32-bit word, (t, g) in word (g // 4) * output_s.stride(-1) + t (+ e * stride(0)),
    byte g % 4 (by address). zero_tail: the unused bytes of each row's last word are
    zeroed (v2), else left alone (v1)."""
    experts, tokens, groups = scale_bytes.shape
    words = -(-groups // 4)
    if output_s.element_size() != 4:
        raise ValueError(
            f"{op}(): column-major UE8M0 scales are packed 4 a word; output_s has dtype "
            f"{output_s.dtype} (expected torch.int32)"
        )
    if output_s.shape[-2] != tokens or output_s.shape[-1] < words:
        raise ValueError(
            f"{op}(): output_s has shape {tuple(output_s.shape)}; expected [..., {tokens}, "
            f">= {words}] (tokens, words of 4 groups)"
        )
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
    if output_s.dim() != 2:
        raise ValueError(f"{op}(): output_s is {output_s.dim()}-D; expected 2-D")
    hidden = input.shape[-1]
    if group_size < 1 or hidden % group_size:
        raise ValueError(f"{op}(): group_size {group_size} does not divide hidden {hidden}")
    if input.numel() == 0:
        return
    x, q = _rows(input), output_q.view(-1, hidden)
    tokens, groups = x.shape[0], hidden // group_size
    column = output_s.stride(0) < output_s.stride(1)
    scale_min = _scale_min(eps, qmax, scale_ue8m0)
    if not scale_ue8m0:
        _check_scale_shape(op, output_s, (tokens, groups), "tokens, groups")
        strides = (1, output_s.stride(1)) if column else (groups, 1)
        scales = output_s.as_strided((tokens, groups), strides)
        _quantize_groups(x, q, group_size, scale_min, False, False, scales)
        return
    scale_bytes = _ue8m0_bytes(_quantize_groups(x, q, group_size, scale_min, True, False, None))
    if column:
        _write_packed(op, output_s, scale_bytes.unsqueeze(0), zero_tail=False)
    else:
        _row_major_bytes(op, output_s, (tokens, groups)).copy_(scale_bytes)


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
    if input.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"{op}(): input has dtype {input.dtype}; expected float16 or bfloat16")
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
        x, q = _rows(input), output_q.view(-1, hidden)
    if hidden % group_size:
        raise ValueError(f"{op}(): group_size {group_size} does not divide hidden {hidden}")
    experts = x.shape[0] if masked else 1
    tokens, groups = q.shape[-2], hidden // group_size
    scale_min = _scale_min(eps, qmax, scale_ue8m0)
    column = output_s.stride(-2) < output_s.stride(-1)
    lead = (experts, tokens) if masked else (tokens,)
    if not column and not scale_ue8m0:
        _check_scale_shape(op, output_s, (*lead, groups), "tokens, groups")
        strides = (tokens * groups, groups, 1)[-len(lead) - 1 :]
        scales = output_s.as_strided((*lead, groups), strides)
        _quantize_groups(x, q, group_size, scale_min, False, fuse_silu_and_mul, scales)
        return
    scales = _quantize_groups(x, q, group_size, scale_min, scale_ue8m0, fuse_silu_and_mul, None)
    scales = scales.view(experts, tokens, groups)
    if not column:
        _row_major_bytes(op, output_s, (*lead, groups)).copy_(
            _ue8m0_bytes(scales).view(*lead, groups)
        )
        return
    # Interleaved: scale (t, g) at the position (f // groups, f % groups), f = t + g * tokens.
    interleaved = scales.transpose(1, 2).reshape(experts, tokens, groups)
    if scale_ue8m0:
        _write_packed(op, output_s, _ue8m0_bytes(interleaved), zero_tail=True)
        return
    _check_scale_shape(op, output_s, (*lead, groups), "tokens, groups")
    expert_stride = output_s.stride(0) if masked else 0
    view = output_s.as_strided((experts, tokens, groups), (expert_stride, 1, output_s.stride(-1)))
    view.copy_(interleaved)


# For legacy usage (sgl_kernel's aliases).
sgl_per_token_group_quant_fp8 = sgl_per_token_group_quant_8bit
sgl_per_token_group_quant_int8 = sgl_per_token_group_quant_8bit


def sgl_per_tensor_quant_fp8(
    input: torch.Tensor, output_q: torch.Tensor, output_s: torch.Tensor, is_static: bool
) -> None:
    """output_q = fp8(input * (1 / scale)): is_static, scale = output_s (one float32
    element), else scale = absmax(input) / 448 written into output_s."""
    op = "sgl_kernel.sgl_per_tensor_quant_fp8"
    if output_q.dtype != torch.float8_e4m3fn:
        raise TypeError(
            f"{op}(): output_q has dtype {output_q.dtype}; expected torch.float8_e4m3fn"
        )
    if is_static:
        ops.quantize(input, output_s.reshape(-1)[:1], dtype=output_q.dtype, out=output_q)
    else:
        ops.dynamic_quantize_per_tensor(
            input, dtype=output_q.dtype, scale_min=0.0, out=output_q, scales=output_s
        )


def sgl_per_token_quant_fp8(
    input: torch.Tensor, output_q: torch.Tensor, output_s: torch.Tensor
) -> None:
    """Per token: output_s[t] = absmax / 448 (0 for an all-zero row, quantized to 0);
    output_q = fp8(input * (1 / output_s[t])). output_s: float32 [tokens] or [tokens, 1]."""
    op = "sgl_kernel.sgl_per_token_quant_fp8"
    if output_q.dtype != torch.float8_e4m3fn:
        raise TypeError(
            f"{op}(): output_q has dtype {output_q.dtype}; expected torch.float8_e4m3fn"
        )
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
