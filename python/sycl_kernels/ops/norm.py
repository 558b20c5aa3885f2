"""sycl_kernels.ops.norm: RMSNorm, its fused-add and Gemma forms, QK-norm (kernels/norm/).

Each op is one function decorated by @op (ops/_op.py): its signature and docstring
are the public op's, its body the checks that run on every entry point, and
torch.ops.sycl_kernels.<name> is the same op.
"""

from __future__ import annotations

import functools

import torch

from .. import _runtime
from .._dtypes import DType
from ..specs.norm import (
    fused_add_rmsnorm_spec,
    qknorm_heads_per_group,
    qknorm_spec,
    rmsnorm_spec,
)
from ..specs.spec import leading_row_values
from ._checks import (
    Meta,
    RowEntries,
    RowLayout,
    check_bool,
    check_float32_or_dtype_of,
    check_float_dtype,
    check_number,
    check_same,
    check_same_device,
    check_shape,
    check_unit_last_stride,
    contiguous_row_strides,
    row_layout,
    tensor_meta,
)
from ._launch import KernelBinding, Launch, bind_kernel, skip
from ._op import Op, op
from ._schema import Args


def check_weight(
    op: str,
    name: str,
    weight: torch.Tensor | None,
    x: torch.Tensor,
    width: int,
    x_name: str,
    why: str | None = None,
) -> str:
    """Checks a norm weight of `width` elements (`why`: where that width comes from, by
    default x's last dimension); returns its kind (specs.norm.WEIGHT_KINDS)."""
    if weight is None:
        return "none"
    shape, strides = tensor_meta(op, name, weight)
    check_float32_or_dtype_of(op, name, weight, x_name, x)
    check_same_device(op, name, weight, x_name, x)
    check_shape(op, name, shape, (width,), why or f"{x_name}.shape[-1]")
    check_unit_last_stride(op, name, shape, strides)
    return "dtype" if weight.dtype == x.dtype else "fp32"


def _check_rows(
    op: str, x: torch.Tensor, weight: torch.Tensor | None, eps: float
) -> tuple[Meta, DType, str]:
    """Checks x [..., hidden] and weight [hidden]; returns x's metadata, the dtype, the
    weight kind."""
    meta = tensor_meta(op, "x", x)
    shape = meta[0]
    dtype = check_float_dtype(op, "x", x)
    if not shape:
        raise ValueError(f"{op}(): x is a 0-d tensor; expected at least 1 dimension (hidden)")
    weight_kind = check_weight(op, "weight", weight, x, shape[-1], "x")
    check_number(op, "eps", eps, minimum=0)
    check_unit_last_stride(op, "x", *meta)
    return meta, dtype, weight_kind


_NormPlan = tuple[DType, str, RowLayout, bool]


def _norm_form(gemma: bool, a: Args) -> torch.Tensor:
    """rmsnorm's formula in torch (float32 math), for its gradient."""
    return normalized(a.x, a.weight, a.eps, gemma).to(a.x.dtype)


def normalized(
    x: torch.Tensor, weight: torch.Tensor | None, eps: float, gemma: bool
) -> torch.Tensor:
    """The RMSNorm of x's rows in float32 with torch ops: the norms' formula."""
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.square().mean(-1, keepdim=True) + eps)
    if weight is not None:
        normed = normed * (weight.float() + 1 if gemma else weight.float())
    return normed


def _fused_add_form(gemma: bool, a: Args) -> tuple[torch.Tensor, torch.Tensor]:
    """fused_add_rmsnorm's formula: (new x, new residual)."""
    summed = a.x.float() + a.residual.float()
    new_residual = summed.to(a.x.dtype)
    source = new_residual if a.rounded_sum else summed
    return normalized(source, a.weight, a.eps, gemma).to(a.x.dtype), new_residual


def _qknorm_form(a: Args) -> tuple[torch.Tensor, torch.Tensor]:
    """qknorm's formula: (new q, new k)."""
    return (
        normalized(a.q, a.q_weight, a.eps, a.gemma).to(a.q.dtype),
        normalized(a.k, a.k_weight, a.eps, a.gemma).to(a.k.dtype),
    )


def _check_rmsnorm(
    op: str,
    gemma: bool,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float,
    out: torch.Tensor | None,
) -> _NormPlan | None:
    (shape, strides), dtype, weight_kind = _check_rows(op, x, weight, eps)
    rows: RowEntries = (("x", strides, False),)
    if out is not None:
        out_shape, out_strides = tensor_meta(op, "out", out)
        check_same(op, "out", out, "x", x)
        check_shape(op, "out", out_shape, shape, "x.shape")
        check_unit_last_stride(op, "out", out_shape, out_strides)
        rows += (("out", out_strides, True),)
    if x.numel() == 0:
        return None
    return dtype, weight_kind, row_layout(op, shape[-1], shape, rows), gemma


