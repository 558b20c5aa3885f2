"""sycl_kernels.ops.activation: gated activations, act(gate) * up (kernels/activation/gated.hpp).

The *_and_mul ops take gate and up as the two halves of x's last dimension;
act_and_mul takes them as two tensors. All launch the one kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .. import _runtime
from .._dtypes import DType
from ..jit.activation import ACTIVATIONS, act_and_mul_spec
from ._checks import (
    RowLayout,
    check_bool,
    check_float_dtype,
    check_same,
    check_shape,
    check_tensor,
    check_unit_last_stride,
    contiguous_row_strides,
    row_layout,
)
from ._launch import launch_groups
from ._op import define_op

# Activation name -> (its op over x's halves, the activation in torch for the gradient).
_TORCH_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda a: torch.nn.functional.gelu(a, approximate="tanh"),
}

_Plan = tuple[DType, RowLayout]


def _check_out(op: str, out: torch.Tensor | None, like: torch.Tensor, shape, why: str) -> None:
    if out is not None:
        check_tensor(op, "out", out)
        check_same(op, "out", out, "x" if op.endswith("_and_mul") else "gate", like)
        check_shape(op, "out", out, shape, why)
        check_unit_last_stride(op, "out", out)


def _launch(
    op: str, activation: str, plan: _Plan, gate: torch.Tensor, up: torch.Tensor, out
) -> None:
    dtype, layout = plan
    dim = out.shape[-1]
    out_strides = (
        layout.strides[2] if len(layout.strides) > 2 else contiguous_row_strides(layout, dim)
    )
    launch_groups(
        act_and_mul_spec(activation, dtype, dim, _runtime.tuning_of(out)),
        _runtime.queue_of(out),
        layout.rows,
        gate.data_ptr(),
        *layout.strides[0],
        up.data_ptr(),
        *layout.strides[1],
        out.data_ptr(),
        *out_strides,
        layout.middle_size,
        layout.inner_size,
    )


def _halves(x: torch.Tensor, gate_first: bool) -> tuple[torch.Tensor, torch.Tensor]:
    first, second = x.chunk(2, dim=-1)
    return (first, second) if gate_first else (second, first)


def _out_shape(x: torch.Tensor) -> tuple[int, ...]:
    return (*x.shape[:-1], x.shape[-1] // 2)


def _define(op: str, activation: str, doc: str) -> Callable[..., torch.Tensor]:
    """Registers sycl_kernels::<op> and <op>_out and returns the public function."""

    def check(
        x: torch.Tensor, gate_first: bool = True, out: torch.Tensor | None = None
    ) -> _Plan | None:
        check_tensor(op, "x", x)
        dtype = check_float_dtype(op, "x", x)
        if x.dim() == 0 or x.shape[-1] % 2:
            raise ValueError(
                f"{op}(): x has shape {tuple(x.shape)}; expected [..., 2 * d] "
                "(an even last dimension)"
            )
        check_unit_last_stride(op, "x", x)
        check_bool(op, "gate_first", gate_first)
        _check_out(op, out, x, _out_shape(x), "x.shape[:-1] + (x.shape[-1] // 2,)")
        if x.numel() == 0:
            return None
        gate, up = _halves(x, gate_first)
        rows = (("gate", gate, False), ("up", up, False))
        if out is not None:
            rows += (("out", out, True),)
        return dtype, row_layout(op, x.shape[-1] // 2, rows)

    def launch(plan: _Plan | None, x: torch.Tensor, gate_first: bool, out: torch.Tensor) -> None:
        if plan is not None:
            _launch(op, activation, plan, *_halves(x, gate_first), out)

    torch_activation = _TORCH_ACTIVATIONS[activation]

    def torch_form(x: torch.Tensor, gate_first: bool) -> torch.Tensor:
        gate, up = _halves(x.float(), gate_first)
        return (torch_activation(gate) * up).to(x.dtype)

    run = define_op(
        op,
        check,
        launch,
        new_output=lambda x, gate_first: x.new_empty(_out_shape(x)),
        torch_form=torch_form,
    )

    def public(
        x: torch.Tensor, out: torch.Tensor | None = None, *, gate_first: bool = True
    ) -> torch.Tensor:
        return run(x, gate_first, out)

    public.__name__ = public.__qualname__ = op
    public.__doc__ = doc + (
        "\n\n    x: [..., 2 * d] float32/float16/bfloat16, unit last stride, any other\n"
        "    strides; gate is x[..., :d] and up x[..., d:], or the other way round with\n"
        "    gate_first=False (diffusers' GEGLU and SwiGLU activate the second half).\n"
        "    out: optional [..., d], same dtype; None returns a new contiguous tensor.\n"
        "    Math in float, rounded once. Differentiable in x (not with out=)."
    )
    return public


def _act_and_mul_check(
    gate: torch.Tensor, up: torch.Tensor, activation: str, out: torch.Tensor | None = None
) -> _Plan | None:
    op = "act_and_mul"
    check_tensor(op, "gate", gate)
    check_tensor(op, "up", up)
    dtype = check_float_dtype(op, "gate", gate)
    check_same(op, "up", up, "gate", gate)
    if gate.dim() == 0:
        raise ValueError(f"{op}(): gate is a 0-d tensor; expected [..., d]")
    check_shape(op, "up", up, gate.shape, "gate.shape")
    check_unit_last_stride(op, "gate", gate)
    check_unit_last_stride(op, "up", up)
    if not isinstance(activation, str):
        raise TypeError(f"{op}(): activation must be a str, got {type(activation).__name__}")
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"{op}(): activation is {activation!r}; expected one of "
            f"{', '.join(map(repr, ACTIVATIONS))}"
        )
    _check_out(op, out, gate, gate.shape, "gate.shape")
    if gate.numel() == 0:
        return None
    rows = (("gate", gate, False), ("up", up, False))
    if out is not None:
        rows += (("out", out, True),)
    return dtype, row_layout(op, gate.shape[-1], rows)


def _act_and_mul_launch(plan, gate, up, activation, out) -> None:
    if plan is not None:
        _launch("act_and_mul", activation, plan, gate, up, out)


def _act_and_mul_form(gate: torch.Tensor, up: torch.Tensor, activation: str) -> torch.Tensor:
    return (_TORCH_ACTIVATIONS[activation](gate.float()) * up.float()).to(gate.dtype)


_act_and_mul = define_op(
    "act_and_mul",
    _act_and_mul_check,
    _act_and_mul_launch,
    new_output=lambda gate, up, activation: torch.empty_like(
        gate, memory_format=torch.contiguous_format
    ),
    torch_form=_act_and_mul_form,
)


def act_and_mul(
    gate: torch.Tensor,
    up: torch.Tensor,
    activation: str = "silu",
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """act(gate) * up for two tensors of one shape, e.g. a gated MLP's gate_proj(x) and up_proj(x).

    gate, up: [..., d] float32/float16/bfloat16, same dtype and device, unit last
    stride, any other strides. activation: "silu", "gelu" (erf, exact) or
    "gelu_tanh". out: optional [..., d]; None returns a new contiguous tensor.
    Math in float, rounded once. Differentiable in gate and up (not with out=).
    """
    return _act_and_mul(gate, up, activation, out)


silu_and_mul = _define(
    "silu_and_mul", "silu", "silu(gate) * up, silu(a) = a / (1 + exp(-a)), gate and up halves of x."
)
gelu_and_mul = _define(
    "gelu_and_mul", "gelu", "gelu(gate) * up, gelu with erf (exact), gate and up halves of x."
)
gelu_tanh_and_mul = _define(
    "gelu_tanh_and_mul",
    "gelu_tanh",
    "gelu(gate) * up, gelu with the tanh approximation, gate and up halves of x.",
)
