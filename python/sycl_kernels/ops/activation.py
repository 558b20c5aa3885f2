"""sycl_kernels.ops.activation: gated activations, act(x[..., :d]) * x[..., d:]."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .. import _runtime
from .._dtypes import DType
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
from ._op import define_op

# The activations in torch (float32 math), for the gradient.
_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu_and_mul": torch.nn.functional.silu,
    "gelu_and_mul": torch.nn.functional.gelu,
    "gelu_tanh_and_mul": lambda a: torch.nn.functional.gelu(a, approximate="tanh"),
}


def _out_shape(x: torch.Tensor) -> tuple[int, ...]:
    return (*x.shape[:-1], x.shape[-1] // 2)


def _define(op: str, doc: str) -> Callable[..., torch.Tensor]:
    """Registers sycl_kernels::<op> and <op>_out and returns the public function."""

    def check(
        x: torch.Tensor, out: torch.Tensor | None = None
    ) -> tuple[DType, torch.Tensor, torch.Tensor | None] | None:
        check_tensor(op, "x", x)
        dtype = check_float_dtype(op, "x", x)
        if x.dim() == 0 or x.shape[-1] % 2:
            raise ValueError(
                f"{op}(): x has shape {tuple(x.shape)}; expected [..., 2 * d] "
                "(an even last dimension)"
            )
        check_unit_last_stride(op, "x", x)
        if out is not None:
            check_tensor(op, "out", out)
            check_same(op, "out", out, "x", x)
            check_shape(op, "out", out, _out_shape(x), "x.shape[:-1] + (x.shape[-1] // 2,)")
            check_unit_last_stride(op, "out", out)
        if x.numel() == 0:
            return None
        dim = x.shape[-1] // 2
        out_rows = None if out is None else as_rows(op, "out", out, dim, written=True)
        return dtype, as_rows(op, "x", x, 2 * dim, written=False), out_rows

    def launch(plan, x: torch.Tensor, out: torch.Tensor) -> None:
        if plan is None:
            return
        dtype, x_rows, out_rows = plan
        dim = x_rows.shape[1] // 2
        if out_rows is None:
            out_rows = as_rows(op, "out", out, dim, written=True)
        launch_groups(
            act_and_mul_spec(op, dtype, dim, _runtime.tuning_of(x)),
            _runtime.queue_of(x),
            x_rows.shape[0],
            x_rows.data_ptr(),
            x_rows.stride(0),
            out_rows.data_ptr(),
            out_rows.stride(0),
        )

    activation = _ACTIVATIONS[op]

    def torch_form(x: torch.Tensor) -> torch.Tensor:
        a, b = x.float().chunk(2, dim=-1)
        return (activation(a) * b).to(x.dtype)

    run = define_op(
        op, check, launch, new_output=lambda x: x.new_empty(_out_shape(x)), torch_form=torch_form
    )

    def public(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        return run(x, out)

    public.__name__ = public.__qualname__ = op
    public.__doc__ = doc + (
        "\n\n    x: [..., 2 * d] float32/float16/bfloat16, unit last stride; out: optional\n"
        "    [..., d], same dtype. Math in float. Returns out (a new tensor if None).\n"
        "    Differentiable in x (not with out=)."
    )
    return public


silu_and_mul = _define(
    "silu_and_mul", "silu(x[..., :d]) * x[..., d:], silu(a) = a / (1 + exp(-a))."
)
gelu_and_mul = _define("gelu_and_mul", "gelu(x[..., :d]) * x[..., d:], gelu with erf (exact).")
gelu_tanh_and_mul = _define(
    "gelu_tanh_and_mul", "gelu(x[..., :d]) * x[..., d:], gelu with the tanh approximation."
)
