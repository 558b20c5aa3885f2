"""sycl_kernels.compat.vllm: vLLM's custom-op calls on the core ops.

An engine's XPU branch calls these in place of ``vllm._custom_ops.<name>`` or
``torch.ops._C.<name>`` (which ``vllm_xpu_kernels`` registers): the names, argument
order, in-place contract (every function writes its ``out``/``input``/``query``/``key``
and returns None) and dtype rules are vLLM's. Points where the behaviour could be
read two ways, and the reading taken here:

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
- Not provided, since the core ops do not compute them: ``gelu_new``,
  ``gelu_fast``, ``gelu_quick``, ``fatrelu_and_mul``, ``swigluoai_and_mul`` and the
  quantizing norms.
"""

from __future__ import annotations

import torch

from .. import ops
from ._heads import split_heads

__all__ = [
    "fused_add_rms_norm",
    "fused_qk_norm_rope",
    "gelu_and_mul",
    "gelu_tanh_and_mul",
    "mul_and_silu",
    "rms_norm",
    "rotary_embedding",
    "silu_and_mul",
]


def rms_norm(
    out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor | None, epsilon: float
) -> None:
    """out = input * rsqrt(mean(input^2) + epsilon) * weight over the last dim."""
    ops.rmsnorm(input, weight, epsilon, out)


def fused_add_rms_norm(
    input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, epsilon: float
) -> None:
    """In place: residual += input (rounded); input = rms_norm of the rounded sum."""
    ops.fused_add_rmsnorm(input, residual, weight, epsilon, rounded_sum=True)


def silu_and_mul(out: torch.Tensor, input: torch.Tensor) -> None:
    """out = silu(input[..., :d]) * input[..., d:]."""
    ops.silu_and_mul(input, out)


def mul_and_silu(out: torch.Tensor, input: torch.Tensor) -> None:
    """out = input[..., :d] * silu(input[..., d:])."""
    ops.silu_and_mul(input, out, gate_first=False)


def gelu_and_mul(out: torch.Tensor, input: torch.Tensor) -> None:
    """out = gelu(input[..., :d]) * input[..., d:], gelu's erf form."""
    ops.gelu_and_mul(input, out)


def gelu_tanh_and_mul(out: torch.Tensor, input: torch.Tensor) -> None:
    """out = gelu(input[..., :d]) * input[..., d:], gelu's tanh approximation."""
    ops.gelu_tanh_and_mul(input, out)


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
