"""sycl_kernels.ops.activation: gated activations, act(gate) * up (kernels/activation/gated.hpp).

The *_and_mul ops take gate and up as the two halves of x's last dimension;
act_and_mul takes them as two tensors. All launch the one kernel.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from .. import _runtime
from .._dtypes import DType
from ..specs.activation import ACTIVATIONS, act_and_mul_spec
from ..specs.spec import leading_row_values
from ._checks import (
    RowEntries,
    RowLayout,
    check_bool,
    check_float_dtype,
    check_same,
    check_shape,
    check_unit_last_stride,
    contiguous_row_strides,
    row_layout,
    tensor_meta,
)
from ._launch import Address, KernelBinding, Launch, bind_kernel, skip
from ._op import op

# Activation name -> the activation in torch, for the gradient.
_TORCH_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda a: torch.nn.functional.gelu(a, approximate="tanh"),
}

_Plan = tuple[str, DType, RowLayout]


def _check_out(
    op: str, out: torch.Tensor, like: torch.Tensor, shape: tuple[int, ...], why: str
) -> tuple[int, ...]:
    """Checks out (not None) and returns its strides."""
    out_shape, out_strides = tensor_meta(op, "out", out)
    check_same(op, "out", out, "x" if op.endswith("_and_mul") else "gate", like)
    check_shape(op, "out", out_shape, shape, why)
    check_unit_last_stride(op, "out", out_shape, out_strides)
    return out_strides


def _bind_rows(
    plan: _Plan, like: torch.Tensor, dim: int, gate: Address, up: Address
) -> KernelBinding:
    """act_and_mul's kernel on rows of `dim` laid out as plan's (gate's strides, up's,
    out's if given, else a new contiguous out's)."""
    activation, dtype, layout = plan
    gate_strides, up_strides, *given = layout.strides
    out_strides = given[0] if given else contiguous_row_strides(layout, dim)
    return bind_kernel(
        act_and_mul_spec(activation, dtype, dim, _runtime.tuning_of(like)),
        like,
        layout.rows,
        gate=gate,
        up=up,
        **leading_row_values("gate", gate_strides),
        **leading_row_values("up", up_strides),
        **leading_row_values("out", out_strides),
        middle_size=layout.middle_size,
        inner_size=layout.inner_size,
    )


def _out_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The output shape of x of `shape` = [..., 2 * d]: [..., d]."""
    return (*shape[:-1], shape[-1] // 2)


def _check_halves(
    op: str, activation: str, x: torch.Tensor, out: torch.Tensor | None, gate_first: bool
) -> _Plan | None:
    shape, strides = tensor_meta(op, "x", x)
    dtype = check_float_dtype(op, "x", x)
    if not shape or shape[-1] % 2:
        raise ValueError(
            f"{op}(): x has shape {tuple(shape)}; expected [..., 2 * d] (an even last dimension)"
        )
    check_unit_last_stride(op, "x", shape, strides)
    check_bool(op, "gate_first", gate_first)
    out_shape = _out_shape(shape)
    # gate and up, the halves of x's rows, have x's strides.
    rows: RowEntries = (("gate", strides, False), ("up", strides, False))
    if out is not None:
        out_strides = _check_out(op, out, x, out_shape, "x.shape[:-1] + (x.shape[-1] // 2,)")
        rows += (("out", out_strides, True),)
    if x.numel() == 0:
        return None
    return activation, dtype, row_layout(op, out_shape[-1], out_shape, rows)


def _bind_halves(
    plan: _Plan | None, x: torch.Tensor, gate_first: bool, out=None
) -> KernelBinding | Launch:
    if plan is None:
        return skip
    dim = x.shape[-1] // 2
    # gate and up are the halves of x's rows: addresses, not views (each costs ~1 us).
    half = dim * x.element_size()
    gate_offset, up_offset = (0, half) if gate_first else (half, 0)
    return _bind_rows(plan, x, dim, Address("x", gate_offset), Address("x", up_offset))


def _halves_output(x: torch.Tensor, *_: object) -> torch.Tensor:
    return x.new_empty(_out_shape(x.shape))


def _halves_form(activation: str, x: torch.Tensor, gate_first: bool) -> torch.Tensor:
    """The *_and_mul ops' formula in torch (float32 math), for their gradient."""
    first, second = x.float().chunk(2, dim=-1)
    gate, up = (first, second) if gate_first else (second, first)
    return (_TORCH_ACTIVATIONS[activation](gate) * up).to(x.dtype)


_HALVES = """

    x: [..., 2 * d] float32/float16/bfloat16, unit last stride, any other strides;
    gate is x[..., :d] and up x[..., d:], or the other way round with
    gate_first=False (diffusers' GEGLU and SwiGLU activate the second half).
    out: optional [..., d], same dtype; None returns a new contiguous tensor.
    Math in float, rounded once. Differentiable in x (not with out=)."""


@op(
    bind=_bind_halves,
    new_output=_halves_output,
    torch_form=functools.partial(_halves_form, "silu"),
)
def silu_and_mul(
    x: torch.Tensor, out: torch.Tensor | None = None, *, gate_first: bool = True
) -> _Plan | None:
    return _check_halves("silu_and_mul", "silu", x, out, gate_first)


@op(
    bind=_bind_halves,
    new_output=_halves_output,
    torch_form=functools.partial(_halves_form, "gelu"),
)
def gelu_and_mul(
    x: torch.Tensor, out: torch.Tensor | None = None, *, gate_first: bool = True
) -> _Plan | None:
    return _check_halves("gelu_and_mul", "gelu", x, out, gate_first)


@op(
    bind=_bind_halves,
    new_output=_halves_output,
    torch_form=functools.partial(_halves_form, "gelu_tanh"),
)
def gelu_tanh_and_mul(
    x: torch.Tensor, out: torch.Tensor | None = None, *, gate_first: bool = True
) -> _Plan | None:
    return _check_halves("gelu_tanh_and_mul", "gelu_tanh", x, out, gate_first)


silu_and_mul.__doc__ = (
    "silu(gate) * up, silu(a) = a / (1 + exp(-a)), gate and up halves of x." + _HALVES
)
gelu_and_mul.__doc__ = "gelu(gate) * up, gelu with erf (exact), gate and up halves of x." + _HALVES
gelu_tanh_and_mul.__doc__ = (
    "gelu(gate) * up, gelu with the tanh approximation, gate and up halves of x." + _HALVES
)


def _bind_act_and_mul(
    plan: _Plan | None, gate: torch.Tensor, up, activation: str, out=None
) -> KernelBinding | Launch:
    if plan is None:
        return skip
    return _bind_rows(plan, gate, gate.shape[-1], Address("gate"), Address("up"))


def _act_and_mul_form(gate: torch.Tensor, up: torch.Tensor, activation: str) -> torch.Tensor:
    return (_TORCH_ACTIVATIONS[activation](gate.float()) * up.float()).to(gate.dtype)


def _like_gate(gate: torch.Tensor, *_: object) -> torch.Tensor:
    return torch.empty_like(gate, memory_format=torch.contiguous_format)


@op(bind=_bind_act_and_mul, new_output=_like_gate, torch_form=_act_and_mul_form)
def act_and_mul(
    gate: torch.Tensor,
    up: torch.Tensor,
    activation: str = "silu",
    out: torch.Tensor | None = None,
) -> _Plan | None:
    """act(gate) * up for two tensors of one shape, e.g. a gated MLP's gate_proj(x) and up_proj(x).

    gate, up: [..., d] float32/float16/bfloat16, same dtype and device, unit last
    stride, any other strides. activation: "silu", "gelu" (erf, exact) or
    "gelu_tanh". out: optional [..., d]; None returns a new contiguous tensor.
    Math in float, rounded once. Differentiable in gate and up (not with out=).
    """
    name = "act_and_mul"
    shape, gate_strides = tensor_meta(name, "gate", gate)
    up_shape, up_strides = tensor_meta(name, "up", up)
    dtype = check_float_dtype(name, "gate", gate)
    check_same(name, "up", up, "gate", gate)
    if not shape:
        raise ValueError(f"{name}(): gate is a 0-d tensor; expected [..., d]")
    check_shape(name, "up", up_shape, shape, "gate.shape")
    check_unit_last_stride(name, "gate", shape, gate_strides)
    check_unit_last_stride(name, "up", up_shape, up_strides)
    if not isinstance(activation, str):
        raise TypeError(f"{name}(): activation must be a str, got {type(activation).__name__}")
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"{name}(): activation is {activation!r}; expected one of "
            f"{', '.join(map(repr, ACTIVATIONS))}"
        )
    rows: RowEntries = (("gate", gate_strides, False), ("up", up_strides, False))
    if out is not None:
        rows += (("out", _check_out(name, out, gate, shape, "gate.shape"), True),)
    if gate.numel() == 0:
        return None
    return activation, dtype, row_layout(name, shape[-1], shape, rows)
