"""sycl_kernels.ops.norm: RMSNorm, its fused-add and Gemma forms, QK-norm (kernels/norm/).

Each op is defined once by define_op (ops/_op.py): its checks run on every entry
point, and torch.ops.sycl_kernels.<name> is the same op as the public function.
"""

from __future__ import annotations

import torch

from .. import _runtime
from .._dtypes import DType
from ..jit.norm import (
    fused_add_rmsnorm_spec,
    qknorm_heads_per_group,
    qknorm_spec,
    rmsnorm_spec,
)
from ._checks import (
    Meta,
    RowEntries,
    RowLayout,
    check_bool,
    check_float_dtype,
    check_number,
    check_same,
    check_shape,
    check_unit_last_stride,
    contiguous_row_strides,
    row_layout,
    tensor_meta,
)
from ._launch import Launch, address, bind_kernel, skip
from ._op import define_op


def _check_weight(
    op: str,
    name: str,
    weight: torch.Tensor | None,
    x: torch.Tensor,
    width: int,
    x_name: str,
    why: str | None = None,
) -> str:
    """Checks a norm weight of `width` elements (`why`: where that width comes from, by
    default x's last dimension); returns its kind (jit.norm.WEIGHT_KINDS)."""
    if weight is None:
        return "none"
    shape, strides = tensor_meta(op, name, weight)
    if weight.dtype != x.dtype and weight.dtype != torch.float32:
        raise TypeError(
            f"{op}(): {name} has dtype {weight.dtype}; expected {x_name}'s dtype {x.dtype} "
            "or torch.float32"
        )
    if not (weight.is_cpu and x.is_cpu) and weight.device != x.device:
        raise ValueError(
            f"{op}(): {name} is on {weight.device} but {x_name} is on {x.device}; "
            "expected the same device"
        )
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
    weight_kind = _check_weight(op, "weight", weight, x, shape[-1], "x")
    check_number(op, "eps", eps, minimum=0)
    check_unit_last_stride(op, "x", *meta)
    return meta, dtype, weight_kind


def _rmsnorm_form(
    x: torch.Tensor, weight: torch.Tensor | None, eps: float, gemma: bool
) -> torch.Tensor:
    """The op's formula in torch (float32 math), for its gradient."""
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.square().mean(-1, keepdim=True) + eps)
    if weight is not None:
        normed = normed * (weight.float() + 1 if gemma else weight.float())
    return normed.to(x.dtype)