def _bind_rmsnorm(plan: _NormPlan | None, a: Args) -> KernelBinding | Launch:
    if plan is None:
        return skip
    dtype, weight_kind, layout, gemma = plan
    hidden = a.x.shape[-1]
    given = a.out is not None
    out_strides = layout.strides[1] if given else contiguous_row_strides(layout, hidden)
    return bind_kernel(
        rmsnorm_spec(dtype, hidden, _runtime.tuning_of(a.x), gemma, weight_kind),
        a.x,
        layout.rows,
        **leading_row_values("x", layout.strides[0]),
        **leading_row_values("out", out_strides),
        middle_size=layout.middle_size,
        inner_size=layout.inner_size,
        eps=float(a.eps),
    )


def _like_x(a: Args) -> torch.Tensor:
    # empty_like: half the cost of torch.empty(shape, dtype=, device=) per call.
    return torch.empty_like(a.x, memory_format=torch.contiguous_format)


def _rmsnorm_op(name: str, gemma: bool, doc: str) -> Op:
    """rmsnorm and gemma_rmsnorm: one signature, the weight read as w or (1 + w)."""

    def check(
        x: torch.Tensor,
        weight: torch.Tensor | None,
        eps: float = 1e-6,
        out: torch.Tensor | None = None,
    ) -> _NormPlan | None:
        return _check_rmsnorm(name, gemma, x, weight, eps, out)

    check.__name__, check.__doc__ = name, doc
    torch_form = functools.partial(_norm_form, gemma)
    return op(bind=_bind_rmsnorm, new_output=_like_x, torch_form=torch_form)(check)


rmsnorm = _rmsnorm_op(
    "rmsnorm",
    False,
    """RMSNorm over the last dimension: x * rsqrt(mean(x^2) + eps) * weight.

    x: [..., hidden] float32/float16/bfloat16, unit stride in the last dimension,
    any strides in the others (a transposed [B, H, S, D] view, a slice of a wider
    tensor; up to three leading dimensions that cannot be merged). weight:
    [hidden] in x's dtype, or float32 on float16/bfloat16 x, or None for no scale.
    out: optional, same shape and dtype as x, any such strides; None returns a new
    contiguous tensor. Math in float32 (the weight read as float32), rounded once
    to x's dtype. Differentiable in x and weight (not with out=). CPU tensors run
    on the SYCL CPU device and the call returns when done; XPU tensors run
    asynchronously on the current XPU stream.
    """,
)
gemma_rmsnorm = _rmsnorm_op(
    "gemma_rmsnorm",
    True,
    """Gemma's RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + weight); arguments as rmsnorm
    (weight=None scales by 1).""",
)


_FusedPlan = tuple[DType, str, RowLayout, bool]


def _check_fused_add_rmsnorm(
    op: str,
    gemma: bool,
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float,
    rounded_sum: bool,
) -> _FusedPlan | None:
    (shape, strides), dtype, weight_kind = _check_rows(op, x, weight, eps)
    residual_shape, residual_strides = tensor_meta(op, "residual", residual)
    check_same(op, "residual", residual, "x", x)
    check_shape(op, "residual", residual_shape, shape, "x.shape")
    check_unit_last_stride(op, "residual", residual_shape, residual_strides)
    check_bool(op, "rounded_sum", rounded_sum)
    if x.numel() == 0:
        return None
    layout = row_layout(
        op, shape[-1], shape, (("x", strides, True), ("residual", residual_strides, True))
    )
    return dtype, weight_kind, layout, gemma


def _bind_fused_add_rmsnorm(plan: _FusedPlan | None, a: Args) -> KernelBinding | Launch:
    if plan is None:
        return skip
    dtype, weight_kind, layout, gemma = plan
    spec = fused_add_rmsnorm_spec(
        dtype, a.x.shape[-1], _runtime.tuning_of(a.x), gemma, weight_kind, a.rounded_sum
    )
    x_strides, residual_strides = layout.strides
    return bind_kernel(
        spec,
        a.x,
        layout.rows,
        **leading_row_values("x", x_strides),
        **leading_row_values("residual", residual_strides),
        middle_size=layout.middle_size,
        inner_size=layout.inner_size,
        eps=float(a.eps),
    )


def _fused_add_rmsnorm_op(name: str, gemma: bool, doc: str) -> Op:
    """fused_add_rmsnorm and its Gemma form: one signature."""

    def check(
        x: torch.Tensor,
        residual: torch.Tensor,
        weight: torch.Tensor | None,
        eps: float = 1e-6,
        *,
        rounded_sum: bool = True,
    ) -> _FusedPlan | None:
        return _check_fused_add_rmsnorm(name, gemma, x, residual, weight, eps, rounded_sum)

    check.__name__, check.__doc__ = name, doc
    return op(
        bind=_bind_fused_add_rmsnorm,
        mutates=("x", "residual"),
        torch_form=functools.partial(_fused_add_form, gemma),
    )(check)


