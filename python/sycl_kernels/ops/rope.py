"""sycl_kernels.ops.rope: rotary position embedding in place, optionally storing k and v."""

from __future__ import annotations

import torch

from .. import _runtime
from .._dtypes import DType
from ..jit.rope import rope_spec
from ._checks import (
    check_bool,
    check_float_dtype,
    check_heads,
    check_int,
    check_same,
    check_shape,
    check_tensor,
    check_unit_last_stride,
)
from ._launch import launch_groups
from ._op import define_op

_OP = "apply_rope"
_POSITION_DTYPES = {torch.int32: "i32", torch.int64: "i64"}


def _check(
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
    rotary_dim: int | None = None,
    v: torch.Tensor | None = None,
    k_cache: torch.Tensor | None = None,
    v_cache: torch.Tensor | None = None,
    out_loc: torch.Tensor | None = None,
) -> tuple[DType, int] | None:
    op = _OP
    for name, t in (("positions", positions), ("q", q), ("k", k), ("cos_sin_cache", cos_sin_cache)):
        check_tensor(op, name, t)
    dtype = check_float_dtype(op, "q", q)
    check_same(op, "k", k, "q", q)
    check_heads(op, "q", q, written=True)
    check_heads(op, "k", k, written=True)
    tokens, _, head_dim = q.shape
    check_shape(op, "k", k, (tokens, k.shape[1], head_dim), "q's tokens and head_dim")
    if positions.dtype not in _POSITION_DTYPES:
        raise TypeError(
            f"{op}(): positions has dtype {positions.dtype}; expected torch.int32 or torch.int64"
        )
    check_shape(op, "positions", positions, (tokens,), "q.shape[0]")
    if positions.device != q.device:
        raise ValueError(f"{op}(): positions is on {positions.device} but q is on {q.device}")
    if cos_sin_cache.dtype != torch.float32:
        raise TypeError(
            f"{op}(): cos_sin_cache has dtype {cos_sin_cache.dtype}; expected torch.float32"
        )
    if cos_sin_cache.device != q.device:
        raise ValueError(
            f"{op}(): cos_sin_cache is on {cos_sin_cache.device} but q is on {q.device}"
        )
    if cos_sin_cache.dim() != 2 or not cos_sin_cache.is_contiguous():
        raise ValueError(
            f"{op}(): cos_sin_cache must be a contiguous [max_position, rotary_dim] tensor, "
            f"got shape {tuple(cos_sin_cache.shape)}, strides {cos_sin_cache.stride()}"
        )
    check_bool(op, "is_neox", is_neox)
    width = cos_sin_cache.shape[1]
    if rotary_dim is not None:
        check_int(op, "rotary_dim", rotary_dim, minimum=1)
    if rotary_dim is not None and rotary_dim != width:
        raise ValueError(
            f"{op}(): rotary_dim is {rotary_dim} but cos_sin_cache has {width} columns"
        )
    if width % 2 or not 0 < width <= head_dim:
        raise ValueError(f"{op}(): rotary_dim {width} must be even and in (0, head_dim={head_dim}]")
    if positions.stride(0) != 1 and tokens > 1:
        raise ValueError(f"{op}(): positions has stride {positions.stride(0)}; expected 1")
    kv_args = (v, k_cache, v_cache, out_loc)
    store_kv = any(a is not None for a in kv_args)
    if store_kv:
        if any(a is None for a in kv_args):
            raise ValueError(f"{op}(): v, k_cache, v_cache and out_loc go together; some are None")
        _check_kv(op, q, k, v, k_cache, v_cache, out_loc)
    return None if tokens == 0 else (dtype, width)


