"""sycl_kernels.ops.norm: RMSNorm, its fused-add and Gemma forms, QK-norm (kernels/norm/).

Each op is defined once by define_op (ops/_op.py): its checks run on every entry
point, and torch.ops.sycl_kernels.<name> is the same op as the public function.
"""

from __future__ import annotations

import torch

from .. import _runtime
from .._dtypes import DType
from ..jit.norm import fused_add_rmsnorm_spec, qknorm_spec, rmsnorm_spec
from ._checks import (
    as_rows,
    check_float_dtype,
    check_heads,
    check_number,
    check_same,
    check_shape,
    check_tensor,
    check_unit_last_stride,
)
from ._launch import launch_groups
from ._op import define_op


def _check_rows(op: str, x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[int, DType]:
    """Checks x [..., hidden] and weight [hidden]; returns hidden and the dtype."""
    check_tensor(op, "x", x)
    check_tensor(op, "weight", weight)
    dtype = check_float_dtype(op, "x", x)
    check_same(op, "weight", weight, "x", x)
    if x.dim() == 0:
        raise ValueError(f"{op}(): x is a 0-d tensor; expected at least 1 dimension (hidden)")
    hidden = x.shape[-1]
    check_shape(op, "weight", weight, (hidden,), "x.shape[-1]")
    check_number(op, "eps", eps, minimum=0)
    check_unit_last_stride(op, "x", x)
    check_unit_last_stride(op, "weight", weight)
    return hidden, dtype


def _rmsnorm_form(x: torch.Tensor, weight: torch.Tensor, eps: float, gemma: bool) -> torch.Tensor:
    """The op's formula in torch (float32 math), for its gradient."""
    x32 = x.float()
    scale = weight.float() + 1 if gemma else weight.float()
    return (x32 * torch.rsqrt(x32.square().mean(-1, keepdim=True) + eps) * scale).to(x.dtype)


def _define_rmsnorm(op: str, gemma: bool):
    def check(
        x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
    ) -> tuple[DType, torch.Tensor, torch.Tensor | None] | None:
        hidden, dtype = _check_rows(op, x, weight, eps)
        if out is not None:
            check_tensor(op, "out", out)
            check_same(op, "out", out, "x", x)
            check_shape(op, "out", out, x.shape, "x.shape")
            check_unit_last_stride(op, "out", out)
        if x.numel() == 0:
            return None
        out_rows = None if out is None else as_rows(op, "out", out, hidden, written=True)
        return dtype, as_rows(op, "x", x, hidden, written=False), out_rows

    def launch(plan, x, weight, eps, out) -> None:
        if plan is None:
            return
        dtype, x_rows, out_rows = plan
        hidden = x_rows.shape[1]
        if out_rows is None:
            out_rows = as_rows(op, "out", out, hidden, written=True)
        launch_groups(
            rmsnorm_spec(dtype, hidden, _runtime.tuning_of(x), gemma),
            _runtime.queue_of(x),
            x_rows.shape[0],
            x_rows.data_ptr(),
            x_rows.stride(0),
            weight.data_ptr(),
            out_rows.data_ptr(),
            out_rows.stride(0),
            float(eps),
        )

    def new_output(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        # empty_like: half the cost of torch.empty(shape, dtype=, device=) per call.
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    return define_op(
        op,
        check,
        launch,
        new_output=new_output,
        torch_form=lambda x, weight, eps: _rmsnorm_form(x, weight, eps, gemma),
    )


def _define_fused_add_rmsnorm(op: str, gemma: bool):
    def check(
        x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
    ) -> tuple[DType, torch.Tensor, torch.Tensor] | None:
        hidden, dtype = _check_rows(op, x, weight, eps)
        check_tensor(op, "residual", residual)
        check_same(op, "residual", residual, "x", x)
        check_shape(op, "residual", residual, x.shape, "x.shape")
        check_unit_last_stride(op, "residual", residual)
        if x.numel() == 0:
            return None
        x_rows = as_rows(op, "x", x, hidden, written=True)
        residual_rows = as_rows(op, "residual", residual, hidden, written=True)
        return dtype, x_rows, residual_rows

    def launch(plan, x, residual, weight, eps) -> None:
        if plan is None:
            return
        dtype, x_rows, residual_rows = plan
        launch_groups(
            fused_add_rmsnorm_spec(dtype, x_rows.shape[1], _runtime.tuning_of(x), gemma),
            _runtime.queue_of(x),
            x_rows.shape[0],
            x_rows.data_ptr(),
            x_rows.stride(0),
            residual_rows.data_ptr(),
            residual_rows.stride(0),
            weight.data_ptr(),
            float(eps),
        )

    return define_op(op, check, launch, mutates=("x", "residual"))


def _qknorm_check(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    eps: float = 1e-6,
) -> DType | None:
    op = "qknorm"
    for name, t in (("q", q), ("k", k), ("q_weight", q_weight), ("k_weight", k_weight)):
        check_tensor(op, name, t)
    dtype = check_float_dtype(op, "q", q)
    for name, t in (("k", k), ("q_weight", q_weight), ("k_weight", k_weight)):
        check_same(op, name, t, "q", q)
    check_heads(op, "q", q, written=True)
    check_heads(op, "k", k, written=True)
    head_dim = q.shape[2]
    check_shape(op, "k", k, (q.shape[0], k.shape[1], head_dim), "q's tokens and head_dim")
    check_shape(op, "q_weight", q_weight, (head_dim,), "head_dim")
    check_shape(op, "k_weight", k_weight, (head_dim,), "head_dim")
    check_unit_last_stride(op, "q_weight", q_weight)
    check_unit_last_stride(op, "k_weight", k_weight)
    check_number(op, "eps", eps, minimum=0)
    return None if q.shape[0] == 0 else dtype


def _qknorm_launch(dtype, q, k, q_weight, k_weight, eps) -> None:
    if dtype is None:
        return
    tokens, num_q_heads, head_dim = q.shape
    num_k_heads = k.shape[1]
    launch_groups(
        qknorm_spec(dtype, head_dim, _runtime.tuning_of(q)),
        _runtime.queue_of(q),
        tokens * (num_q_heads + num_k_heads),
        q.data_ptr(),
        q.stride(0),
        num_q_heads,
        k.data_ptr(),
        k.stride(0),
        num_k_heads,
        q_weight.data_ptr(),
        k_weight.data_ptr(),
        float(eps),
    )


_rmsnorm = _define_rmsnorm("rmsnorm", gemma=False)
_gemma_rmsnorm = _define_rmsnorm("gemma_rmsnorm", gemma=True)
_fused_add_rmsnorm = _define_fused_add_rmsnorm("fused_add_rmsnorm", gemma=False)
_gemma_fused_add_rmsnorm = _define_fused_add_rmsnorm("gemma_fused_add_rmsnorm", gemma=True)
_qknorm = define_op("qknorm", _qknorm_check, _qknorm_launch, mutates=("q", "k"))


def rmsnorm(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
) -> torch.Tensor:
    """RMSNorm over the last dimension: x * rsqrt(mean(x^2) + eps) * weight.

    x: [..., hidden] float32/float16/bfloat16, unit stride in the last dimension
    (a 2-D x may have any row stride). weight: [hidden], same dtype and device.
    out: optional, same shape and dtype as x. Returns out (a new tensor if None).
    Math in float32, rounded once to the dtype. Differentiable in x and weight
    (not with out=). CPU tensors run on the SYCL CPU device and the call returns
    when done; XPU tensors run asynchronously on the current XPU stream.
    """
    return _rmsnorm(x, weight, eps, out)


def gemma_rmsnorm(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Gemma's RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + weight); arguments as rmsnorm."""
    return _gemma_rmsnorm(x, weight, eps, out)


def fused_add_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> None:
    """In place: residual += x, then x = rmsnorm(residual) * weight.

    x, residual: [..., hidden], same shape, dtype and device, unit last stride.
    The sum is rounded to the dtype when stored in residual, and x is the norm of
    that stored sum (the sum of squares uses the unrounded float sum). Not
    differentiable: with grad mode on, tensors that require grad raise RuntimeError.
    """
    _fused_add_rmsnorm(x, residual, weight, eps)


def gemma_fused_add_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> None:
    """fused_add_rmsnorm scaling by (1 + weight), as Gemma does."""
    _gemma_fused_add_rmsnorm(x, residual, weight, eps)


def qknorm(
    q: torch.Tensor,
    k: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    eps: float = 1e-6,
) -> None:
    """In place, per-head RMSNorm of q [tokens, num_q_heads, head_dim] and k [tokens,
    num_k_heads, head_dim].

    q_weight and k_weight are [head_dim]. q and k may be views into one fused qkv
    tensor: any token stride, heads packed (head stride head_dim), unit last stride.
    Not differentiable (in place): tensors that require grad raise RuntimeError.
    """
    _qknorm(q, k, q_weight, k_weight, eps)