fused_add_rmsnorm = _fused_add_rmsnorm_op(
    "fused_add_rmsnorm",
    False,
    """In place: residual += x, then x = rmsnorm(residual) * weight.

    x, residual: [..., hidden], same shape, dtype and device, unit last stride,
    any other strides (as rmsnorm); weight as rmsnorm. residual receives the sum
    rounded to the dtype. rounded_sum=True (vLLM's semantics) normalizes that
    stored sum, its mean square included; rounded_sum=False (SGLang's and
    flashinfer's) normalizes the float32 sum before rounding. For float32 tensors
    the two are the same. Differentiable in x, residual and weight (the
    gradient of the formula, as of torch's in-place ops).
    """,
)
gemma_fused_add_rmsnorm = _fused_add_rmsnorm_op(
    "gemma_fused_add_rmsnorm", True, """fused_add_rmsnorm scaling by (1 + weight), as Gemma does."""
)


def check_qk_weights(
    op: str,
    q: torch.Tensor,
    q_weight: torch.Tensor | None,
    k_weight: torch.Tensor | None,
    head_dim: int,
    why: str | None = None,
) -> str:
    """qknorm's two weights (qknorm_rope's too): [head_dim] each, of one kind; returns it."""
    weight_kind = check_weight(op, "q_weight", q_weight, q, head_dim, "q", why)
    if check_weight(op, "k_weight", k_weight, q, head_dim, "q", why) != weight_kind:
        raise TypeError(
            f"{op}(): k_weight is {_describe(k_weight)} but q_weight is {_describe(q_weight)}; "
            "expected both None or both of one dtype"
        )
    return weight_kind


def _describe(weight: torch.Tensor | None) -> str:
    return "None" if weight is None else str(weight.dtype)


_QkPlan = tuple[DType, str, RowLayout, RowLayout]


def _bind_qknorm(plan: _QkPlan | None, a: Args) -> KernelBinding | Launch:
    if plan is None:
        return skip
    dtype, weight_kind, q_rows, k_rows = plan
    tuned_for = _runtime.tuning_of(a.q)
    heads = q_rows.rows + k_rows.rows
    return bind_kernel(
        qknorm_spec(dtype, a.q.shape[-1], tuned_for, a.gemma, weight_kind),
        a.q,
        -(-heads // qknorm_heads_per_group(tuned_for)),
        **leading_row_values("q", q_rows.strides[0]),
        q_middle_size=q_rows.middle_size,
        q_inner_size=q_rows.inner_size,
        q_rows=q_rows.rows,
        **leading_row_values("k", k_rows.strides[0]),
        k_middle_size=k_rows.middle_size,
        k_inner_size=k_rows.inner_size,
        eps=float(a.eps),
        rows=heads,
    )


@op(bind=_bind_qknorm, mutates=("q", "k"), torch_form=_qknorm_form)
def qknorm(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor | None,
    k_weight: torch.Tensor | None,
    eps: float = 1e-6,
    *,
    gemma: bool = False,
) -> _QkPlan | None:
    """In place, per-head RMSNorm of q [..., head_dim] and k [..., head_dim].

    Every head_dim row of q is normalized with q_weight, every row of k with
    k_weight ([head_dim] each, q's dtype or float32, or both None). q and k may be
    views into one fused qkv tensor, padded heads or transposed [B, H, S, D]
    views: unit last stride, any other strides. gemma=True scales by (1 + weight).
    Differentiable in q, k and the weights (the gradient of the formula, as of
    torch's in-place ops).
    """
    name = "qknorm"
    q_shape, q_strides = tensor_meta(name, "q", q)
    k_shape, k_strides = tensor_meta(name, "k", k)
    dtype = check_float_dtype(name, "q", q)
    check_same(name, "k", k, "q", q)
    if q is k:
        raise ValueError(f"{name}(): q and k share memory; expected the heads of two tensors")
    if not q_shape:
        raise ValueError(f"{name}(): q is a 0-d tensor; expected [..., head_dim]")
    head_dim = q_shape[-1]
    if not k_shape or k_shape[-1] != head_dim:
        raise ValueError(
            f"{name}(): k has shape {tuple(k_shape)}; expected [..., {head_dim}] (q's head_dim)"
        )
    check_unit_last_stride(name, "q", q_shape, q_strides)
    check_unit_last_stride(name, "k", k_shape, k_strides)
    weight_kind = check_qk_weights(name, q, q_weight, k_weight, head_dim)
    check_number(name, "eps", eps, minimum=0)
    check_bool(name, "gemma", gemma)
    if q.numel() == 0 and k.numel() == 0:
        return None
    return (
        dtype,
        weight_kind,
        row_layout(name, head_dim, q_shape, (("q", q_strides, True),)),
        row_layout(name, head_dim, k_shape, (("k", k_strides, True),)),
    )
