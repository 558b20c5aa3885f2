"""sycl_kernels.ops.rope: rotary position embedding in place, optionally storing k and v;
also after a per-head RMSNorm of q and k, fused (qknorm_rope)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from .. import _runtime
from .._dtypes import DType
from ..specs.rope import heads_per_group, qknorm_rope_spec, rope_spec
from ..specs.spec import KernelSpec
from ._checks import (
    check_bool,
    check_float32_or_dtype_of,
    check_float_dtype,
    check_index_range,
    check_int,
    check_number,
    check_same,
    check_same_device,
    check_shape,
    check_tensor,
    check_unit_last_stride,
    row_layout,
)
from ._launch import Address, KernelBinding, Launch, bind_kernel, skip
from ._op import op
from ._schema import Args
from .norm import check_qk_weights, normalized

_POSITION_DTYPES = {torch.int32: "i32", torch.int64: "i64"}
_LAYOUTS = ("NHD", "HND")


# A tensor's heads as [batch, seq, heads, head_dim]: that shape and its strides, as a
# view would have them (computed, not viewed: each view costs about 1 us).
class _Heads(NamedTuple):
    """A tensor's heads as [batch, seq, heads, head_dim]: that shape and its strides."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def head_dim(self) -> int:
        return self.shape[3]


class _Plan(NamedTuple):
    dtype: DType
    cache_dtype: DType
    width: int
    positions_strides: tuple[int, ...]  # of positions as [batch, seq], broadcast ones 0
    q: _Heads
    k: _Heads | None
    v: _Heads | None


