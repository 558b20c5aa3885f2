"""sycl_kernels.ops.activation: gated activations, act(x[..., :d]) * x[..., d:]."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .. import _runtime
from ..jit.activation import act_and_mul_spec
from ._checks import (
    as_rows,
    check_float_dtype,
    check_same,
    check_shape,
    check_tensor,
    check_unit_last_stride,
)
from ._launch import launch_groups


def _launch(op: str, x: torch.Tensor, out: torch.Tensor) -> None:
    if x.numel() == 0:
        return
    dim = x.shape[-1] // 2
    x_rows = as_rows(op, "x", x, 2 * dim, written=False)
    out_rows = as_rows(op, "out", out, dim, written=True)
    queue = _runtime.queue_of(x)
    spec = act_and_mul_spec(op, check_float_dtype(op, "x", x), dim, _runtime.tuning_of(x))
    launch_groups(
        spec,
        queue,
        x_rows.shape[0],
        x_rows.data_ptr(),
        x_rows.stride(0),
        out_rows.data_ptr(),
        out_rows.stride(0),
    )


def _out_shape(x: torch.Tensor) -> tuple[int, ...]:
    return (*x.shape[:-1], x.shape[-1] // 2)


def _check(op: str, x: torch.Tensor, out: torch.Tensor | None) -> None:
    check_tensor(op, "x", x)
    check_float_dtype(op, "x", x)
    if x.dim() == 0 or x.shape[-1] % 2:
        raise ValueError(
            f"{op}(): x has shape {tuple(x.shape)}; expected [..., 2 * d] (an even last dimension)"
        )
    check_unit_last_stride(op, "x", x)
    if out is not None:
        check_tensor(op, "out", out)
        check_same(op, "out", out, "x", x)
        check_shape(op, "out", out, _out_shape(x), "x.shape[:-1] + (x.shape[-1] // 2,)")
        check_unit_last_stride(op, "out", out)


def _define(op: str, doc: str) -> Callable[..., torch.Tensor]:
    """Registers sycl_kernels::<op> and <op>_out and returns the public function."""

    def functional_impl(x: torch.Tensor) -> torch.Tensor:
        out = x.new_empty(_out_shape(x))
        _launch(op, x, out)
        return out

    def out_impl(x: torch.Tensor, out: torch.Tensor) -> None:
        _launch(op, x, out)

    functional_op = torch.library.custom_op(f"sycl_kernels::{op}", mutates_args=())(functional_impl)
    functional_op.register_fake(
        lambda x: torch.empty(_out_shape(x), dtype=x.dtype, device=x.device)
    )
    out_op = torch.library.custom_op(f"sycl_kernels::{op}_out", mutates_args=("out",))(out_impl)
    out_op.register_fake(lambda x, out: None)

    def public(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        _check(op, x, out)
        if torch.compiler.is_compiling():
            if out is None:
                return functional_op(x)
            out_op(x, out)
            return out
        if out is None:
            out = x.new_empty(_out_shape(x))
        _launch(op, x, out)
        return out

    public.__name__ = public.__qualname__ = op
    public.__doc__ = doc + (
        "\n\n    x: [..., 2 * d] float32/float16/bfloat16, unit last stride; out: optional\n"
        "    [..., d], same dtype. Math in float. Returns out (a new tensor if None)."
    )
    return public


silu_and_mul = _define(
    "silu_and_mul", "silu(x[..., :d]) * x[..., d:], silu(a) = a / (1 + exp(-a))."
)
gelu_and_mul = _define("gelu_and_mul", "gelu(x[..., :d]) * x[..., d:], gelu with erf (exact).")
gelu_tanh_and_mul = _define(
    "gelu_tanh_and_mul", "gelu(x[..., :d]) * x[..., d:], gelu with the tanh approximation."
)
