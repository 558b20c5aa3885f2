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
"""

from __future__ import annotations

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
