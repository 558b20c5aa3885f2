"""sycl_kernels.ops.norm: RMSNorm, its fused-add and Gemma forms, QK-norm (kernels/norm/).

Each op is a torch.library custom op (`torch.ops.sycl_kernels.*`, with a fake
implementation) so torch.compile can trace it; in eager mode the public function
launches directly, skipping the dispatcher's per-call cost.
"""

from __future__ import annotations

import torch

from .. import _runtime
from ..jit.norm import fused_add_rmsnorm_spec, qknorm_spec, rmsnorm_spec
from ._checks import (
    as_rows,
    check_disjoint_rows,
    check_float_dtype,
    check_number,
    check_same,
    check_shape,
    check_tensor,
    check_unit_last_stride,
)
from ._launch import launch_groups


def _check_rmsnorm(op: str, x: torch.Tensor, weight: torch.Tensor, eps: float) -> int:
    check_tensor(op, "x", x)
    check_tensor(op, "weight", weight)
    check_float_dtype(op, "x", x)
    check_same(op, "weight", weight, "x", x)
    if x.dim() == 0:
        raise ValueError(f"{op}(): x is a 0-d tensor; expected at least 1 dimension (hidden)")
    hidden = x.shape[-1]
    check_shape(op, "weight", weight, (hidden,), "x.shape[-1]")
    check_number(op, "eps", eps, minimum=0)
    check_unit_last_stride(op, "x", x)
    check_unit_last_stride(op, "weight", weight)
    return hidden


def _check_out(op: str, out: torch.Tensor, x: torch.Tensor) -> None:
    check_tensor(op, "out", out)
    check_same(op, "out", out, "x", x)
    check_shape(op, "out", out, tuple(x.shape), "x.shape")
    check_unit_last_stride(op, "out", out)


def _launch_rmsnorm(
    op: str, x: torch.Tensor, weight: torch.Tensor, eps: float, out: torch.Tensor, gemma: bool
) -> None:
    if x.numel() == 0:
        return
    hidden = x.shape[-1]
    x_rows = as_rows(op, "x", x, hidden, written=False)
    out_rows = as_rows(op, "out", out, hidden, written=True)
    queue = _runtime.queue_of(x)
    spec = rmsnorm_spec(check_float_dtype(op, "x", x), hidden, _runtime.tuning_of(x), gemma)
    launch_groups(
        spec,
        queue,
        x_rows.shape[0],
        x_rows.data_ptr(),
        x_rows.stride(0),
        weight.data_ptr(),
        out_rows.data_ptr(),
        out_rows.stride(0),
        float(eps),
    )


def _launch_fused_add_rmsnorm(
    op: str, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, gemma: bool
) -> None:
    if x.numel() == 0:
        return
    hidden = x.shape[-1]
    x_rows = as_rows(op, "x", x, hidden, written=True)
    residual_rows = as_rows(op, "residual", residual, hidden, written=True)
    queue = _runtime.queue_of(x)
    spec = fused_add_rmsnorm_spec(
        check_float_dtype(op, "x", x), hidden, _runtime.tuning_of(x), gemma
    )
    launch_groups(
        spec,
        queue,
        x_rows.shape[0],
        x_rows.data_ptr(),
        x_rows.stride(0),
        residual_rows.data_ptr(),
        residual_rows.stride(0),
        weight.data_ptr(),
        float(eps),
    )


@torch.library.custom_op("sycl_kernels::rmsnorm", mutates_args=())
def _rmsnorm_op(x: torch.Tensor, weight: torch.Tensor, eps: float, gemma: bool) -> torch.Tensor:
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    _launch_rmsnorm("rmsnorm", x, weight, eps, out, gemma)
    return out


@_rmsnorm_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, eps: float, gemma: bool) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


@torch.library.custom_op("sycl_kernels::rmsnorm_out", mutates_args=("out",))
def _rmsnorm_out_op(
    x: torch.Tensor, weight: torch.Tensor, eps: float, gemma: bool, out: torch.Tensor
) -> None:
    _launch_rmsnorm("rmsnorm", x, weight, eps, out, gemma)


@_rmsnorm_out_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, eps: float, gemma: bool, out: torch.Tensor) -> None:
    return None


@torch.library.custom_op("sycl_kernels::fused_add_rmsnorm", mutates_args=("x", "residual"))
def _fused_add_rmsnorm_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, gemma: bool
) -> None:
    _launch_fused_add_rmsnorm("fused_add_rmsnorm", x, residual, weight, eps, gemma)


@_fused_add_rmsnorm_op.register_fake
def _(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, gemma: bool
) -> None:
    return None


def _rmsnorm(
    op: str,
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    out: torch.Tensor | None,
    gemma: bool,
) -> torch.Tensor:
    _check_rmsnorm(op, x, weight, eps)
    if out is not None:
        _check_out(op, out, x)
    if torch.compiler.is_compiling():
        if out is None:
            return _rmsnorm_op(x, weight, eps, gemma)
        _rmsnorm_out_op(x, weight, eps, gemma, out)
        return out
    if out is None:
        # empty_like: half the cost of torch.empty(shape, dtype=, device=) per call.
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
    _launch_rmsnorm(op, x, weight, eps, out, gemma)
    return out