def _check_kv(op, q, k, v, k_cache, v_cache, out_loc) -> None:
    for name, t in (("v", v), ("k_cache", k_cache), ("v_cache", v_cache), ("out_loc", out_loc)):
        check_tensor(op, name, t)
    tokens, num_k_heads, head_dim = k.shape
    check_same(op, "v", v, "q", q)
    check_heads(op, "v", v, written=False)
    check_shape(op, "v", v, tuple(k.shape), "k.shape")
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        check_same(op, name, cache, "q", q)
        if (
            cache.dim() != 3
            or cache.shape[1:] != (num_k_heads, head_dim)
            or not cache.is_contiguous()
        ):
            raise ValueError(
                f"{op}(): {name} has shape {tuple(cache.shape)}, strides {cache.stride()}; "
                f"expected a contiguous [slots, {num_k_heads}, {head_dim}] tensor"
            )
    check_shape(op, "v_cache", v_cache, tuple(k_cache.shape), "k_cache.shape")
    if out_loc.dtype != torch.int64:
        raise TypeError(f"{op}(): out_loc has dtype {out_loc.dtype}; expected torch.int64")
    if out_loc.device != q.device:
        raise ValueError(f"{op}(): out_loc is on {out_loc.device} but q is on {q.device}")
    check_shape(op, "out_loc", out_loc, (tokens,), "q.shape[0]")
    check_unit_last_stride(op, "out_loc", out_loc)


def _check_range(
    name: str, index: torch.Tensor, size: int, what: str, allow_negative: bool = False
) -> None:
    """On CPU tensors only: on an XPU the check would wait for the device."""
    if index.numel() == 0:
        return
    low, high = int(index.min()), int(index.max())
    if high >= size or (low < 0 and not allow_negative):
        bad = high if high >= size else low
        allowed = f"[{'-inf' if allow_negative else 0}, {size})"
        raise IndexError(f"{_OP}(): {name} holds {bad}; expected values in {allowed} ({what})")


def _launch(
    plan, positions, q, k, cos_sin_cache, is_neox, rotary_dim, v, k_cache, v_cache, out_loc
) -> None:
    if plan is None:
        return
    dtype, width = plan
    if positions.is_cpu:
        _check_range("positions", positions, cos_sin_cache.shape[0], "cos_sin_cache.shape[0]")
        if out_loc is not None:
            _check_range("out_loc", out_loc, k_cache.shape[0], "k_cache.shape[0]", True)
    tokens, num_q_heads, head_dim = q.shape
    positions_type = _POSITION_DTYPES[positions.dtype]
    spec = rope_spec(dtype, head_dim, width, is_neox, positions_type, out_loc is not None)
    args: list[object] = [positions.data_ptr(), q.data_ptr(), q.stride(0), num_q_heads]
    args += [k.data_ptr(), k.stride(0), k.shape[1], cos_sin_cache.data_ptr()]
    if out_loc is not None:
        args += [v.data_ptr(), v.stride(0), k_cache.data_ptr(), v_cache.data_ptr()]
        args.append(out_loc.data_ptr())
    launch_groups(spec, _runtime.queue_of(q), tokens * (num_q_heads + k.shape[1]), *args)


_apply_rope = define_op(_OP, _check, _launch, mutates=("q", "k", "k_cache", "v_cache"))


def apply_rope(
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
    rotary_dim: int | None = None,
    *,
    v: torch.Tensor | None = None,
    k_cache: torch.Tensor | None = None,
    v_cache: torch.Tensor | None = None,
    out_loc: torch.Tensor | None = None,
) -> None:
    """Rotates the first rotary_dim elements of every head of q and k, in place.

    positions: int32 or int64 [tokens]. q: [tokens, num_q_heads, head_dim], k:
    [tokens, num_k_heads, head_dim], float32/float16/bfloat16, any token stride,
    heads packed. cos_sin_cache: float32 [max_position, rotary_dim], cos then sin.
    is_neox: NeoX style (rotate halves) or GPT-J style (interleaved pairs).
    rotary_dim: defaults to cos_sin_cache.shape[1] and must equal it; the rest of
    each head is left as it is.

    With v [tokens, num_k_heads, head_dim], k_cache and v_cache [slots,
    num_k_heads, head_dim] (contiguous) and out_loc int64 [tokens], the rotated k
    and v are also written to slot out_loc[t] of the caches (a negative slot
    stores nothing). On CPU tensors positions and out_loc are range-checked; on an
    XPU they are not (the check would wait for the device). Not differentiable (in
    place): tensors that require grad raise RuntimeError with grad mode on.
    """
    _apply_rope(positions, q, k, cos_sin_cache, is_neox, rotary_dim, v, k_cache, v_cache, out_loc)
