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

import math
from typing import NamedTuple

import torch

from .. import _runtime
from .._dtypes import QUANT_DTYPE_NAMES, QUANT_DTYPES, DType, QuantDType
from ..specs.quant import GROUP_LANES, absmax_scale_spec, quantize_spec
from ..specs.spec import leading_row_values
from ._checks import (
    RowEntries,
    RowLayout,
    check_bool,
    check_float_dtype,
    check_int,
    check_number,
    check_same,
    check_shape,
    check_tensor,
    check_unit_last_stride,
    contiguous_row_strides,
    row_layout,
    tensor_meta,
)
from ._launch import Address, KernelBinding, Launch, bind_kernel, skip
from ._op import op
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
    producer: str
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
    if not (out.is_cpu and like.is_cpu) and out.device != like.device:
        raise ValueError(f"{op}(): out is on {out.device} but the input is on {like.device}")
    if out.dtype != qdtype.torch_dtype:
        raise TypeError(f"{op}(): out has dtype {out.dtype}; expected dtype {qdtype.torch_dtype}")
    check_shape(op, "out", out_shape, shape, why)
    check_unit_last_stride(op, "out", out_shape, strides)
    return strides


def _check_scale_tensor(op: str, name: str, t: torch.Tensor, like: torch.Tensor) -> None:
    check_tensor(op, name, t)
    if t.dtype != torch.float32:
        raise TypeError(f"{op}(): {name} has dtype {t.dtype}; expected torch.float32")
    if not (t.is_cpu and like.is_cpu) and t.device != like.device:
        raise ValueError(
            f"{op}(): {name} is on {t.device} but the input is on {like.device}; "
            "expected the same device"
        )


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


def _check_dynamic(
    op: str,
    x: torch.Tensor,
    lead: tuple,
    hidden: int,
    group_size: int | None,
    scale_ub: torch.Tensor | None,
    scale_min: float | None,
    ue8m0: bool,
    column_major_scales: bool,
    scales: torch.Tensor | None,
) -> ScaleLayout:
    """Checks a dynamic op's scale arguments; the layout of its scales."""
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
    layout = ScaleLayout(group, 1, _row_stride(op, "scales", shape, strides), strides[-1])
    (small, small_stride), (large, large_stride) = sorted(
        ((rows, layout.row_stride), (groups, layout.group_stride)), key=lambda p: p[1]
    )
    if (small > 1 and small_stride == 0) or (large > 1 and large_stride < small * small_stride):
        raise ValueError(
            f"{op}(): scales is written but its elements overlap (shape {tuple(shape)}, "
            f"strides {tuple(strides)}); expected a tensor with its own memory per scale"
        )
    return layout


def _new_scales(x: torch.Tensor, lead: tuple, groups: int, column_major: bool) -> torch.Tensor:
    if column_major:
        return torch.empty((groups, *lead), dtype=torch.float32, device=x.device).movedim(0, -1)
    return torch.empty((*lead, groups), dtype=torch.float32, device=x.device)


def _row_plan(
    op: str,
    producer: str,
    x: torch.Tensor,
    hidden: int,
    entries: RowEntries,
    qdtype: QuantDType,
    out: torch.Tensor | None,
    scales: ScaleLayout,
    *,
    dynamic: bool,
    ue8m0: bool = False,
    truncate: bool = False,
    rounded: bool = True,
    weight: str = "dtype",
) -> Plan | None:
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
        producer,
        dtype,
        qdtype,
        hidden,
        dynamic,
        ue8m0,
        truncate,
        rounded,
        weight,
        row_layout(op, hidden, shape, entries),
        scales,
        out_strides is not None,
    )


def _bind(plan: Plan | None, like: torch.Tensor, scale_min: float | None, **inputs: object):
    """The quantizing kernel of `plan` with its row and scale values; `inputs`: the
    producer's own (strides, addresses, eps)."""
    if plan is None:
        return skip
    rows = plan.rows
    out_strides = rows.strides[-1] if plan.out_given else contiguous_row_strides(rows, plan.hidden)
    spec = quantize_spec(
        plan.producer,
        plan.dtype,
        plan.qdtype,
        plan.hidden,
        plan.scales.group,
        _runtime.tuning_of(like),
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
        like,
        rows.rows,
        **inputs,
        **leading_row_values("out", out_strides),
        rows_per_scale=plan.scales.rows_per_scale,
        scale_row_stride=plan.scales.row_stride,
        scale_group_stride=plan.scales.group_stride,
        scale_min=float(scale_min),
        middle_size=rows.middle_size,
        inner_size=rows.inner_size,
    )


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


