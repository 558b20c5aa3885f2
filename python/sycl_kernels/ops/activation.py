"""sycl_kernels.ops.activation: activations (kernels/activation/).

Gated, act(gate) * up (gated.hpp): the *_and_mul ops take gate and up as the two
halves of x's last dimension (swigluoai_and_mul: interleaved, gpt-oss's layout);
act_and_mul takes them as two tensors. All launch the one kernel. Elementwise,
act(x) (elementwise.hpp: that kernel's row loop with the gate alone): gelu_tanh
and gelu_quick.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from .. import _runtime
from .._dtypes import DType
from ..specs.activation import ACTIVATIONS, act_and_mul_spec, act_spec
from ..specs.spec import leading_row_values
from ._checks import (
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
from ._launch import Address, KernelBinding, Launch, bind_kernel, skip
from ._op import Op, op
from ._schema import Args

# Activation name -> the activation in torch, for the gradient.
_TORCH_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda a: torch.nn.functional.gelu(a, approximate="tanh"),
    "gelu_quick": lambda a: a * torch.sigmoid(1.702 * a),
}

_Plan = tuple[str, DType, RowLayout]


def _check_out(
    op: str, out: torch.Tensor, like: torch.Tensor, shape: tuple[int, ...], why: str
) -> tuple[int, ...]:
    """Checks out (not None) and returns its strides."""
    out_shape, out_strides = tensor_meta(op, "out", out)
    check_same(op, "out", out, "gate" if op == "act_and_mul" else "x", like)
    check_shape(op, "out", out_shape, shape, why)
    check_unit_last_stride(op, "out", out_shape, out_strides)
    return out_strides


def _bind_rows(
    plan: _Plan,
    like: torch.Tensor,
    dim: int,
    gate: Address,
    up: Address,
    *,
    interleaved: bool = False,
    **floats: float,
) -> KernelBinding:
    """act_and_mul's kernel on rows of `dim` laid out as plan's (gate's strides, up's,
    out's if given, else a new contiguous out's); floats: the activation's parameters."""
    activation, dtype, layout = plan
    gate_strides, up_strides, *given = layout.strides
    out_strides = given[0] if given else contiguous_row_strides(layout, dim)
    return bind_kernel(
        act_and_mul_spec(activation, dtype, dim, _runtime.tuning_of(like), interleaved),
        like,
        layout.rows,
        gate=gate,
        up=up,
        **leading_row_values("gate", gate_strides),
        **leading_row_values("up", up_strides),
        **leading_row_values("out", out_strides),
        middle_size=layout.middle_size,
        inner_size=layout.inner_size,
        **floats,
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


def _bind_halves(plan: _Plan | None, a: Args) -> KernelBinding | Launch:
    return _bind_halves_of(plan, a.x, a.gate_first)


def _bind_halves_of(
    plan: _Plan | None, x: torch.Tensor, gate_first: bool, **floats: float
) -> KernelBinding | Launch:
    """The *_and_mul ops' kernel: gate and up the halves of x's rows; floats: the
    activation's parameters."""
    if plan is None:
        return skip
    dim = x.shape[-1] // 2
    # gate and up are the halves of x's rows: addresses, not views (each costs ~1 us).
    half = dim * x.element_size()
    gate_offset, up_offset = (0, half) if gate_first else (half, 0)
    return _bind_rows(plan, x, dim, Address("x", gate_offset), Address("x", up_offset), **floats)


def _halves_output(a: Args) -> torch.Tensor:
    return a.x.new_empty(_out_shape(a.x.shape))


def _halves_form(activation: str, a: Args) -> torch.Tensor:
    """The *_and_mul ops' formula in torch (float32 math), for their gradient."""
    first, second = a.x.float().chunk(2, dim=-1)
    gate, up = (first, second) if a.gate_first else (second, first)
    return (_TORCH_ACTIVATIONS[activation](gate) * up).to(a.x.dtype)


_HALVES = """

    x: [..., 2 * d] float32/float16/bfloat16, unit last stride, any other strides;
    gate is x[..., :d] and up x[..., d:], or the other way round with
    gate_first=False (diffusers' GEGLU and SwiGLU activate the second half).
    out: optional [..., d], same dtype; None returns a new contiguous tensor.
    Math in float, rounded once. Differentiable in x (not with out=)."""


def _halves_op(name: str, activation: str, summary: str) -> Op:
    """An act(gate) * up op on the halves of x: the three have one signature."""

    def check(
        x: torch.Tensor, out: torch.Tensor | None = None, *, gate_first: bool = True
    ) -> _Plan | None:
        return _check_halves(name, activation, x, out, gate_first)

    check.__name__, check.__doc__ = name, summary + _HALVES
    torch_form = functools.partial(_halves_form, activation)
    return op(bind=_bind_halves, new_output=_halves_output, torch_form=torch_form)(check)


silu_and_mul = _halves_op(
    "silu_and_mul", "silu", "silu(gate) * up, silu(a) = a / (1 + exp(-a)), gate and up halves of x."
)
gelu_and_mul = _halves_op(
    "gelu_and_mul", "gelu", "gelu(gate) * up, gelu with erf (exact), gate and up halves of x."
)
gelu_tanh_and_mul = _halves_op(
    "gelu_tanh_and_mul",
    "gelu_tanh",
    "gelu(gate) * up, gelu with the tanh approximation, gate and up halves of x.",
)


def _bind_fatrelu(plan: _Plan | None, a: Args) -> KernelBinding | Launch:
    return _bind_halves_of(plan, a.x, True, threshold=float(a.threshold))


def _fatrelu_form(a: Args) -> torch.Tensor:
    gate, up = a.x.float().chunk(2, dim=-1)
    return (torch.where(gate > a.threshold, gate, 0.0) * up).to(a.x.dtype)


@op(bind=_bind_fatrelu, new_output=_halves_output, torch_form=_fatrelu_form)
def fatrelu_and_mul(
    x: torch.Tensor, threshold: float = 0.0, out: torch.Tensor | None = None
) -> _Plan | None:
    """(gate if gate > threshold else 0) * up, gate and up halves of x (vLLM's fatrelu_and_mul).

    x: [..., 2 * d] float32/float16/bfloat16, unit last stride, any other strides;
    gate is x[..., :d], up x[..., d:]. threshold: a real number (not NaN), taken
    as a float32; the comparison is vLLM's kernel's, gate > threshold, so a gate
    equal to it, or NaN, counts as 0.
    out: optional [..., d], same dtype; None returns a new contiguous tensor.
    Exact but for the product's one rounding. Differentiable in x (not with out=).
    """
    name = "fatrelu_and_mul"
    check_number(name, "threshold", threshold)
    return _check_halves(name, "fatrelu", x, out, True)


def _bind_swigluoai(plan: _Plan | None, a: Args) -> KernelBinding | Launch:
    if plan is None:
        return skip
    # gate and up alternate in x's rows: up starts one element past gate.
    return _bind_rows(
        plan,
        a.x,
        a.x.shape[-1] // 2,
        Address("x"),
        Address("x", a.x.element_size()),
        interleaved=True,
        alpha=float(a.alpha),
        limit=float(a.limit),
    )


def _swigluoai_form(a: Args) -> torch.Tensor:
    x32, limit = a.x.float(), a.limit
    gate, up = x32[..., 0::2].clamp(max=limit), x32[..., 1::2].clamp(-limit, limit)
    return ((up + 1) * gate * torch.sigmoid(a.alpha * gate)).to(a.x.dtype)


@op(bind=_bind_swigluoai, new_output=_halves_output, torch_form=_swigluoai_form)
def swigluoai_and_mul(
    x: torch.Tensor, alpha: float = 1.702, limit: float = 7.0, out: torch.Tensor | None = None
) -> _Plan | None:
    """gpt-oss's clamped SwiGLU (vLLM's swigluoai_and_mul), gate and up interleaved in x.

    gate = x[..., 0::2] clamped to at most limit, up = x[..., 1::2] clamped to
    [-limit, limit]; out = (up + 1) * gate * sigmoid(alpha * gate).
    x: [..., 2 * d] float32/float16/bfloat16, unit last stride, any other strides.
    alpha: a real number; limit: a real number >= 0 (neither NaN).
    out: optional [..., d], same dtype; None returns a new contiguous tensor.
    Math in float, rounded once. Differentiable in x (not with out=).
    """
    name = "swigluoai_and_mul"
    check_number(name, "alpha", alpha)
    check_number(name, "limit", limit, minimum=0.0)
    return _check_halves(name, "swigluoai", x, out, True)


def _bind_act_and_mul(plan: _Plan | None, a: Args) -> KernelBinding | Launch:
    if plan is None:
        return skip
    return _bind_rows(plan, a.gate, a.gate.shape[-1], Address("gate"), Address("up"))


def _act_and_mul_form(a: Args) -> torch.Tensor:
    activation = _TORCH_ACTIVATIONS[a.activation]
    return (activation(a.gate.float()) * a.up.float()).to(a.gate.dtype)


def _like_gate(a: Args) -> torch.Tensor:
    return torch.empty_like(a.gate, memory_format=torch.contiguous_format)


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


# Elementwise activations, out = act(x).


def _check_elementwise(
    op: str, activation: str, x: torch.Tensor, out: torch.Tensor | None
) -> _Plan | None:
    shape, strides = tensor_meta(op, "x", x)
    dtype = check_float_dtype(op, "x", x)
    if not shape:
        raise ValueError(f"{op}(): x is a 0-d tensor; expected [..., d]")
    check_unit_last_stride(op, "x", shape, strides)
    rows: RowEntries = (("x", strides, False),)
    if out is not None:
        rows += (("out", _check_out(op, out, x, shape, "x.shape"), True),)
    if x.numel() == 0:
        return None
    return activation, dtype, row_layout(op, shape[-1], shape, rows)


def _bind_elementwise(plan: _Plan | None, a: Args) -> KernelBinding | Launch:
    if plan is None:
        return skip
    activation, dtype, layout = plan
    x = a.x
    dim = x.shape[-1]
    x_strides, *given = layout.strides
    out_strides = given[0] if given else contiguous_row_strides(layout, dim)
    return bind_kernel(
        act_spec(activation, dtype, dim, _runtime.tuning_of(x)),
        x,
        layout.rows,
        **leading_row_values("x", x_strides),
        **leading_row_values("out", out_strides),
        middle_size=layout.middle_size,
        inner_size=layout.inner_size,
    )


def _like_x(a: Args) -> torch.Tensor:
    return torch.empty_like(a.x, memory_format=torch.contiguous_format)


def _elementwise_form(activation: str, a: Args) -> torch.Tensor:
    return _TORCH_ACTIVATIONS[activation](a.x.float()).to(a.x.dtype)


_ELEMENTWISE = """

    x: [..., d] float32/float16/bfloat16, unit last stride, any other strides.
    out: optional, x's shape and dtype (x itself too); None returns a new contiguous
    tensor. Math in float, rounded once. Differentiable in x (not with out=)."""


def _elementwise_op(name: str, summary: str) -> Op:
    """An element-wise activation op (its name the activation's): one signature."""

    def check(x: torch.Tensor, out: torch.Tensor | None = None) -> _Plan | None:
        return _check_elementwise(name, name, x, out)

    check.__name__, check.__doc__ = name, summary + _ELEMENTWISE
    torch_form = functools.partial(_elementwise_form, name)
    return op(bind=_bind_elementwise, new_output=_like_x, torch_form=torch_form)(check)


gelu_tanh = _elementwise_op(
    "gelu_tanh",
    "gelu(x) with the tanh approximation, 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + "
    "0.044715 * x^3))): torch's gelu(approximate='tanh'), Hugging Face's and vLLM's "
    "gelu_new and gelu_fast (one function, written two ways).",
)
gelu_quick = _elementwise_op(
    "gelu_quick", "x * sigmoid(1.702 * x), vLLM's and Hugging Face's gelu_quick."
)