def _define_rmsnorm(op: str, gemma: bool):
    def check(
        x: torch.Tensor,
        weight: torch.Tensor | None,
        eps: float = 1e-6,
        out: torch.Tensor | None = None,
    ) -> tuple[DType, str, RowLayout] | None:
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
        return dtype, weight_kind, row_layout(op, shape[-1], shape, rows)

    def bind(plan, x, weight, eps, out=None) -> Launch:
        if plan is None:
            return skip
        dtype, weight_kind, layout = plan
        hidden = x.shape[-1]
        x_strides = layout.strides[0]
        out_strides = (
            layout.strides[1] if out is not None else contiguous_row_strides(layout, hidden)
        )
        sizes = (layout.middle_size, layout.inner_size, float(eps))
        kernel = bind_kernel(
            rmsnorm_spec(dtype, hidden, _runtime.tuning_of(x), gemma, weight_kind), x, layout.rows
        )

        def launch(x, weight, eps, out) -> None:
            kernel(x.data_ptr(), *x_strides, address(weight), out.data_ptr(), *out_strides, *sizes)

        return launch

    def new_output(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
        # empty_like: half the cost of torch.empty(shape, dtype=, device=) per call.
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    return define_op(
        op,
        check,
        bind,
        new_output=new_output,
        torch_form=lambda x, weight, eps: _rmsnorm_form(x, weight, eps, gemma),
    )


def _define_fused_add_rmsnorm(op: str, gemma: bool):
    def check(
        x: torch.Tensor,
        residual: torch.Tensor,
        weight: torch.Tensor | None,
        eps: float = 1e-6,
        rounded_sum: bool = True,
    ) -> tuple[DType, str, RowLayout] | None:
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
        return dtype, weight_kind, layout

    def bind(plan, x, residual, weight, eps, rounded_sum) -> Launch:
        if plan is None:
            return skip
        dtype, weight_kind, layout = plan
        spec = fused_add_rmsnorm_spec(
            dtype, x.shape[-1], _runtime.tuning_of(x), gemma, weight_kind, rounded_sum
        )
        kernel = bind_kernel(spec, x, layout.rows)
        x_strides, residual_strides = layout.strides
        sizes = (layout.middle_size, layout.inner_size, float(eps))

        def launch(x, residual, weight, eps, rounded_sum) -> None:
            kernel(
                x.data_ptr(),
                *x_strides,
                residual.data_ptr(),
                *residual_strides,
                address(weight),
                *sizes,
            )

        return launch

    return define_op(op, check, bind, mutates=("x", "residual"))


def _qknorm_check(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor | None,
    k_weight: torch.Tensor | None,
    eps: float = 1e-6,
    gemma: bool = False,
) -> tuple[DType, str, RowLayout, RowLayout] | None:
    op = "qknorm"
    q_shape, q_strides = tensor_meta(op, "q", q)
    k_shape, k_strides = tensor_meta(op, "k", k)
    dtype = check_float_dtype(op, "q", q)
    check_same(op, "k", k, "q", q)
    if q is k:
        raise ValueError(f"{op}(): q and k share memory; expected the heads of two tensors")
    if not q_shape:
        raise ValueError(f"{op}(): q is a 0-d tensor; expected [..., head_dim]")
    head_dim = q_shape[-1]
    if not k_shape or k_shape[-1] != head_dim:
        raise ValueError(
            f"{op}(): k has shape {tuple(k_shape)}; expected [..., {head_dim}] (q's head_dim)"
        )
    check_unit_last_stride(op, "q", q_shape, q_strides)
    check_unit_last_stride(op, "k", k_shape, k_strides)
    weight_kind = check_qk_weights(op, q, q_weight, k_weight, head_dim)
    check_number(op, "eps", eps, minimum=0)
    check_bool(op, "gemma", gemma)
    if q.numel() == 0 and k.numel() == 0:
        return None
    return (
        dtype,
        weight_kind,
        row_layout(op, head_dim, q_shape, (("q", q_strides, True),)),
        row_layout(op, head_dim, k_shape, (("k", k_strides, True),)),
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
    weight_kind = _check_weight(op, "q_weight", q_weight, q, head_dim, "q", why)
    if _check_weight(op, "k_weight", k_weight, q, head_dim, "q", why) != weight_kind:
        raise TypeError(
            f"{op}(): k_weight is {_describe(k_weight)} but q_weight is {_describe(q_weight)}; "
            "expected both None or both of one dtype"
        )
    return weight_kind


def _describe(weight: torch.Tensor | None) -> str:
    return "None" if weight is None else str(weight.dtype)


def _qknorm_bind(plan, q, k, q_weight, k_weight, eps, gemma) -> Launch:
    if plan is None:
        return skip
    dtype, weight_kind, q_rows, k_rows = plan
    tuned_for = _runtime.tuning_of(q)
    heads = q_rows.rows + k_rows.rows
    kernel = bind_kernel(
        qknorm_spec(dtype, q.shape[-1], tuned_for, gemma, weight_kind),
        q,
        -(-heads // qknorm_heads_per_group(tuned_for)),
    )
    q_args = (*q_rows.strides[0], q_rows.middle_size, q_rows.inner_size, q_rows.rows)
    k_args = (*k_rows.strides[0], k_rows.middle_size, k_rows.inner_size)
    tail = (float(eps), heads)

    def launch(q, k, q_weight, k_weight, eps, gemma) -> None:
        kernel(
            q.data_ptr(),
            *q_args,
            k.data_ptr(),
            *k_args,
            address(q_weight),
            address(k_weight),
            *tail,
        )

    return launch


_rmsnorm = _define_rmsnorm("rmsnorm", gemma=False)
_gemma_rmsnorm = _define_rmsnorm("gemma_rmsnorm", gemma=True)
_fused_add_rmsnorm = _define_fused_add_rmsnorm("fused_add_rmsnorm", gemma=False)
_gemma_fused_add_rmsnorm = _define_fused_add_rmsnorm("gemma_fused_add_rmsnorm", gemma=True)
_qknorm = define_op("qknorm", _qknorm_check, _qknorm_bind, mutates=("q", "k"))


def rmsnorm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
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
    """
    return _rmsnorm(x, weight, eps, out)


def gemma_rmsnorm(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float = 1e-6,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Gemma's RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + weight); arguments as rmsnorm
    (weight=None scales by 1)."""
    return _gemma_rmsnorm(x, weight, eps, out)


def fused_add_rmsnorm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float = 1e-6,
    *,
    rounded_sum: bool = True,
) -> None:
    """In place: residual += x, then x = rmsnorm(residual) * weight.

    x, residual: [..., hidden], same shape, dtype and device, unit last stride,
    any other strides (as rmsnorm); weight as rmsnorm. residual receives the sum
    rounded to the dtype. rounded_sum=True (vLLM's semantics) normalizes that
    stored sum, its mean square included; rounded_sum=False (SGLang's and
    flashinfer's) normalizes the float32 sum before rounding. For float32 tensors
    the two are the same. Not differentiable: with grad mode on, tensors that
    require grad raise RuntimeError.
    """
    _fused_add_rmsnorm(x, residual, weight, eps, rounded_sum)


def gemma_fused_add_rmsnorm(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float = 1e-6,
    *,
    rounded_sum: bool = True,
) -> None:
    """fused_add_rmsnorm scaling by (1 + weight), as Gemma does."""
    _gemma_fused_add_rmsnorm(x, residual, weight, eps, rounded_sum)


def qknorm(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor | None,
    k_weight: torch.Tensor | None,
    eps: float = 1e-6,
    *,
    gemma: bool = False,
) -> None:
    """In place, per-head RMSNorm of q [..., head_dim] and k [..., head_dim].

    Every head_dim row of q is normalized with q_weight, every row of k with
    k_weight ([head_dim] each, q's dtype or float32, or both None). q and k may be
    views into one fused qkv tensor, padded heads or transposed [B, H, S, D]
    views: unit last stride, any other strides. gemma=True scales by (1 + weight).
    Not differentiable (in place): tensors that require grad raise RuntimeError.
    """
    _qknorm(q, k, q_weight, k_weight, eps, gemma)