def _fill_scales(value: float) -> Launch:
    """The launch of a call with no values but scales to write (the launch's last
    argument): no kernel, each scale `value`."""

    def fill(*args: torch.Tensor) -> None:
        args[-1].fill_(value)

    return fill


def _no_values(
    x: torch.Tensor, dtype: torch.dtype, group_size: int | None, scale_min, ue8m0: bool
) -> Launch:
    """The launch of a dynamic call with no values: with one scale a row, rows of no
    values (hidden 0) have theirs written; no rows, no scales."""
    if group_size is not None or not math.prod(x.shape[:-1]):
        return skip
    if scale_min is None:
        scale_min = DEFAULT_SCALE_MIN[dtype]
    return _fill_scales(_empty_scale(scale_min, ue8m0))


def _x_meta(op: str, x: torch.Tensor) -> tuple[tuple, int, tuple[int, ...]]:
    shape, strides = tensor_meta(op, "x", x)
    check_float_dtype(op, "x", x)
    if not shape:
        raise ValueError(f"{op}(): x is a 0-d tensor; expected [..., hidden]")
    check_unit_last_stride(op, "x", shape, strides)
    return tuple(shape[:-1]), shape[-1], strides


# quantize: x itself.


def _new_q(x: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype, *_: object) -> torch.Tensor:
    return torch.empty(x.shape, dtype=dtype, device=x.device)


# A static kernel reads neither scale_ub nor scale_min (kernels/quant/quantize.hpp); they
# are bound to the scale it does read.
_STATIC = {"scales": Address("scale"), "scale_ub": Address("scale")}


def _bind_quantize(plan: Plan | None, x: torch.Tensor, *args: object) -> KernelBinding | Launch:
    if plan is None:
        return skip
    return _bind(plan, x, 0.0, **leading_row_values("x", plan.rows.strides[0]), **_STATIC)


@op(bind=_bind_quantize, new_output=_new_q)
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
    qdtype = _check_dtype(name, dtype, truncate)
    lead, hidden, strides = _x_meta(name, x)
    scales = _static_scales(name, scale, x, lead, hidden)
    return _row_plan(
        name,
        "x",
        x,
        hidden,
        (("x", strides, False),),
        qdtype,
        out,
        scales,
        dynamic=False,
        truncate=truncate,
    )


# dynamic_quantize: x itself, its scales computed.


