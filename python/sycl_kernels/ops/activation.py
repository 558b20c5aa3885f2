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
from ._launch import Launch, bind_kernel, skip
from ._op import define_op

# Activation name -> (its op over x's halves, the activation in torch for the gradient).
_TORCH_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda a: torch.nn.functional.gelu(a, approximate="tanh"),
}

_Plan = tuple[DType, RowLayout]


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
    activation: str, plan: _Plan, like: torch.Tensor, dim: int
) -> Callable[[int, int, int], None]:
    """act_and_mul's kernel on rows of `dim` laid out as plan's (gate's strides, up's,
    out's if given, else a new contiguous out's), as a function of gate's, up's and
    out's addresses."""
    dtype, layout = plan
    gate_strides, up_strides, *given = layout.strides
    out_strides = given[0] if given else contiguous_row_strides(layout, dim)
    sizes = (layout.middle_size, layout.inner_size)
    kernel = bind_kernel(
        act_and_mul_spec(activation, dtype, dim, _runtime.tuning_of(like)), like, layout.rows
    )

    def launch(gate_address: int, up_address: int, out_address: int) -> None:
        kernel(
            gate_address,
            *gate_strides,
            up_address,
            *up_strides,
            out_address,
            *out_strides,
            *sizes,
        )

    return launch


def _out_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The output shape of x of `shape` = [..., 2 * d]: [..., d]."""
    return (*shape[:-1], shape[-1] // 2)


def _define(op: str, activation: str, doc: str) -> Callable[..., torch.Tensor]:
    """Registers sycl_kernels::<op> and <op>_out and returns the public function."""

    def check(
        x: torch.Tensor, gate_first: bool = True, out: torch.Tensor | None = None
    ) -> _Plan | None:
        shape, strides = tensor_meta(op, "x", x)
        dtype = check_float_dtype(op, "x", x)
        if not shape or shape[-1] % 2:
            raise ValueError(
                f"{op}(): x has shape {tuple(shape)}; expected [..., 2 * d] "
                "(an even last dimension)"
            )
        check_unit_last_stride(op, "x", shape, strides)
        check_bool(op, "gate_first", gate_first)
        out_shape = _out_shape(shape)
        # gate and up, the halves of x's rows, have x's strides.
        rows: RowEntries = (
            ("gate", strides, False),
            ("up", strides, False),
        )
        if out is not None:
            out_strides = _check_out(op, out, x, out_shape, "x.shape[:-1] + (x.shape[-1] // 2,)")
            rows += (("out", out_strides, True),)
        if x.numel() == 0:
            return None
        return dtype, row_layout(op, out_shape[-1], out_shape, rows)

    def bind(plan: _Plan | None, x: torch.Tensor, gate_first: bool, out=None) -> Launch:
        if plan is None:
            return skip
        dim = x.shape[-1] // 2
        rows = _bind_rows(activation, plan, x, dim)
        # gate and up are the halves of x's rows: addresses, not views (each costs ~1 us).
        half = dim * x.element_size()
        gate_offset, up_offset = (0, half) if gate_first else (half, 0)

        def launch(x: torch.Tensor, gate_first: bool, out: torch.Tensor) -> None:
            first = x.data_ptr()
            rows(first + gate_offset, first + up_offset, out.data_ptr())

        return launch

    torch_activation = _TORCH_ACTIVATIONS[activation]

    def torch_form(x: torch.Tensor, gate_first: bool) -> torch.Tensor:
        first, second = x.float().chunk(2, dim=-1)
        gate, up = (first, second) if gate_first else (second, first)
        return (torch_activation(gate) * up).to(x.dtype)

    run = define_op(
        op,
        check,
        bind,
        new_output=lambda x, gate_first: x.new_empty(_out_shape(x.shape)),
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
    shape, gate_strides = tensor_meta(op, "gate", gate)
    up_shape, up_strides = tensor_meta(op, "up", up)
    dtype = check_float_dtype(op, "gate", gate)
    check_same(op, "up", up, "gate", gate)
    if not shape:
        raise ValueError(f"{op}(): gate is a 0-d tensor; expected [..., d]")
    check_shape(op, "up", up_shape, shape, "gate.shape")
    check_unit_last_stride(op, "gate", shape, gate_strides)
    check_unit_last_stride(op, "up", up_shape, up_strides)
    if not isinstance(activation, str):
        raise TypeError(f"{op}(): activation must be a str, got {type(activation).__name__}")
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"{op}(): activation is {activation!r}; expected one of "
            f"{', '.join(map(repr, ACTIVATIONS))}"
        )
    rows: RowEntries = (
        ("gate", gate_strides, False),
        ("up", up_strides, False),
    )
    if out is not None:
        rows += (("out", _check_out(op, out, gate, shape, "gate.shape"), True),)
    if gate.numel() == 0:
        return None
    return dtype, row_layout(op, shape[-1], shape, rows)


def _act_and_mul_bind(plan, gate, up, activation, out=None) -> Launch:
    if plan is None:
        return skip
    rows = _bind_rows(activation, plan, gate, gate.shape[-1])

    def launch(gate, up, activation, out) -> None:
        rows(gate.data_ptr(), up.data_ptr(), out.data_ptr())

    return launch


def _act_and_mul_form(gate: torch.Tensor, up: torch.Tensor, activation: str) -> torch.Tensor:
    return (_TORCH_ACTIVATIONS[activation](gate.float()) * up.float()).to(gate.dtype)


_act_and_mul = define_op(
    "act_and_mul",
    _act_and_mul_check,
    _act_and_mul_bind,
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