def _heads(op: str, name: str, t: torch.Tensor, head_size: int | None, layout: str) -> _Heads:
    """t's heads as [batch, seq, heads, head_dim], from any accepted layout."""
    shape, strides = t.shape, t.stride()
    check_unit_last_stride(op, name, shape, strides)
    if len(shape) == 2:
        if head_size is None:
            raise ValueError(f"{op}(): {name} is 2-D [tokens, heads * head_size]; pass head_size=")
        if layout != "NHD" or shape[1] % head_size:
            raise ValueError(
                f"{op}(): {name} has shape {tuple(shape)}; expected [tokens, heads * "
                f"{head_size}] (layout NHD)"
            )
        heads = (1, shape[0], shape[1] // head_size, head_size)
        return _Heads(heads, (0, strides[0], head_size * strides[1], strides[1]))
    if len(shape) not in (3, 4):
        raise ValueError(
            f"{op}(): {name} has shape {tuple(shape)}; expected [tokens, heads * head_size], "
            "[tokens, heads, head_size] or [batch, seq, heads, head_size] (or their HND forms)"
        )
    if head_size is not None and shape[-1] != head_size:
        raise ValueError(f"{op}(): {name} has head size {shape[-1]} but head_size is {head_size}")
    if len(shape) == 3:  # one batch; its stride is never used
        shape, strides = (1, *shape), (0, *strides)
    if layout == "HND":
        shape = (shape[0], shape[2], shape[1], shape[3])
        strides = (strides[0], strides[2], strides[1], strides[3])
    return _Heads(tuple(shape), strides)


def _check_rotation(
    op: str,
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor | None,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
    rotary_dim: int | None,
    head_size: int | None,
    layout: str,
    v: torch.Tensor | None,
    k_cache: torch.Tensor | None,
    v_cache: torch.Tensor | None,
    out_loc: torch.Tensor | None,
) -> _Plan | None:
    """apply_rope's checks, for `op` (qknorm_rope makes them too)."""
    for name, t in (("positions", positions), ("q", q), ("cos_sin_cache", cos_sin_cache)):
        check_tensor(op, name, t)
    dtype = check_float_dtype(op, "q", q)
    if k is not None:
        check_tensor(op, "k", k)
        check_same(op, "k", k, "q", q)
    if head_size is not None:
        check_int(op, "head_size", head_size, minimum=1)
    if not isinstance(layout, str):
        raise TypeError(f"{op}(): layout must be a str, got {type(layout).__name__}")
    if layout not in _LAYOUTS:
        raise ValueError(f"{op}(): layout is {layout!r}; expected 'NHD' or 'HND'")
    q4 = _heads(op, "q", q, head_size, layout)
    batch, seq, _, head_dim = q4.shape
    token_shape = (seq,) if q.dim() <= 3 else (batch, seq)
    k4 = None
    if k is not None:
        k4 = _heads(op, "k", k, head_size, layout)
        if k.dim() != q.dim() or k4.shape[:2] != q4.shape[:2] or k4.head_dim != head_dim:
            raise ValueError(
                f"{op}(): k has shape {tuple(k.shape)}; expected q's tokens and head size "
                f"(q has shape {tuple(q.shape)}, layout {layout})"
            )
    if positions.dtype not in _POSITION_DTYPES:
        raise TypeError(
            f"{op}(): positions has dtype {positions.dtype}; expected torch.int32 or torch.int64"
        )
    check_same_device(op, "positions", positions, "q", q)
    if positions.shape == token_shape:  # no broadcast: [batch, seq] without a view
        positions_strides = positions.stride()
        if len(positions_strides) == 1:  # one batch; its stride is never used
            positions_strides = (0, *positions_strides)
    else:
        try:
            positions_strides = positions.expand(token_shape).view(batch, seq).stride()
        except RuntimeError:
            raise ValueError(
                f"{op}(): positions has shape {tuple(positions.shape)}; expected the token "
                f"dimensions {token_shape} of q, or a shape that broadcasts to them"
            ) from None
    cache_dtype = check_float32_or_dtype_of(op, "cos_sin_cache", cos_sin_cache, "q", q)
    check_same_device(op, "cos_sin_cache", cos_sin_cache, "q", q)
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
    kv_args = (v, k_cache, v_cache, out_loc)
    v4 = None
    if any(a is not None for a in kv_args):
        if any(a is None for a in kv_args) or k is None:
            raise ValueError(
                f"{op}(): v, k_cache, v_cache and out_loc go together, with k; some are None"
            )
        v4 = _check_kv(op, q, k, k4, v, k_cache, v_cache, out_loc, token_shape, layout)
    if q.numel() == 0:
        return None
    # Overlapping heads would be rotated twice at once (an expanded q, say).
    row_layout(op, head_dim, q4.shape, (("q", q4.strides, True),))
    if k4 is not None and k.numel():
        row_layout(op, head_dim, k4.shape, (("k", k4.strides, True),))
    return _Plan(dtype, cache_dtype, width, positions_strides, q4, k4, v4)


def _check_kv(op, q, k, k4, v, k_cache, v_cache, out_loc, token_shape, layout) -> _Heads:
    for name, t in (("v", v), ("k_cache", k_cache), ("v_cache", v_cache), ("out_loc", out_loc)):
        check_tensor(op, name, t)
    check_same(op, "v", v, "q", q)
    check_shape(op, "v", v.shape, k.shape, "k.shape")
    v4 = _heads(op, "v", v, k4.head_dim, layout)
    _, _, num_k_heads, head_dim = k4.shape
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
    check_shape(op, "v_cache", v_cache.shape, k_cache.shape, "k_cache.shape")
    if out_loc.dtype != torch.int64:
        raise TypeError(f"{op}(): out_loc has dtype {out_loc.dtype}; expected torch.int64")
    check_same_device(op, "out_loc", out_loc, "q", q)
    check_shape(op, "out_loc", out_loc.shape, token_shape, "q's token dimensions")
    if not out_loc.is_contiguous():
        raise ValueError(f"{op}(): out_loc has strides {out_loc.stride()}; expected contiguous")
    return v4


def _check_indices(a: Args) -> tuple:
    """The range checks of CPU positions and out_loc, as a launch's prepare
    (ops/_launch.py): they read data, so they run at each call."""
    op, rows = a.op_name, a.cos_sin_cache.shape[0]
    check_index_range(op, "positions", a.positions, rows, "cos_sin_cache.shape[0]")
    if a.k_cache is not None:
        slots = a.k_cache.shape[0]
        check_index_range(op, "out_loc", a.out_loc, slots, "k_cache.shape[0]", low=None)
    return a


def _bind_heads(
    spec: KernelSpec, plan: _Plan, a: Args, tuned_for: str, **values: object
) -> KernelBinding:
    """spec's kernel bound to its work-groups over plan's heads (as rope.hpp numbers
    them, specs.rope.heads_per_group to a group), with the arguments rope.hpp's kernels
    share (qknorm_rope's begin with them) and `values`."""
    batch, seq, num_q_heads, head_dim = plan.q.shape
    num_k_heads = 0 if plan.k is None else plan.k.shape[2]
    total = batch * seq * (num_q_heads + num_k_heads)
    per_group = heads_per_group(head_dim, plan.width, tuned_for)
    # The [batch, seq, heads, head_dim] forms only renumber their tensors' dimensions:
    # the tensors' own addresses are theirs. Without k, no work-group reads it; q
    # stands in for a valid address.
    k_heads = plan.q if a.k is None else plan.k
    if plan.v is not None:
        values |= _head_strides("v", plan.v.strides)
    prepare = None
    if a.positions.is_cpu:
        prepare = _check_indices
    return bind_kernel(
        spec,
        a.q,
        -(-total // per_group),
        prepare=prepare,
        positions_batch_stride=plan.positions_strides[0],
        positions_seq_stride=plan.positions_strides[1],
        seq_len=seq,
        **_head_strides("q", plan.q.strides),
        num_q_heads=num_q_heads,
        k=Address("q" if a.k is None else "k"),
        **_head_strides("k", k_heads.strides),
        num_k_heads=num_k_heads,
        total_heads=total,
        **values,
    )


def _head_strides(tensor: str, strides: tuple[int, ...]) -> dict[str, int]:
    """A tensor's [batch, seq, heads] strides by parameter name (specs/rope.py)."""
    return {
        f"{tensor}_{dim}_stride": stride
        for dim, stride in zip(("batch", "seq", "head"), strides, strict=False)
    }


def _heads_view(
    t: torch.Tensor, head_size: int | None, layout: str
) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    """t as [batch, seq, heads, head_dim] by differentiable views (_heads' layouts),
    and the function taking a tensor of that shape back to t's."""
    if t.dim() == 2:
        shape = t.shape
        return t.unflatten(-1, (-1, head_size)).unsqueeze(0), lambda r: r.reshape(shape)
    if t.dim() == 3:
        if layout == "HND":
            return t.transpose(0, 1).unsqueeze(0), lambda r: r.squeeze(0).transpose(0, 1)
        return t.unsqueeze(0), lambda r: r.squeeze(0)
    if layout == "HND":
        return t.transpose(1, 2), lambda r: r.transpose(1, 2)
    return t, lambda r: r


def _rotated(
    positions: torch.Tensor,
    heads: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> torch.Tensor:
    """heads [batch, seq, heads, head_dim] (float32) with the first rotary_dim elements
    of each head rotated: apply_rope's formula."""
    batch, seq = heads.shape[:2]
    width = cos_sin_cache.shape[1]
    half = width // 2
    cos_sin = cos_sin_cache.float()[positions.long().expand(batch, seq)][:, :, None, :]
    cos, sin = cos_sin[..., :half], cos_sin[..., half:]
    rot, rest = heads[..., :width], heads[..., width:]
    if is_neox:
        a, b = rot[..., :half], rot[..., half:]
        rotated = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        rotated = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
    return torch.cat([rotated, rest], dim=-1)


def _rope_form(a: Args) -> tuple[torch.Tensor, torch.Tensor | None]:
    """apply_rope's formula: (new q, new k)."""
    return _rotated_heads(a, None)


def _rotated_heads(
    a: Args, weights: tuple[torch.Tensor | None, torch.Tensor | None] | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """apply_rope's formula (qknorm_rope's with `weights`, read with a.eps and a.gemma):
    (new q, new k), the rotation (after the norm) in float32, rounded once."""
    new = []
    for index, t in enumerate((a.q, a.k)):
        if t is None:
            new.append(None)
            continue
        heads, back = _heads_view(t, a.head_size, a.layout)
        values = heads.float()
        if weights is not None:
            values = normalized(values, weights[index], a.eps, a.gemma)
        new.append(back(_rotated(a.positions, values, a.cos_sin_cache, a.is_neox)).to(t.dtype))
    return new[0], new[1]


def _qknorm_rope_form(a: Args) -> tuple[torch.Tensor, torch.Tensor]:
    """qknorm_rope's formula: (new q, new k)."""
    return _rotated_heads(a, (a.q_weight, a.k_weight))


def _bind_rope(plan: _Plan | None, a: Args) -> KernelBinding | Launch:
    if plan is None:
        return skip
    tuned_for = _runtime.tuning_of(a.q)
    spec = rope_spec(
        plan.dtype,
        plan.q.head_dim,
        plan.width,
        a.is_neox,
        _POSITION_DTYPES[a.positions.dtype],
        a.out_loc is not None,
        plan.cache_dtype,
        tuned_for,
    )
    return _bind_heads(spec, plan, a, tuned_for)


@op(
    bind=_bind_rope,
    mutates=("q", "k", "k_cache", "v_cache"),
    torch_form=_rope_form,
    without_gradient=("k_cache", "v_cache"),
)
def apply_rope(
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor | None,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
    rotary_dim: int | None = None,
    *,
    head_size: int | None = None,
    layout: str = "NHD",
    v: torch.Tensor | None = None,
    k_cache: torch.Tensor | None = None,
    v_cache: torch.Tensor | None = None,
    out_loc: torch.Tensor | None = None,
) -> _Plan | None:
    """Rotates the first rotary_dim elements of every head of q and k, in place.

    q, k: float32/float16/bfloat16, unit last stride, any other strides, as
    [tokens, heads * head_size] (pass head_size), [tokens, heads, head_size] or
    [batch, seq, heads, head_size] with layout="NHD" (the default), or
    [heads, tokens, head_size] / [batch, heads, seq, head_size] with layout="HND"
    (Hugging Face's q.transpose(1, 2)). k may have other heads than q, or be None.
    positions: int32 or int64, the token dimensions ([tokens] or [batch, seq]) or
    a shape that broadcasts to them ([1, seq] for one row shared by the batch).
    cos_sin_cache: [max_position, rotary_dim], contiguous, float32 or q's dtype;
    cos in the first half of a row, sin in the second. rotary_dim defaults to its
    width and must equal it; the rest of each head is left as it is. is_neox: NeoX
    style (rotate halves) or GPT-J style (interleaved pairs). Math in float, one
    rounding to q's dtype.

    With v (k's shape and layout), k_cache and v_cache [slots, num_k_heads,
    head_dim] (contiguous) and out_loc int64 of the token dimensions (contiguous),
    the rotated k and v are also written to slot out_loc[token] of the caches (a
    negative slot stores nothing). On CPU tensors positions and out_loc are
    range-checked; on an XPU they are not (the check would wait for the device).
    Differentiable in q, k and cos_sin_cache (the gradient of the formula, as of
    torch's in-place ops), except with the KV store: backward then raises a
    RuntimeError when it reaches what the call wrote.
    """
    return _check_rotation(
        "apply_rope",
        positions,
        q,
        k,
        cos_sin_cache,
        is_neox,
        rotary_dim,
        head_size,
        layout,
        v,
        k_cache,
        v_cache,
        out_loc,
    )


def _bind_qknorm_rope(plan: tuple[_Plan, str] | None, a: Args) -> KernelBinding | Launch:
    if plan is None:
        return skip
    rope, weight_kind = plan
    tuned_for = _runtime.tuning_of(a.q)
    spec = qknorm_rope_spec(
        rope.dtype,
        rope.q.head_dim,
        rope.width,
        a.is_neox,
        _POSITION_DTYPES[a.positions.dtype],
        a.out_loc is not None,
        rope.cache_dtype,
        tuned_for,
        a.gemma,
        weight_kind,
    )
    return _bind_heads(spec, rope, a, tuned_for, eps=float(a.eps))


@op(
    bind=_bind_qknorm_rope,
    mutates=("q", "k", "k_cache", "v_cache"),
    torch_form=_qknorm_rope_form,
    without_gradient=("k_cache", "v_cache"),
)
def qknorm_rope(
    positions: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor | None,
    k_weight: torch.Tensor | None,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
    eps: float = 1e-6,
    *,
    gemma: bool = False,
    head_size: int | None = None,
    layout: str = "NHD",
    v: torch.Tensor | None = None,
    k_cache: torch.Tensor | None = None,
    v_cache: torch.Tensor | None = None,
    out_loc: torch.Tensor | None = None,
) -> tuple[_Plan, str] | None:
    """qknorm(q, k, q_weight, k_weight, eps, gemma=gemma) then apply_rope(positions, q, k,
    cos_sin_cache, is_neox, ...), in place, in one kernel (one pass over q and k).

    Every head of q is normalized with q_weight, every head of k with k_weight
    ([head_dim] each, q's dtype or float32, or both None for no scale; gemma=True
    scales by 1 + weight), then the first rotary_dim (cos_sin_cache's width)
    elements of each head are rotated. positions, q, k (required here),
    cos_sin_cache, is_neox, head_size, layout and the KV store (v, k_cache,
    v_cache, out_loc: the rotated k and v are written to slot out_loc[token]) are
    as apply_rope's. Rounding: the normalized value stays in float32 through the
    rotation and is rounded to q's dtype once; qknorm followed by apply_rope rounds
    it in between, so at float16/bfloat16 the two differ by up to 2 ulps of the
    larger normalized value of a rotated pair (docs/ops.md). Differentiable as
    apply_rope, in the weights too.
    """
    name = "qknorm_rope"
    check_tensor(name, "k", k)  # not optional: k is normalized with its own weight
    if q is k:
        raise ValueError(f"{name}(): q and k share memory; expected the heads of two tensors")
    plan = _check_rotation(
        name,
        positions,
        q,
        k,
        cos_sin_cache,
        is_neox,
        None,
        head_size,
        layout,
        v,
        k_cache,
        v_cache,
        out_loc,
    )
    # _check_rotation accepted q's shape: a 2-D q has head_size set.
    flat = q.dim() == 2
    head_dim = head_size if flat else q.shape[-1]
    weight_kind = check_qk_weights(
        name, q, q_weight, k_weight, head_dim, "head_size" if flat else None
    )
    check_number(name, "eps", eps, minimum=0)
    check_bool(name, "gemma", gemma)
    return None if plan is None else (plan, weight_kind)