def _new_q_and_scales(
    x: torch.Tensor,
    dtype: torch.dtype,
    group_size: int | None,
    scale_ub: torch.Tensor | None,
    scale_min: float | None,
    ue8m0: bool,
    truncate: bool,
    column_major_scales: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    hidden = x.shape[-1]
    groups = 1 if group_size is None else hidden // group_size
    q = torch.empty(x.shape, dtype=dtype, device=x.device)
    return q, _new_scales(x, tuple(x.shape[:-1]), groups, column_major_scales)


def _bind_dynamic(
    plan: Plan | None,
    x: torch.Tensor,
    dtype,
    group_size,
    scale_ub,
    scale_min,
    ue8m0,
    *args: object,
) -> KernelBinding | Launch:
    if plan is None:
        return _no_values(x, dtype, group_size, scale_min, ue8m0)
    return _bind(plan, x, scale_min, **leading_row_values("x", plan.rows.strides[0]))


@op(bind=_bind_dynamic, new_output=_new_q_and_scales, outputs=("out", "scales"))
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
    qdtype = _check_dtype(name, dtype, truncate)
    lead, hidden, strides = _x_meta(name, x)
    layout = _check_dynamic(
        name, x, lead, hidden, group_size, scale_ub, scale_min, ue8m0, column_major_scales, scales
    )
    return _row_plan(
        name,
        "x",
        x,
        hidden,
        (("x", strides, False),),
        qdtype,
        out,
        layout,
        dynamic=True,
        ue8m0=ue8m0,
        truncate=truncate,
    )


# dynamic_quantize_per_tensor: one scale for the tensor, from a first kernel.


def _new_q_and_scale(
    x: torch.Tensor, dtype: torch.dtype, scale_ub: torch.Tensor | None, scale_min: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    q = torch.empty(x.shape, dtype=dtype, device=x.device)
    return q, torch.empty((1,), dtype=torch.float32, device=x.device)


def _zero_scales(*args: torch.Tensor) -> tuple:
    """Zeroes the scale (the launch's last argument) the first kernel takes the maximum
    into."""
    args[-1].zero_()
    return args


def _bind_per_tensor(
    plan: Plan | None, x: torch.Tensor, dtype, scale_ub, scale_min, *args: object
) -> tuple[KernelBinding, KernelBinding] | Launch:
    if plan is None:  # an empty x: its scale, given or new, the formula's
        return _fill_scales(_empty_scale(0.0 if scale_min is None else scale_min, False))
    rows = plan.rows
    x_strides = leading_row_values("x", rows.strides[0])
    first = bind_kernel(
        absmax_scale_spec(plan.dtype, plan.qdtype, plan.hidden, _runtime.tuning_of(x)),
        x,
        rows.rows,
        prepare=_zero_scales,
        **x_strides,
        scale_min=float(0.0 if scale_min is None else scale_min),
        middle_size=rows.middle_size,
        inner_size=rows.inner_size,
    )
    return first, _bind(plan, x, 0.0, **x_strides, scale_ub=Address("scales"))


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
    lead, hidden, strides = _x_meta(name, x)
    _check_dynamic(name, x, lead, hidden, None, scale_ub, scale_min, False, False, None)
    if scales is not None:
        _check_scale_tensor(name, "scales", scales, x)
        if scales.numel() != 1:
            raise ValueError(f"{name}(): scales has {scales.numel()} elements; expected one")
    return _row_plan(
        name,
        "x",
        x,
        hidden,
        (("x", strides, False),),
        qdtype,
        out,
        ScaleLayout(hidden, 1, 0, 0),
        dynamic=False,
    )


# rmsnorm_quantize, rmsnorm_dynamic_quantize: rmsnorm(x), or of residual = x + residual.


def _check_norm(
    op: str,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float,
    residual: torch.Tensor | None,
) -> tuple[tuple, int, RowEntries, str, str]:
    """Checks rmsnorm's arguments; (leading shape, hidden, row entries, weight kind,
    producer)."""
    lead, hidden, strides = _x_meta(op, x)
    weight_kind = check_weight(op, "weight", weight, x, hidden, "x")
    check_number(op, "eps", eps, minimum=0)
    entries: RowEntries = (("x", strides, False),)
    if residual is None:
        return lead, hidden, entries, weight_kind, "rmsnorm"
    residual_shape, residual_strides = tensor_meta(op, "residual", residual)
    check_same(op, "residual", residual, "x", x)
    check_shape(op, "residual", residual_shape, (*lead, hidden), "x.shape")
    check_unit_last_stride(op, "residual", residual_shape, residual_strides)
    return (
        lead,
        hidden,
        (*entries, ("residual", residual_strides, True)),
        weight_kind,
        ("fused_add_rmsnorm"),
    )


def _bind_norm(plan: Plan, x: torch.Tensor, eps: float, scale_min: float | None, **more):
    strides = plan.rows.strides
    residual = strides[1] if plan.producer == "fused_add_rmsnorm" else (0, 0, 0)
    return _bind(
        plan,
        x,
        scale_min,
        **leading_row_values("x", strides[0]),
        **leading_row_values("residual", residual),
        eps=float(eps),
        **more,
    )


def _new_norm_q(
    x: torch.Tensor, weight, scale, eps, residual, dtype: torch.dtype, truncate: bool
) -> torch.Tensor:
    return torch.empty(x.shape, dtype=dtype, device=x.device)


def _bind_rmsnorm_static(
    plan: Plan | None, x: torch.Tensor, weight, scale, eps: float, *args: object
) -> KernelBinding | Launch:
    if plan is None:
        return skip
    return _bind_norm(plan, x, eps, 0.0, **_STATIC)


@op(bind=_bind_rmsnorm_static, mutates=("residual",), new_output=_new_norm_q)
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
    qdtype = _check_dtype(name, dtype, truncate)
    lead, hidden, entries, weight_kind, producer = _check_norm(name, x, weight, eps, residual)
    scales = _static_scales(name, scale, x, lead, hidden)
    return _row_plan(
        name,
        producer,
        x,
        hidden,
        entries,
        qdtype,
        out,
        scales,
        dynamic=False,
        truncate=truncate,
        weight=weight_kind,
    )


def _new_norm_q_and_scales(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float,
    residual: torch.Tensor | None,
    dtype: torch.dtype,
    group_size: int | None,
    *args: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _new_q_and_scales(x, dtype, group_size, *args)


def _bind_rmsnorm_dynamic(
    plan: Plan | None,
    x: torch.Tensor,
    weight,
    eps,
    residual,
    dtype,
    group_size,
    scale_ub,
    scale_min,
    ue8m0,
    *args: object,
) -> KernelBinding | Launch:
    if plan is None:
        return _no_values(x, dtype, group_size, scale_min, ue8m0)
    return _bind_norm(plan, x, eps, scale_min)


@op(
    bind=_bind_rmsnorm_dynamic,
    mutates=("residual",),
    new_output=_new_norm_q_and_scales,
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
    qdtype = _check_dtype(name, dtype, truncate)
    lead, hidden, entries, weight_kind, producer = _check_norm(name, x, weight, eps, residual)
    layout = _check_dynamic(
        name, x, lead, hidden, group_size, scale_ub, scale_min, ue8m0, column_major_scales, scales
    )
    return _row_plan(
        name,
        producer,
        x,
        hidden,
        entries,
        qdtype,
        out,
        layout,
        dynamic=True,
        ue8m0=ue8m0,
        truncate=truncate,
        weight=weight_kind,
    )


# silu_and_mul_quantize, silu_and_mul_dynamic_quantize: silu(gate) * up, the halves of x.


def _check_halves(op: str, x: torch.Tensor, rounded: bool) -> tuple[tuple, int, RowEntries]:
    """Checks x [..., 2 * d]; (leading shape, d, row entries of gate and up)."""
    lead, width, strides = _x_meta(op, x)
    if width % 2:
        raise ValueError(
            f"{op}(): x has shape {tuple(x.shape)}; expected [..., 2 * d] (an even last dimension)"
        )
    check_bool(op, "rounded", rounded)
    return lead, width // 2, (("gate", strides, False), ("up", strides, False))


def _bind_halves(plan: Plan, x: torch.Tensor, scale_min: float | None, **more):
    strides = plan.rows.strides[0]
    half = plan.hidden * x.element_size()
    return _bind(
        plan,
        x,
        scale_min,
        gate=Address("x"),
        up=Address("x", half),
        **leading_row_values("gate", strides),
        **leading_row_values("up", strides),
        **more,
    )


def _new_half_q(x: torch.Tensor, scale, dtype: torch.dtype, *_: object) -> torch.Tensor:
    return torch.empty((*x.shape[:-1], x.shape[-1] // 2), dtype=dtype, device=x.device)


def _bind_silu_static(plan: Plan | None, x: torch.Tensor, *args: object) -> KernelBinding | Launch:
    if plan is None:
        return skip
    return _bind_halves(plan, x, 0.0, **_STATIC)


@op(bind=_bind_silu_static, new_output=_new_half_q)
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
    qdtype = _check_dtype(name, dtype, truncate)
    lead, d, entries = _check_halves(name, x, rounded)
    scales = _static_scales(name, scale, x, lead, d)
    return _row_plan(
        name,
        "silu_and_mul",
        x,
        d,
        entries,
        qdtype,
        out,
        scales,
        dynamic=False,
        truncate=truncate,
        rounded=rounded,
    )


def _new_half_q_and_scales(
    x: torch.Tensor,
    dtype: torch.dtype,
    group_size: int | None,
    scale_ub,
    scale_min,
    ue8m0,
    truncate,
    rounded,
    column_major_scales: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    d = x.shape[-1] // 2
    q = torch.empty((*x.shape[:-1], d), dtype=dtype, device=x.device)
    groups = 1 if group_size is None else d // group_size
    return q, _new_scales(x, tuple(x.shape[:-1]), groups, column_major_scales)


def _bind_silu_dynamic(
    plan: Plan | None,
    x: torch.Tensor,
    dtype,
    group_size,
    scale_ub,
    scale_min,
    ue8m0,
    *args: object,
) -> KernelBinding | Launch:
    if plan is None:
        return _no_values(x, dtype, group_size, scale_min, ue8m0)
    return _bind_halves(plan, x, scale_min)


@op(
    bind=_bind_silu_dynamic,
    new_output=_new_half_q_and_scales,
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
    qdtype = _check_dtype(name, dtype, truncate)
    lead, d, entries = _check_halves(name, x, rounded)
    layout = _check_dynamic(
        name, x, lead, d, group_size, scale_ub, scale_min, ue8m0, column_major_scales, scales
    )
    return _row_plan(
        name,
        "silu_and_mul",
        x,
        d,
        entries,
        qdtype,
        out,
        layout,
        dynamic=True,
        ue8m0=ue8m0,
        truncate=truncate,
        rounded=rounded,
    )