def _fused_add_rmsnorm(
    op: str,
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    gemma: bool,
) -> None:
    _check_rmsnorm(op, x, weight, eps)
    check_tensor(op, "residual", residual)
    check_same(op, "residual", residual, "x", x)
    check_shape(op, "residual", residual, tuple(x.shape), "x.shape")
    check_unit_last_stride(op, "residual", residual)
    if torch.compiler.is_compiling():
        _fused_add_rmsnorm_op(x, residual, weight, eps, gemma)
    else:
        _launch_fused_add_rmsnorm(op, x, residual, weight, eps, gemma)


def rmsnorm(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
) -> torch.Tensor:
    """RMSNorm over the last dimension: x * rsqrt(mean(x^2) + eps) * weight.

    x: [..., hidden] float32/float16/bfloat16, unit stride in the last dimension
    (a 2-D x may have any row stride). weight: [hidden], same dtype and device.
    out: optional, same shape and dtype as x. Returns out (a new tensor if None).
    CPU tensors run on the SYCL CPU device and the call returns when done; XPU
    tensors run asynchronously on the current XPU stream.
    """
    return _rmsnorm("rmsnorm", x, weight, eps, out, gemma=False)


def gemma_rmsnorm(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Gemma's RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + weight); arguments as rmsnorm."""
    return _rmsnorm("gemma_rmsnorm", x, weight, eps, out, gemma=True)


def fused_add_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> None:
    """In place: residual += x, then x = rmsnorm(residual) * weight.

    x, residual: [..., hidden], same shape, dtype and device, unit last stride.
    The sum is rounded to the dtype when stored in residual, and x is the norm of
    that stored sum (the sum of squares uses the unrounded float sum).
    """
    _fused_add_rmsnorm("fused_add_rmsnorm", x, residual, weight, eps, gemma=False)


def gemma_fused_add_rmsnorm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> None:
    """fused_add_rmsnorm scaling by (1 + weight), as Gemma does."""
    _fused_add_rmsnorm("gemma_fused_add_rmsnorm", x, residual, weight, eps, gemma=True)


def _check_heads(op: str, name: str, t: torch.Tensor, written: bool) -> None:
    if t.dim() != 3:
        raise ValueError(
            f"{op}(): {name} has shape {tuple(t.shape)}; expected [tokens, heads, head_dim]"
        )
    check_unit_last_stride(op, name, t)
    if t.shape[1] > 1 and t.stride(1) != t.shape[2]:
        raise ValueError(
            f"{op}(): {name} has head stride {t.stride(1)}; expected {t.shape[2]} "
            "(heads packed within a token; the token stride may be anything)"
        )
    if written:
        check_disjoint_rows(op, name, t.shape[0], t.stride(0), t.shape[1] * t.shape[2])


def _launch_qknorm(
    q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float
) -> None:
    tokens, num_q_heads, head_dim = q.shape
    if tokens == 0:
        return
    num_k_heads = k.shape[1]
    queue = _runtime.queue_of(q)
    spec = qknorm_spec(check_float_dtype("qknorm", "q", q), head_dim, _runtime.tuning_of(q))
    launch_groups(
        spec,
        queue,
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


@torch.library.custom_op("sycl_kernels::qknorm", mutates_args=("q", "k"))
def _qknorm_op(
    q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float
) -> None:
    _launch_qknorm(q, k, q_weight, k_weight, eps)


@_qknorm_op.register_fake
def _(
    q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, eps: float
) -> None:
    return None


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
    """
    op = "qknorm"
    for name, t in (("q", q), ("k", k), ("q_weight", q_weight), ("k_weight", k_weight)):
        check_tensor(op, name, t)
    check_float_dtype(op, "q", q)
    for name, t in (("k", k), ("q_weight", q_weight), ("k_weight", k_weight)):
        check_same(op, name, t, "q", q)
    _check_heads(op, "q", q, written=True)
    _check_heads(op, "k", k, written=True)
    head_dim = q.shape[2]
    check_shape(op, "k", k, (q.shape[0], k.shape[1], head_dim), "q's tokens and head_dim")
    check_shape(op, "q_weight", q_weight, (head_dim,), "head_dim")
    check_shape(op, "k_weight", k_weight, (head_dim,), "head_dim")
    check_unit_last_stride(op, "q_weight", q_weight)
    check_unit_last_stride(op, "k_weight", k_weight)
    check_number(op, "eps", eps, minimum=0)
    if torch.compiler.is_compiling():
        _qknorm_op(q, k, q_weight, k_weight, eps)
    else:
        _launch_qknorm(q, k, q_weight, k_weight, eps)
