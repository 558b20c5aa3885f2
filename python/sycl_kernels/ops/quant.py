"""sycl_kernels.ops.quant: quantization to fp8 (e4m3fn) and int8, alone or as a norm or a
gated activation writes its output (kernels/quant/quantize.hpp).

One family: the values of a row (x itself, rmsnorm(x) or of x + residual, silu(gate) *
up) are quantized in groups of G consecutive values of the row, each group with a
float32 scale s, q = saturate(round(v * (1 / s))), the reciprocal taken once a group in
float32 (a scale of 0 quantizes every finite value to 0; below 2^-126, where 1 / s may
overflow, v and s are both scaled by 2^32 first, so 0 stays 0 and the rest round and
saturate as v / s does). Rows have at most 2^30 values (MAX_HIDDEN).

- Static ops (``quantize``, ``rmsnorm_quantize``, ``silu_and_mul_quantize``) take s:
  one element for the tensor, ``[..., G']`` for each row's G' groups (G' = 1: per
  row), or for 2-D x a ``[R, G']`` block grid (each scale shared by rows / R rows).
- Dynamic ops compute it per row (``group_size=None``) or per group of
  ``group_size`` (a multiple of 16), and return it: s = max(min(absmax, scale_ub) / qmax, scale_min)
  (absmax ignores NaN; qmax is 448 for fp8, 127 for int8; scale_min by default
  1 / (qmax * 512), vLLM's), rounded up to a power of two with ``ue8m0``.
  ``dynamic_quantize_per_tensor`` takes the absolute maximum of the whole tensor in
  a first kernel, then quantizes in a second. No values (an empty x, a row of none):
  each scale is the formula's for an absolute maximum of 0, given ``scales`` too.

Rounding: fp8 to nearest even as torch's cast, saturating at +-448 (torch's cast
makes NaN of what exceeds it); NaN stays NaN. int8 to nearest even (``truncate``:
toward zero), clamped to [-128, 127]; NaN becomes 0. An infinite value makes its
group's dynamic scale infinite: its other values become 0 and it becomes NaN (fp8)
or 0 (int8); with a finite ``scale_ub`` it saturates instead.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch

from .. import _runtime
from .._dtypes import QUANT_DTYPE_NAMES, QUANT_DTYPES, DType, QuantDType
from ..specs.quant import GROUP_LANES, Producer, absmax_scale_spec, quantize_spec
from ..specs.spec import leading_row_values
from ._checks import (
    RowEntries,
    RowLayout,
    check_bool,
    check_float_dtype,
    check_int,
    check_number,
    check_own_memory,
    check_same,
    check_same_device,
    check_shape,
    check_tensor,
    check_unit_last_stride,
    contiguous_row_strides,
    row_layout,
    tensor_meta,
)
from ._launch import Address, KernelBinding, Launch, TorchLaunch, bind_kernel, skip
from ._op import op
from ._schema import Args
from .norm import check_weight

_BY_TORCH: dict[torch.dtype, QuantDType] = {d.torch_dtype: d for d in QUANT_DTYPES}

# 1 / (qmax * 512) in float32, as vLLM's kernels compute their minimum scale.
DEFAULT_SCALE_MIN: dict[torch.dtype, float] = {
    d.torch_dtype: (torch.tensor(1.0) / (d.max * 512)).item() for d in QUANT_DTYPES
}


# The longest row a kernel takes: its element indices, and a work-group's steps past
# them, are int (kernels/common/loop.hpp).
MAX_HIDDEN = 2**30


class ScaleLayout(NamedTuple):
    """Where the scales of row r, group g are: scales + (r // rows_per_scale) *
    row_stride + g * group_stride (kernels/quant/quantize.hpp ScaleLayout)."""

    group: int
    rows_per_scale: int
    row_stride: int
    group_stride: int


class Plan(NamedTuple):
    producer: Producer
    dtype: DType
    qdtype: QuantDType
    hidden: int
    dynamic: bool
    ue8m0: bool
    truncate: bool
    rounded: bool
    weight: str
    rows: RowLayout
    scales: ScaleLayout
    out_given: bool


def _check_dtype(op: str, dtype: object, truncate: bool) -> QuantDType:
    qdtype = _BY_TORCH.get(dtype) if isinstance(dtype, torch.dtype) else None
    if qdtype is None:
        raise TypeError(f"{op}(): dtype is {dtype!r}; expected one of {QUANT_DTYPE_NAMES}")
    check_bool(op, "truncate", truncate)
    if truncate and qdtype.short_name != "i8":
        raise ValueError(f"{op}(): truncate=True rounds int8 only; dtype is {dtype}")
    return qdtype


def _check_out(
    op: str,
    out: torch.Tensor | None,
    qdtype: QuantDType,
    like: torch.Tensor,
    shape: tuple,
    why: str,
) -> tuple[int, ...] | None:
    if out is None:
        return None
    out_shape, strides = tensor_meta(op, "out", out)
    check_same_device(op, "out", out, "x", like)
    if out.dtype != qdtype.torch_dtype:
        raise TypeError(f"{op}(): out has dtype {out.dtype}; expected dtype {qdtype.torch_dtype}")
    check_shape(op, "out", out_shape, shape, why)
    check_unit_last_stride(op, "out", out_shape, strides)
    return strides


def _check_scale_tensor(op: str, name: str, t: torch.Tensor, like: torch.Tensor) -> None:
    check_tensor(op, name, t)
    if t.dtype != torch.float32:
        raise TypeError(f"{op}(): {name} has dtype {t.dtype}; expected torch.float32")
    check_same_device(op, name, t, "x", like)


def _row_stride(op: str, name: str, shape: tuple, strides: tuple) -> int:
    """The one stride of the leading dimensions of `shape` (rows in order), or refused."""
    row_stride, extent = None, 1
    for size, stride in zip(reversed(shape[:-1]), reversed(strides[:-1]), strict=True):
        if size == 1:
            continue
        if row_stride is None:
            row_stride = stride
        elif stride != row_stride * extent:
            raise ValueError(
                f"{op}(): {name} has shape {tuple(shape)} and strides {tuple(strides)}; its "
                "leading dimensions must step by one stride (call .contiguous())"
            )
        extent *= size
    return 0 if row_stride is None else row_stride


def _static_scales(
    op: str, scale: torch.Tensor, x: torch.Tensor, lead: tuple, hidden: int
) -> ScaleLayout:
    """The layout of a given (static) scale for rows `lead` of `hidden` values."""
    _check_scale_tensor(op, "scale", scale, x)
    shape, strides = scale.shape, scale.stride()
    if scale.numel() == 1:
        return ScaleLayout(hidden, 1, 0, 0)
    expected = "one element, [..., G] with x's leading dimensions, or [R, G] for 2-D x"
    if len(shape) == 2 and len(lead) == 1 and shape[0] != lead[0]:
        blocks, groups = shape
        if blocks and groups and lead[0] % blocks == 0 and hidden % groups == 0:
            return ScaleLayout(hidden // groups, lead[0] // blocks, strides[0], strides[1])
        raise ValueError(
            f"{op}(): scale has shape {tuple(shape)}; as blocks of x of shape "
            f"{(*lead, hidden)} its sizes must divide {lead[0]} and {hidden} ({expected})"
        )
    if len(shape) == len(lead) + 1 and tuple(shape[:-1]) == tuple(lead):
        groups = shape[-1]
        if groups and hidden % groups == 0:
            return ScaleLayout(
                hidden // groups, 1, _row_stride(op, "scale", shape, strides), strides[-1]
            )
    raise ValueError(f"{op}(): scale has shape {tuple(shape)}; expected {expected}")


class _Dynamic(NamedTuple):
    """A dynamic op's scale options, named as its parameters."""

    group_size: int | None
    scale_ub: torch.Tensor | None
    scale_min: float | None
    ue8m0: bool
    column_major_scales: bool
    scales: torch.Tensor | None


def _check_dynamic(
    op: str, x: torch.Tensor, lead: tuple, hidden: int, options: _Dynamic
) -> ScaleLayout:
    """Checks a dynamic op's scale options; the layout of its scales."""
    group_size, scale_ub, scale_min, ue8m0, column_major_scales, scales = options
    if group_size is None:
        group = hidden
    else:
        check_int(op, "group_size", group_size, minimum=1)
        if hidden % group_size:
            raise ValueError(
                f"{op}(): the rows have {hidden} values, not a multiple of group_size {group_size}"
            )
        if group_size < hidden and group_size % GROUP_LANES:
            raise ValueError(
                f"{op}(): group_size is {group_size}; expected a multiple of {GROUP_LANES} "
                "(or the whole row)"
            )
        group = group_size
    if scale_ub is not None:
        _check_scale_tensor(op, "scale_ub", scale_ub, x)
        if scale_ub.numel() != 1:
            raise ValueError(
                f"{op}(): scale_ub has {scale_ub.numel()} elements; expected one (a bound on "
                "the absolute maximum)"
            )
    if scale_min is not None:
        check_number(op, "scale_min", scale_min, minimum=0)
    check_bool(op, "ue8m0", ue8m0)
    check_bool(op, "column_major_scales", column_major_scales)
    # group_size None: one scale a row, a row of no values too.
    groups = 1 if group_size is None else hidden // group
    rows = 1
    for size in lead:
        rows *= size
    if scales is None:
        if column_major_scales:
            return ScaleLayout(group, 1, 1, rows)
        return ScaleLayout(group, 1, groups, 1)
    _check_scale_tensor(op, "scales", scales, x)
    shape, strides = scales.shape, scales.stride()
    check_shape(op, "scales", shape, (*lead, groups), f"x's leading dimensions and {groups} groups")
    check_own_memory(op, "scales", scales)
    return ScaleLayout(group, 1, _row_stride(op, "scales", shape, strides), strides[-1])


def _new_scales(x: torch.Tensor, lead: tuple, groups: int, column_major: bool) -> torch.Tensor:
    if column_major:
        return torch.empty((groups, *lead), dtype=torch.float32, device=x.device).movedim(0, -1)
    return torch.empty((*lead, groups), dtype=torch.float32, device=x.device)


class _Rows(NamedTuple):
    """What a quantizing op's rows are made from, as its producer's checks found it."""

    producer: Producer
    lead: tuple
    hidden: int
    entries: RowEntries
    weight: str = "dtype"


def _plan(
    op: str,
    rows: _Rows,
    x: torch.Tensor,
    dtype: object,
    truncate: bool,
    out: torch.Tensor | None,
    scale: torch.Tensor | _Dynamic,
    rounded: bool = True,
) -> Plan | None:
    """The plan of every op quantizing with a given scale (a tensor) or computing its
    scales (the dynamic options)."""
    qdtype = _check_dtype(op, dtype, truncate)
    if isinstance(scale, _Dynamic):
        layout = _check_dynamic(op, x, rows.lead, rows.hidden, scale)
        return _row_plan(op, rows, x, qdtype, out, layout, True, scale.ue8m0, truncate, rounded)
    layout = _static_scales(op, scale, x, rows.lead, rows.hidden)
    return _row_plan(op, rows, x, qdtype, out, layout, False, False, truncate, rounded)


def _row_plan(
    op: str,
    rows: _Rows,
    x: torch.Tensor,
    qdtype: QuantDType,
    out: torch.Tensor | None,
    scales: ScaleLayout,
    dynamic: bool,
    ue8m0: bool = False,
    truncate: bool = False,
    rounded: bool = True,
) -> Plan | None:
    hidden, entries = rows.hidden, rows.entries
    dtype = check_float_dtype(op, "x", x)
    if hidden > MAX_HIDDEN:
        raise ValueError(
            f"{op}(): x makes rows of {hidden} values to quantize; expected at most {MAX_HIDDEN}"
        )
    lead = tuple(x.shape[:-1])
    shape = (*lead, hidden)
    out_strides = _check_out(op, out, qdtype, x, shape, f"{(*lead, hidden)}")
    if out_strides is not None:
        entries += (("out", out_strides, True),)
    if x.numel() == 0:
        return None
    return Plan(
        rows.producer,
        dtype,
        qdtype,
        hidden,
        dynamic,
        ue8m0,
        truncate,
        rounded,
        rows.weight,
        row_layout(op, hidden, shape, entries),
        scales,
        out_strides is not None,
    )


def _producer_inputs(plan: Plan, a: Args) -> dict[str, object]:
    """The values a quantizing kernel reads its rows with, by its producer: x's strides;
    the norm's residual strides (none without residual) and eps; or the addresses and
    strides of gate and up, the halves of x's rows."""
    strides = plan.rows.strides
    if plan.producer is Producer.SILU_AND_MUL:
        return {
            "gate": Address("x"),
            "up": Address("x", plan.hidden * a.x.element_size()),
            **leading_row_values("gate", strides[0]),
            **leading_row_values("up", strides[0]),
        }
    inputs = leading_row_values("x", strides[0])
    if plan.producer.normalizes:
        fused = plan.producer is Producer.FUSED_ADD_RMSNORM
        inputs |= leading_row_values("residual", strides[1] if fused else (0, 0, 0))
        inputs["eps"] = float(a.eps)
    return inputs


def _bind_kernel(plan: Plan, a: Args, scale_min: float | None, **inputs: object) -> KernelBinding:
    """The quantizing kernel of `plan` with its row and scale values; `inputs`: the
    scale parameters a static kernel binds instead."""
    rows = plan.rows
    out_strides = rows.strides[-1] if plan.out_given else contiguous_row_strides(rows, plan.hidden)
    spec = quantize_spec(
        plan.producer,
        plan.dtype,
        plan.qdtype,
        plan.hidden,
        plan.scales.group,
        _runtime.tuning_of(a.x),
        plan.dynamic,
        plan.ue8m0,
        plan.truncate,
        plan.weight,
        plan.rounded,
    )
    if scale_min is None:
        scale_min = DEFAULT_SCALE_MIN[plan.qdtype.torch_dtype]
    return bind_kernel(
        spec,
        a.x,
        rows.rows,
        **_producer_inputs(plan, a),
        **inputs,
        **leading_row_values("out", out_strides),
        rows_per_scale=plan.scales.rows_per_scale,
        scale_row_stride=plan.scales.row_stride,
        scale_group_stride=plan.scales.group_stride,
        scale_min=float(scale_min),
        middle_size=rows.middle_size,
        inner_size=rows.inner_size,
    )


# A static kernel reads neither scale_ub nor scale_min (kernels/quant/quantize.hpp); they
# are bound to the scale it does read.
_STATIC = {"scales": Address("scale"), "scale_ub": Address("scale")}


def _bind_static(plan: Plan | None, a: Args) -> KernelBinding | Launch:
    """The launch of every op quantizing with a given scale (`scale`)."""
    if plan is None:
        return skip
    return _bind_kernel(plan, a, 0.0, **_STATIC)


def _bind_dynamic(plan: Plan | None, a: Args) -> KernelBinding | Launch:
    """The launch of every op computing its scales per row or group (`scales`)."""
    if plan is None:
        return _no_values(a)
    return _bind_kernel(plan, a, a.scale_min)


def _empty_scale(scale_min: float, ue8m0: bool) -> float:
    """The dynamic scale of no values, as the kernels' formula gives it for an absolute
    maximum of 0: scale_min in float32 (min(0, scale_ub) / qmax is at most 0, scale_min
    at least 0), with ue8m0 rounded up to a power of two, at least 2^-126."""
    scale = torch.tensor(scale_min, dtype=torch.float32).item()
    if not ue8m0 or math.isinf(scale):
        return scale
    mantissa, exponent = math.frexp(max(scale, 2.0**-126))
    exponent -= mantissa == 0.5
    return math.ldexp(1.0, exponent) if exponent <= 127 else math.inf


def _fill_scales(value: float) -> TorchLaunch:
    """The launch of a call with no values but scales to write: no kernel, each scale
    `value`."""
    return TorchLaunch(lambda a: a.scales.fill_(value))


def _no_values(a: Args) -> Launch:
    """The launch of a dynamic call with no values: with one scale a row, rows of no
    values (hidden 0) have theirs written; no rows, no scales."""
    if a.group_size is not None or not math.prod(a.x.shape[:-1]):
        return skip
    scale_min = DEFAULT_SCALE_MIN[a.dtype] if a.scale_min is None else a.scale_min
    return _fill_scales(_empty_scale(scale_min, a.ue8m0))


def _width(a: Args, halves: bool) -> int:
    """The values of a row a quantizing op writes: x's, or half of them (silu_and_mul)."""
    return a.x.shape[-1] // 2 if halves else a.x.shape[-1]


def _new_q(halves: bool, a: Args) -> torch.Tensor:
    """A static op's result: x's leading shape, in dtype."""
    shape = (*a.x.shape[:-1], _width(a, halves))
    return torch.empty(shape, dtype=a.dtype, device=a.x.device)


def _new_q_and_scales(halves: bool, a: Args) -> tuple[torch.Tensor, torch.Tensor]:
    """A dynamic op's results: q, and its scales per row or group_size values."""
    width = _width(a, halves)
    groups = 1 if a.group_size is None else width // a.group_size
    return _new_q(halves, a), _new_scales(a.x, tuple(a.x.shape[:-1]), groups, a.column_major_scales)


def _x_meta(op: str, x: torch.Tensor) -> tuple[tuple, int, tuple[int, ...]]:
    shape, strides = tensor_meta(op, "x", x)
    check_float_dtype(op, "x", x)
    if not shape:
        raise ValueError(f"{op}(): x is a 0-d tensor; expected [..., hidden]")
    check_unit_last_stride(op, "x", shape, strides)
    return tuple(shape[:-1]), shape[-1], strides


def _x_rows(op: str, x: torch.Tensor) -> _Rows:
    """The rows of x itself."""
    lead, hidden, strides = _x_meta(op, x)
    return _Rows(Producer.X, lead, hidden, (("x", strides, False),))


# quantize: x itself.


@op(bind=_bind_static, new_output=functools.partial(_new_q, False))
def quantize(
    x: torch.Tensor,
    scale: torch.Tensor,
    *,
    dtype: torch.dtype = torch.float8_e4m3fn,
    truncate: bool = False,
    out: torch.Tensor | None = None,
) -> Plan | None:
    """x quantized with a given (static) scale: saturate(round(x * (1 / scale))).

    x: [..., hidden] float32/float16/bfloat16, unit last stride, any other strides.
    scale: float32, one element (per tensor), [..., G] with x's leading dimensions (G
    groups of hidden / G values a row; G = 1: per row), or for 2-D x [R, G] (blocks of
    x.shape[0] / R rows by hidden / G values). dtype: torch.float8_e4m3fn or torch.int8;
    truncate: int8 rounded toward zero, not to nearest even. out: optional, x's shape,
    in dtype; None returns a new contiguous tensor. Rounding: the module doc.
    """
    name = "quantize"
    return _plan(name, _x_rows(name, x), x, dtype, truncate, out, scale)


# dynamic_quantize: x itself, its scales computed.


@op(
    bind=_bind_dynamic,
    new_output=functools.partial(_new_q_and_scales, False),
    outputs=("out", "scales"),
)
def dynamic_quantize(
    x: torch.Tensor,
    *,
    dtype: torch.dtype = torch.float8_e4m3fn,
    group_size: int | None = None,
    scale_ub: torch.Tensor | None = None,
    scale_min: float | None = None,
    ue8m0: bool = False,
    truncate: bool = False,
    column_major_scales: bool = False,
    out: torch.Tensor | None = None,
    scales: torch.Tensor | None = None,
) -> Plan | None:
    """x quantized with a scale computed per row, or per group of group_size values of a
    row: returns (q, scales), q in dtype with x's shape, scales float32 [..., G].

    x: [..., hidden] float32/float16/bfloat16, unit last stride, any other strides.
    group_size: None (one scale a row) or a divisor of hidden. Each scale is
    max(min(absmax, scale_ub) / qmax, scale_min), rounded up to a power of two with
    ue8m0; scale_ub: optional float32 tensor of one element; scale_min: None for
    1 / (qmax * 512). column_major_scales: new scales laid out [G, ...] and returned
    transposed (stride 1 between rows). out and scales: optional, given together (any
    strides whose rows step by one stride). Rounding and truncate: the module doc.
    """
    name = "dynamic_quantize"
    options = _Dynamic(group_size, scale_ub, scale_min, ue8m0, column_major_scales, scales)
    return _plan(name, _x_rows(name, x), x, dtype, truncate, out, options)


# dynamic_quantize_per_tensor: one scale for the tensor, from a first kernel.


def _new_q_and_scale(a: Args) -> tuple[torch.Tensor, torch.Tensor]:
    scale = torch.empty((1,), dtype=torch.float32, device=a.x.device)
    return _new_q(False, a), scale


def _zero_scales(a: Args) -> tuple:
    """Zeroes the scale the first kernel takes the maximum into."""
    a.scales.zero_()
    return a


def _bind_per_tensor(plan: Plan | None, a: Args) -> tuple[KernelBinding, KernelBinding] | Launch:
    scale_min = 0.0 if a.scale_min is None else a.scale_min
    if plan is None:  # an empty x: its scale, given or new, the formula's
        return _fill_scales(_empty_scale(scale_min, False))
    rows = plan.rows
    first = bind_kernel(
        absmax_scale_spec(plan.dtype, plan.qdtype, plan.hidden, _runtime.tuning_of(a.x)),
        a.x,
        rows.rows,
        prepare=_zero_scales,
        **leading_row_values("x", rows.strides[0]),
        scale_min=float(scale_min),
        middle_size=rows.middle_size,
        inner_size=rows.inner_size,
    )
    return first, _bind_kernel(plan, a, 0.0, scale_ub=Address("scales"))


@op(bind=_bind_per_tensor, new_output=_new_q_and_scale, outputs=("out", "scales"))
def dynamic_quantize_per_tensor(
    x: torch.Tensor,
    *,
    dtype: torch.dtype = torch.float8_e4m3fn,
    scale_ub: torch.Tensor | None = None,
    scale_min: float | None = None,
    out: torch.Tensor | None = None,
    scales: torch.Tensor | None = None,
) -> Plan | None:
    """x quantized with one scale computed for the whole tensor, max(min(absmax,
    scale_ub) / qmax, scale_min): returns (q, scales), scales float32 of one element.

    Two kernels on the queue, no host round trip: the absolute maximum, then the
    quantization. scale_ub: optional float32 tensor of one element; scale_min: None for
    0 (an all-zero x has scale 0 and quantizes to 0; an empty x has scale scale_min,
    written into given scales too). out and scales (one float32 element): optional,
    given together.
    """
    name = "dynamic_quantize_per_tensor"
    qdtype = _check_dtype(name, dtype, False)
    rows = _x_rows(name, x)
    options = _Dynamic(None, scale_ub, scale_min, False, False, None)
    _check_dynamic(name, x, rows.lead, rows.hidden, options)
    if scales is not None:
        _check_scale_tensor(name, "scales", scales, x)
        if scales.numel() != 1:
            raise ValueError(f"{name}(): scales has {scales.numel()} elements; expected one")
    return _row_plan(name, rows, x, qdtype, out, ScaleLayout(rows.hidden, 1, 0, 0), False)


# rmsnorm_quantize, rmsnorm_dynamic_quantize: rmsnorm(x), or of residual = x + residual.


def _norm_rows(
    op: str,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float,
    residual: torch.Tensor | None,
) -> _Rows:
    """The rows of rmsnorm(x), or of x + residual with residual (checked, written)."""
    lead, hidden, strides = _x_meta(op, x)
    weight_kind = check_weight(op, "weight", weight, x, hidden, "x")
    check_number(op, "eps", eps, minimum=0)
    entries: RowEntries = (("x", strides, False),)
    if residual is None:
        return _Rows(Producer.RMSNORM, lead, hidden, entries, weight_kind)
    residual_shape, residual_strides = tensor_meta(op, "residual", residual)
    check_same(op, "residual", residual, "x", x)
    check_shape(op, "residual", residual_shape, (*lead, hidden), "x.shape")
    check_unit_last_stride(op, "residual", residual_shape, residual_strides)
    entries += (("residual", residual_strides, True),)
    return _Rows(Producer.FUSED_ADD_RMSNORM, lead, hidden, entries, weight_kind)


@op(bind=_bind_static, mutates=("residual",), new_output=functools.partial(_new_q, False))
def rmsnorm_quantize(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    scale: torch.Tensor,
    eps: float = 1e-6,
    *,
    residual: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float8_e4m3fn,
    truncate: bool = False,
    out: torch.Tensor | None = None,
) -> Plan | None:
    """quantize(rmsnorm(x, weight, eps), scale) in one pass: the norm's values
    (x * weight) * rsqrt(mean(x^2) + eps) in float32, not rounded to x's dtype,
    quantized with the given scale (quantize's forms).

    With residual (in place): residual = x + residual, rounded to x's dtype, and the
    rounded sum is normalized; x is only read. x, residual: [..., hidden]
    float32/float16/bfloat16, unit last stride. weight: [hidden], x's dtype or float32,
    or None. Returns q (or writes out), in dtype, x's shape.
    """
    name = "rmsnorm_quantize"
    rows = _norm_rows(name, x, weight, eps, residual)
    return _plan(name, rows, x, dtype, truncate, out, scale)


@op(
    bind=_bind_dynamic,
    mutates=("residual",),
    new_output=functools.partial(_new_q_and_scales, False),
    outputs=("out", "scales"),
)
def rmsnorm_dynamic_quantize(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float = 1e-6,
    *,
    residual: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float8_e4m3fn,
    group_size: int | None = None,
    scale_ub: torch.Tensor | None = None,
    scale_min: float | None = None,
    ue8m0: bool = False,
    truncate: bool = False,
    column_major_scales: bool = False,
    out: torch.Tensor | None = None,
    scales: torch.Tensor | None = None,
) -> Plan | None:
    """dynamic_quantize(rmsnorm(x, weight, eps)) in one pass over x: returns (q, scales).

    The norm's values as rmsnorm_quantize's, (x * weight) * rsqrt(mean(x^2) + eps) in
    float32, not rounded to x's dtype (the row's absolute maximum, for one scale a
    row, is taken with the sum of squares: two passes over x in cache, not three); the
    scales as dynamic_quantize's (per row, or per group of group_size). residual: as
    rmsnorm_quantize's (in place: x + residual, rounded, is stored and normalized).
    """
    name = "rmsnorm_dynamic_quantize"
    rows = _norm_rows(name, x, weight, eps, residual)
    options = _Dynamic(group_size, scale_ub, scale_min, ue8m0, column_major_scales, scales)
    return _plan(name, rows, x, dtype, truncate, out, options)


# silu_and_mul_quantize, silu_and_mul_dynamic_quantize: silu(gate) * up, the halves of x.


def _halves_rows(op: str, x: torch.Tensor, rounded: bool) -> _Rows:
    """The rows of silu(gate) * up, gate and up the halves of x [..., 2 * d]."""
    lead, width, strides = _x_meta(op, x)
    if width % 2:
        raise ValueError(
            f"{op}(): x has shape {tuple(x.shape)}; expected [..., 2 * d] (an even last dimension)"
        )
    check_bool(op, "rounded", rounded)
    entries = (("gate", strides, False), ("up", strides, False))
    return _Rows(Producer.SILU_AND_MUL, lead, width // 2, entries)


@op(bind=_bind_static, new_output=functools.partial(_new_q, True))
def silu_and_mul_quantize(
    x: torch.Tensor,
    scale: torch.Tensor,
    *,
    dtype: torch.dtype = torch.float8_e4m3fn,
    truncate: bool = False,
    rounded: bool = True,
    out: torch.Tensor | None = None,
) -> Plan | None:
    """quantize(silu(x[..., :d]) * x[..., d:], scale) in one pass (quantize's scale forms).

    x: [..., 2 * d] float32/float16/bfloat16, unit last stride. rounded: the values are
    torch's ``F.silu(gate) * up`` in x's dtype (silu rounded to it, then the product),
    what the unfused pair quantizes; False: computed in float32 and not rounded.
    Returns q [..., d] in dtype (or writes out).
    """
    name = "silu_and_mul_quantize"
    rows = _halves_rows(name, x, rounded)
    return _plan(name, rows, x, dtype, truncate, out, scale, rounded)


@op(
    bind=_bind_dynamic,
    new_output=functools.partial(_new_q_and_scales, True),
    outputs=("out", "scales"),
)
def silu_and_mul_dynamic_quantize(
    x: torch.Tensor,
    *,
    dtype: torch.dtype = torch.float8_e4m3fn,
    group_size: int | None = None,
    scale_ub: torch.Tensor | None = None,
    scale_min: float | None = None,
    ue8m0: bool = False,
    truncate: bool = False,
    rounded: bool = True,
    column_major_scales: bool = False,
    out: torch.Tensor | None = None,
    scales: torch.Tensor | None = None,
) -> Plan | None:
    """dynamic_quantize(silu(x[..., :d]) * x[..., d:]) in one pass: returns (q, scales).

    rounded: as silu_and_mul_quantize's; the scales as dynamic_quantize's, per row of d
    values or per group of group_size.
    """
    name = "silu_and_mul_dynamic_quantize"
    rows = _halves_rows(name, x, rounded)
    options = _Dynamic(group_size, scale_ub, scale_min, ue8m0, column_major_scales, scales)
    return _plan(name, rows, x, dtype, truncate, out, options, rounded)
