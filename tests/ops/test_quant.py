"""Quantization to fp8 (e4m3fn) and int8 against the torch references (tests/references.py):
quantize, dynamic_quantize (per row, per group) and dynamic_quantize_per_tensor, and the
fused producers rmsnorm and silu_and_mul, with each scale form, option and layout.

Where the reference computes the kernel's float32 values exactly (x itself; the
per-tensor and per-group scales) the quantized values are compared bit for bit. rmsnorm
sums its squares in another order than torch (and silu's float32 exp is the device's,
not torch's), so its values may differ from the reference's in the last bit: there the
scales agree to rtol 1e-5 and a value may differ by one quantization step, rarely.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import pytest
import sycl_kernels
import torch
from sycl_kernels import _dtypes as dtype_table
from sycl_kernels.jit import stats

from tests import references
from tests.ops import cases

DTYPES = [d.torch_dtype for d in dtype_table.DTYPES]
FP8, INT8 = torch.float8_e4m3fn, torch.int8
QDTYPES = [FP8, INT8]
GROUPS = [None, 32, 64, 128]
ROWS, HIDDEN = 8, 256
DYNAMIC_OPS = [
    "dynamic_quantize",
    "dynamic_quantize_per_tensor",
    "rmsnorm_dynamic_quantize",
    "silu_and_mul_dynamic_quantize",
]


def _rows(rows: int = ROWS, hidden: int = HIDDEN, dtype: torch.dtype = torch.float32):
    """Rows of magnitudes 1e-4 .. 1e3, the smallest below the default scale_min's reach."""
    magnitude = torch.logspace(-4, 3, rows)[:, None]
    return (magnitude * torch.randn(rows, hidden)).to(dtype)


def _codes(q: torch.Tensor) -> torch.Tensor:
    return q.view(torch.uint8) if q.dtype == FP8 else q


def _nan(q: torch.Tensor) -> torch.Tensor:
    return q.float().isnan()


def assert_same_q(got: torch.Tensor, want: torch.Tensor) -> None:
    """Bit for bit, NaN at the same places (with any sign)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    nan = _nan(want)
    assert torch.equal(_nan(got), nan), "NaN at other places"
    different = (_codes(got) != _codes(want)) & ~nan
    assert not different.any(), f"{int(different.sum())} differ, at {different.nonzero()[:4]}"


def _steps(q: torch.Tensor) -> torch.Tensor:
    """The quantized values as integers in their order: int8 as is, fp8's sign and
    magnitude bits as a signed number (+0 and -0 both 0)."""
    if q.dtype == INT8:
        return q.int()
    bits = q.view(torch.uint8).int()
    return torch.where(bits >= 128, 128 - bits, bits)


def assert_within_a_step(
    got: tuple[torch.Tensor, torch.Tensor],
    want: tuple[torch.Tensor, torch.Tensor],
    fraction: float = 0.01,
) -> None:
    """(q, scales) against the reference's, for values computed in another order
    (module doc): the scales to rtol 1e-5, the values within one quantization step,
    and at most `fraction` of them a step away; NaN at the same places."""
    (q, scales), (want_q, want_scales) = got, want
    torch.testing.assert_close(scales, want_scales, rtol=1e-5, atol=0)
    assert q.dtype == want_q.dtype and q.shape == want_q.shape
    nan = _nan(want_q)
    assert torch.equal(_nan(q), nan), "NaN at other places"
    steps = (_steps(q) - _steps(want_q)).abs()[~nan]
    if steps.numel():
        assert steps.max() <= 1, f"a value {int(steps.max())} steps away"
        away = int((steps > 0).sum())
        assert away <= fraction * steps.numel(), f"{away} values a step away"


# dynamic_quantize: a scale per row or per group, bit for bit.


@pytest.mark.parametrize("group_size", GROUPS)
@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dynamic_quantize_matches_reference(
    dtype: torch.dtype, qdtype: torch.dtype, group_size: int | None
) -> None:
    x = _rows(dtype=dtype)
    q, scales = sycl_kernels.dynamic_quantize(x, dtype=qdtype, group_size=group_size)
    groups = 1 if group_size is None else HIDDEN // group_size
    assert scales.shape == (ROWS, groups) and scales.dtype == torch.float32
    assert q.is_contiguous() and scales.is_contiguous()
    want_q, want_scales = references.dynamic_quantize(x, qdtype, group_size)
    assert torch.equal(scales, want_scales)
    assert_same_q(q, want_q)
    # The smallest rows' scales are scale_min's: vLLM's 1 / (qmax * 512).
    assert torch.all(scales[0] == references.default_scale_min(qdtype))


# (dtype, qdtype, group_size, options): each option on a kernel of the grid above where
# it is a runtime argument (scale_ub, scale_min), its own kernel otherwise.
OPTIONS = [
    (torch.bfloat16, FP8, 128, {"ue8m0": True}),
    (torch.float32, INT8, None, {"ue8m0": True}),
    (torch.float32, FP8, None, {"scale_ub": torch.tensor([2.0])}),
    (torch.float16, INT8, 32, {"scale_ub": torch.tensor([0.5]), "scale_min": 1e-3}),
    (torch.float32, FP8, 64, {"scale_min": 0.0}),
    (torch.float32, FP8, 64, {"scale_min": 0.25}),
    (torch.float16, INT8, 32, {"truncate": True}),
]


@pytest.mark.parametrize(
    ("dtype", "qdtype", "group_size", "options"),
    OPTIONS,
    ids=[f"{d}-{q}-{g}-{'-'.join(o)}" for d, q, g, o in OPTIONS],
)
def test_dynamic_quantize_options(
    dtype: torch.dtype, qdtype: torch.dtype, group_size: int | None, options: dict
) -> None:
    x = _rows(dtype=dtype)
    q, scales = sycl_kernels.dynamic_quantize(x, dtype=qdtype, group_size=group_size, **options)
    want_q, want_scales = references.dynamic_quantize(
        x,
        qdtype,
        group_size,
        options.get("scale_ub"),
        options.get("scale_min"),
        options.get("ue8m0", False),
        options.get("truncate", False),
    )
    assert torch.equal(scales, want_scales)
    assert_same_q(q, want_q)
    if options.get("ue8m0"):
        mantissa, _ = torch.frexp(scales)
        assert torch.all(mantissa == 0.5), "a scale is not a power of two"
    if "scale_ub" in options:
        # The large rows are bounded: their values saturate.
        assert torch.all(scales <= options["scale_ub"] / references.QUANT_MAX[qdtype])
        assert torch.any(q[-1].float().abs() == references.QUANT_MAX[qdtype])


def test_ue8m0_rounds_up_to_a_power_of_two_exactly() -> None:
    # absmax / 448 at a power of two, a float32 step above one, between two, and below
    # 2**-126 (a subnormal, and 0).
    at = torch.tensor(56.0)
    above = torch.nextafter(at, torch.tensor(math.inf))
    amax = torch.stack([at, above, torch.tensor(336.0), torch.tensor(1e-40), torch.tensor(0.0)])
    x = torch.zeros(5, 32)
    x[:, 7] = amax
    _, scales = sycl_kernels.dynamic_quantize(x, ue8m0=True, scale_min=0.0)
    want = torch.tensor([2.0**-3, 2.0**-2, 1.0, 2.0**-126, 2.0**-126])
    assert torch.equal(scales[:, 0], want)
    assert torch.equal(references.ue8m0(references.dynamic_scale(amax, FP8, scale_min=0.0)), want)


# Rounding, saturation, special values.


def test_rounding_and_saturation_bit_for_bit() -> None:
    # fp8: ties between codes (1.0625: 1.0 or 1.125, to even 1.0; 1.1875 to 1.25), a
    # subnormal tie (2**-9 * 1.5), beyond 448 (torch's cast alone makes NaN), tiny.
    # int8: ties to even, beyond the range, and the same toward zero with truncate.
    values = [1.0625, 1.1875, -1.0625, 2.0**-9 * 1.5, 2.0**-9 * 2.5, 464.0, -1e6, 1e-12]
    values += [0.5, 1.5, 2.5, -0.5, -2.5, 127.5, -128.5, 300.0, -300.0, 126.7, -126.7, 0.0]
    values += [0.0] * (32 - len(values))
    x = torch.tensor([values])
    one = torch.ones(1)
    fp8 = sycl_kernels.quantize(x, one)
    assert_same_q(fp8, references.quantize(x, one.expand(1, 1), FP8))
    assert fp8[0, :8].float().tolist() == [1.0, 1.25, -1.0, 2.0**-9 * 2, 2.0**-9 * 2, 448, -448, 0]
    i8 = sycl_kernels.quantize(x, one, dtype=INT8)
    assert_same_q(i8, references.quantize(x, one.expand(1, 1), INT8))
    assert i8[0, 8:20].tolist() == [0, 2, 2, 0, -2, 127, -128, 127, -128, 127, -127, 0]
    truncated = sycl_kernels.quantize(x, one, dtype=INT8, truncate=True)
    assert_same_q(truncated, references.quantize(x, one.expand(1, 1), INT8, truncate=True))
    assert truncated[0, 8:20].tolist() == [0, 1, 2, 0, -2, 127, -128, 127, -128, 126, -126, 0]


@pytest.mark.parametrize("scale_ub", [None, torch.tensor([10.0])], ids=["unbounded", "scale_ub"])
@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
def test_nan_and_inf(qdtype: torch.dtype, scale_ub: torch.Tensor | None) -> None:
    x = torch.randn(4, HIDDEN)
    x[0, 3] = math.nan
    x[1, 70] = math.inf
    x[2, 200] = -math.inf
    x[3, :] = math.nan  # a row of NaN only: absmax 0
    q, scales = sycl_kernels.dynamic_quantize(x, dtype=qdtype, group_size=64, scale_ub=scale_ub)
    want_q, want_scales = references.dynamic_quantize(x, qdtype, 64, scale_ub)
    assert torch.equal(scales, want_scales)
    assert_same_q(q, want_q)
    qmax = references.QUANT_MAX[qdtype]
    # NaN is ignored by the maximum, and stays NaN (fp8) or becomes 0 (int8).
    without_nan = x[0, :64].nan_to_num(0.0)
    assert scales[0, 0] == references.dynamic_scale(without_nan.abs().max(), qdtype, scale_ub)
    assert (q[0, 3].float().isnan() if qdtype == FP8 else q[0, 3] == 0).item()
    assert torch.all(scales[3] == references.default_scale_min(qdtype))
    if scale_ub is None:
        # An infinite group scale: the group's other values 0, the infinity NaN (fp8) or 0.
        assert scales[1, 1] == math.inf and scales[2, 3] == math.inf
        others = torch.cat([q[1, 64:70], q[1, 71:128]]).float()
        assert torch.all(others == 0)
        assert (q[1, 70].float().isnan() if qdtype == FP8 else q[1, 70] == 0).item()
    else:
        qmin = -448.0 if qdtype == FP8 else -128.0
        assert q[1, 70].float() == qmax and q[2, 200].float() == qmin


def test_static_quantize_keeps_nan_and_saturates_inf() -> None:
    x = torch.randn(2, 64)
    x[0, 5], x[1, 6], x[1, 7] = math.nan, math.inf, -math.inf
    scale = torch.tensor([0.5])
    fp8 = sycl_kernels.quantize(x, scale)
    i8 = sycl_kernels.quantize(x, scale, dtype=INT8)
    assert_same_q(fp8, references.quantize(x, scale.expand(2, 1), FP8))
    assert_same_q(i8, references.quantize(x, scale.expand(2, 1), INT8))
    assert fp8[0, 5].float().isnan() and fp8[1, 6].float() == 448 and fp8[1, 7].float() == -448
    assert i8[0, 5] == 0 and i8[1, 6] == 127 and i8[1, 7] == -128


def test_a_zero_scale_quantizes_to_zero() -> None:
    x = torch.randn(4, 64) * 100
    scale = torch.tensor([[1.0], [0.0], [2.0], [0.0]])
    for qdtype in QDTYPES:
        q = sycl_kernels.quantize(x, scale, dtype=qdtype)
        assert_same_q(q, references.quantize(x, scale, qdtype))
        assert torch.all(q[1::2].float() == 0) and torch.any(q[0::2].float() != 0)


def divided(values: torch.Tensor, scales: torch.Tensor, qdtype: torch.dtype) -> torch.Tensor:
    """An independent reference: values [..., H] over scales [..., G] (a scale per H / G
    values) in float64, saturated and rounded to nearest even (NaN: fp8 NaN, int8 0)."""
    s = scales.double()
    q = values.double() / s.repeat_interleave(values.shape[-1] // s.shape[-1], dim=-1)
    if qdtype == FP8:
        return q.clamp(-448.0, 448.0).to(FP8)
    return torch.round(q.clamp(-128.0, 127.0)).nan_to_num(0.0).to(INT8)


# Values around a subnormal scale: their quotients span both types' ranges and beyond.
TINY = torch.tensor([[1e-40, -3e-40, 2e-39, 0.0, -0.0, 7e-42, -1e-45, 5e-39]])


@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
def test_a_subnormal_scale_divides(qdtype: torch.dtype) -> None:
    # 1 / s overflows float32 below 2^-128: 0 * inf made NaN of 0, x * inf saturated.
    x = TINY.repeat(1, 4)
    q, scales = sycl_kernels.dynamic_quantize(x, dtype=qdtype, scale_min=0.0)
    assert scales.item() == (torch.tensor(5e-39) / references.QUANT_MAX[qdtype]).item()
    assert scales.item() < 2.0**-128
    assert_same_q(q, divided(x, scales, qdtype))
    assert torch.all(q[0, 3:5].float() == 0) and torch.any(q.float().abs() < 100)
    if qdtype == FP8:
        assert q[0, :3].float().tolist() == [9.0, -26.0, 176.0]
    else:
        assert q[0, :3].tolist() == [3, -8, 51]
    # Per group, and per tensor (its first kernel's scale given to the second).
    grouped = torch.cat([x, 1e30 * x], dim=-1).repeat(2, 1)
    q, scales = sycl_kernels.dynamic_quantize(grouped, dtype=qdtype, group_size=16, scale_min=0.0)
    assert_same_q(q, divided(grouped, scales, qdtype))
    q, scale = sycl_kernels.dynamic_quantize_per_tensor(x, dtype=qdtype)
    assert_same_q(q, divided(x, scale.expand(1, 1), qdtype))
    # Given scales of every subnormal magnitude, and negative ones.
    x = torch.randn(4, 64) * torch.tensor([1e-38, 1e-42, 1.0, 1e30])[:, None]
    scale = torch.tensor([[2.0**-149, -3e-45], [1e-40, 2.0**-127], [1e-41, 1.1e-38], [-5e-39, 1.0]])
    for truncate in [False, True] if qdtype == INT8 else [False]:
        q = sycl_kernels.quantize(x, scale, dtype=qdtype, truncate=truncate)
        want = divided(x, scale, qdtype)
        if truncate:
            s = scale.double().repeat_interleave(32, dim=-1)
            want = torch.trunc((x.double() / s).clamp(-128.0, 127.0)).to(INT8)
        assert_same_q(q, want)


def test_fused_ops_with_a_subnormal_scale_divide() -> None:
    # A subnormal weight makes the norm's values, and their dynamic scales, subnormal.
    x, _ = _norm_inputs(torch.float32)
    tiny = torch.full((HIDDEN,), 1e-41)
    values, _ = references.rmsnorm_values(x, tiny, 1e-6)
    scale = torch.tensor([3e-43])
    for qdtype in QDTYPES:
        q = sycl_kernels.rmsnorm_quantize(x, tiny, scale, dtype=qdtype)
        assert_within_a_step((q, scale), (divided(values, scale, qdtype), scale))
    for group_size in (None, 64):
        q, scales = sycl_kernels.rmsnorm_dynamic_quantize(
            x, tiny, group_size=group_size, scale_min=0.0
        )
        assert torch.all(scales < 2.0**-128)
        assert_within_a_step((q, scales), (divided(values, scales, FP8), scales))
    gate_up = 1e-20 * torch.randn(ROWS, 2 * HIDDEN)
    values = references.silu_and_mul_values(gate_up)
    q = sycl_kernels.silu_and_mul_quantize(gate_up, scale)
    assert_within_a_step((q, scale), (divided(values, scale, FP8), scale))
    q, scales = sycl_kernels.silu_and_mul_dynamic_quantize(gate_up, dtype=INT8, scale_min=0.0)
    assert torch.all(scales < 2.0**-120)
    assert_within_a_step((q, scales), (divided(values, scales, INT8), scales))


@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
def test_extreme_values_against_division(qdtype: torch.dtype) -> None:
    # The largest floats, subnormals, zeros of both signs, each group its own mix.
    big = torch.finfo(torch.float32).max
    x = torch.randn(4, 128)
    x[0, :8] = torch.tensor([big, -big, 1e-45, -1e-45, 0.0, -0.0, big / 3, 1.0])
    x[1, :64] = 1e-45 * torch.randint(-50, 50, (64,))
    x[2] = big * torch.rand(128)
    for group_size in (None, 64):
        q, scales = sycl_kernels.dynamic_quantize(x, dtype=qdtype, group_size=group_size)
        want_q, want_scales = references.dynamic_quantize(x, qdtype, group_size)
        assert torch.equal(scales, want_scales)
        assert_same_q(q, want_q)
        assert_same_q(q, divided(x, scales, qdtype))
    qmax = references.QUANT_MAX[qdtype]
    assert q[0, 0].float() == qmax and q[0, 1].float() == (-448.0 if qdtype == FP8 else -127.0)


# Static scales: each form.


def _static_scale(form: str, rows: int, hidden: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(the scale given, as references.group_scales reads it: [rows, G])."""
    if form == "tensor":
        scale = torch.tensor([0.03])
    elif form == "tensor_0d":
        scale = torch.tensor(0.5)
    elif form == "row":
        scale = torch.rand(rows, 1) + 0.01
    elif form == "group":
        scale = torch.rand(rows, 4) + 0.01
    elif form == "group_transposed":
        scale = (torch.rand(4, rows) + 0.01).t()
    else:  # "block": 2 blocks of rows by 4 of columns
        scale = torch.rand(2, 4) + 0.01
    return scale, references.group_scales(scale, (rows,), hidden)


STATIC_FORMS = [
    ("tensor", torch.float32),
    ("tensor_0d", torch.float16),
    ("row", torch.float16),
    ("group", torch.bfloat16),
    ("group_transposed", torch.bfloat16),
    ("block", torch.float32),
]


@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
@pytest.mark.parametrize(("form", "dtype"), STATIC_FORMS, ids=[f for f, _ in STATIC_FORMS])
def test_quantize_static_scale_forms(form: str, dtype: torch.dtype, qdtype: torch.dtype) -> None:
    x = (3 * torch.randn(ROWS, HIDDEN)).to(dtype)
    scale, per_group = _static_scale(form, ROWS, HIDDEN)
    q = sycl_kernels.quantize(x, scale, dtype=qdtype)
    assert q.shape == x.shape and q.dtype == qdtype and q.is_contiguous()
    assert_same_q(q, references.quantize(x, per_group, qdtype))


def test_block_scales_are_shared_by_their_rows() -> None:
    x = torch.randn(8, 128)
    scale = torch.tensor([[1.0, 2.0], [4.0, 8.0]])  # 4 rows by 64 columns a block
    q = sycl_kernels.quantize(x, scale, dtype=INT8)
    blocks = torch.tensor([[1.0, 2.0]] * 4 + [[4.0, 8.0]] * 4)
    assert_same_q(q, references.quantize(x, blocks, INT8))


@pytest.mark.parametrize(
    ("scale", "message"),
    [
        (torch.ones(8, 3), "scale has shape (8, 3)"),  # 3 groups do not divide 256
        (torch.ones(3, 4), "its sizes must divide 8 and 256"),  # 3 blocks of 8 rows
        (torch.ones(2), "scale has shape (2,)"),
        (torch.ones(8, 1, 1), "scale has shape (8, 1, 1)"),
    ],
)
def test_quantize_rejects_a_scale_of_no_form(scale: torch.Tensor, message: str) -> None:
    with pytest.raises(ValueError, match=r"^quantize\(\): ") as info:
        sycl_kernels.quantize(torch.randn(ROWS, HIDDEN), scale)
    assert message in str(info.value)


# Layouts: strided and 3-D inputs, given outputs, column-major scales, empty inputs.


def _strided_inputs(hidden: int = HIDDEN) -> dict[str, torch.Tensor]:
    return {
        # Rows of a wider tensor, from one element in: unaligned, the scalar path.
        "slice": torch.randn(6, hidden + 24)[:, 1 : 1 + hidden],
        # A transposed 3-D view: leading strides that do not merge.
        "transposed_3d": torch.randn(3, 5, hidden).transpose(0, 1),
        "contiguous_3d": torch.randn(2, 3, hidden),
    }


@pytest.mark.parametrize("layout", ["slice", "transposed_3d", "contiguous_3d"])
def test_strided_and_3d_inputs(layout: str) -> None:
    x = _strided_inputs()[layout] * 4
    q, scales = sycl_kernels.dynamic_quantize(x, group_size=64)
    assert q.shape == x.shape and q.is_contiguous() and scales.shape == (*x.shape[:-1], 4)
    want_q, want_scales = references.dynamic_quantize(x, FP8, 64)
    assert torch.equal(scales, want_scales)
    assert_same_q(q, want_q)
    scale = torch.rand(*x.shape[:-1], 1) + 0.01
    assert_same_q(sycl_kernels.quantize(x, scale), references.quantize(x, scale, FP8))
    q, scale = sycl_kernels.dynamic_quantize_per_tensor(x)
    want_q, want_scale = references.dynamic_quantize_per_tensor(x, FP8)
    assert torch.equal(scale, want_scale)
    assert_same_q(q, want_q)


def test_given_out_and_scales_are_written_and_returned() -> None:
    x = _rows()
    wide_out = torch.zeros(ROWS, HIDDEN + 16, dtype=INT8)
    out = wide_out[:, :HIDDEN]
    # Given scales in any layout: transposed (stride 1 between rows).
    scales = torch.full((4, ROWS), math.nan).t()
    result = sycl_kernels.dynamic_quantize(x, dtype=INT8, group_size=64, out=out, scales=scales)
    assert result[0] is out and result[1] is scales
    want_q, want_scales = references.dynamic_quantize(x, INT8, 64)
    assert torch.equal(scales, want_scales)
    assert_same_q(out, want_q)
    assert torch.all(wide_out[:, HIDDEN:] == 0), "wrote past the end of an out row"
    static_out = torch.empty(ROWS, HIDDEN, dtype=INT8)
    assert sycl_kernels.quantize(x, scales, dtype=INT8, out=static_out) is static_out
    assert_same_q(static_out, want_q)


@pytest.mark.parametrize("op", ["dynamic_quantize", "silu_and_mul_dynamic_quantize"])
def test_column_major_scales(op: str) -> None:
    x = _rows(hidden=2 * HIDDEN) if op.startswith("silu") else _rows()
    fn = getattr(sycl_kernels, op)
    q, scales = fn(x, group_size=64, column_major_scales=True)
    assert scales.shape == (ROWS, 4) and scales.stride() == (1, ROWS)
    want_q, want_scales = fn(x, group_size=64)
    assert torch.equal(scales, want_scales)
    assert_same_q(q, want_q)
    # 3-D: the scales laid out [G, ...], returned with the groups last.
    _, scales3 = fn(x.view(2, 4, -1), group_size=64, column_major_scales=True)
    assert scales3.shape == (2, 4, 4) and scales3.movedim(-1, 0).is_contiguous()
    assert torch.equal(scales3.reshape(ROWS, 4), want_scales)


def _call_empty(op: str, x: torch.Tensor) -> object:
    fn = getattr(sycl_kernels, op)
    if op in ("quantize", "silu_and_mul_quantize"):
        return fn(x, torch.ones(1))
    if op == "rmsnorm_quantize":
        return fn(x, torch.ones(x.shape[-1]), torch.ones(1))
    if op == "rmsnorm_dynamic_quantize":
        return fn(x, torch.ones(x.shape[-1]), group_size=32)
    if op == "dynamic_quantize_per_tensor":
        return fn(x)
    return fn(x, group_size=32)


@pytest.mark.parametrize("op", sorted(n for n in sycl_kernels.ops.__all__ if "quantize" in n))
def test_empty_inputs(op: str) -> None:
    x = torch.randn(0, 3, 128)
    before = stats()
    result = _call_empty(op, x)
    assert (stats().hits, stats().misses) == (before.hits, before.misses), "a kernel was looked up"
    q, scales = result if isinstance(result, tuple) else (result, None)
    width = 64 if op.startswith("silu") else 128
    assert q.shape == (0, 3, width) and q.dtype == FP8
    if op == "dynamic_quantize_per_tensor":
        # No value: the scale of an absolute maximum of 0, scale_min (0 by default).
        assert scales.tolist() == [0.0]
        assert sycl_kernels.dynamic_quantize_per_tensor(x, scale_min=0.5)[1].tolist() == [0.5]
    elif scales is not None:
        assert scales.shape == (0, 3, width // 32)


@pytest.mark.parametrize("op", DYNAMIC_OPS)
def test_given_scales_of_no_values_are_written(op: str) -> None:
    # Per tensor, an empty x; per row, rows of no values: each scale the formula's for
    # an absolute maximum of 0, scale_min (ue8m0: rounded up), given or new alike.
    per_tensor = op.endswith("per_tensor")
    x = torch.empty(0, 64) if per_tensor else torch.empty(3, 0)
    fn = getattr(sycl_kernels, op)
    args = (x, torch.ones(0)) if op.startswith("rmsnorm") else (x,)
    fp8_min = references.default_scale_min(FP8)
    options = [({}, 0.0 if per_tensor else fp8_min), ({"scale_min": 0.25}, 0.25)]
    if not per_tensor:
        options += [({"ue8m0": True}, 2.0**-17), ({"ue8m0": True, "scale_min": 0.0}, 2.0**-126)]
        options += [({"dtype": INT8}, references.default_scale_min(INT8))]
    for kwargs, want in options:
        shape = (1,) if per_tensor else (3, 1)
        out = torch.empty(x.shape, dtype=kwargs.get("dtype", FP8))
        scales = torch.full(shape, math.nan)
        assert fn(*args, **kwargs, out=out, scales=scales)[1] is scales
        assert scales.tolist() == torch.full(shape, want).tolist(), kwargs
        assert torch.equal(fn(*args, **kwargs)[1], scales)
    if not per_tensor:  # per group: no groups, no scales
        assert fn(*args, group_size=16)[1].shape == (3, 0)


def test_rows_too_long_for_the_kernels_are_refused() -> None:
    # Checked on metadata: fake tensors, whose 2**31 values take no memory.
    with torch._subclasses.fake_tensor.FakeTensorMode():
        x = torch.empty(1, 2**31)
        with pytest.raises(ValueError, match=r"^dynamic_quantize\(\): x makes rows of 2147483648"):
            torch.ops.sycl_kernels.dynamic_quantize(x)
        with pytest.raises(ValueError, match=r"^silu_and_mul_quantize\(\): x makes rows of"):
            torch.ops.sycl_kernels.silu_and_mul_quantize(torch.empty(1, 2**31 + 2), torch.ones(1))


@pytest.mark.parametrize("op", ["dynamic_quantize", "rmsnorm_dynamic_quantize"])
def test_group_size_must_divide_the_rows(op: str) -> None:
    x = torch.randn(4, 96)
    args = (x, torch.ones(96)) if op.startswith("rmsnorm") else (x,)
    with pytest.raises(ValueError, match=rf"^{op}\(\): .*group_size 64"):
        getattr(sycl_kernels, op)(*args, group_size=64)
    with pytest.raises(ValueError, match=r"group_size"):
        sycl_kernels.silu_and_mul_dynamic_quantize(torch.randn(4, 192), group_size=64)
    # A group of a row smaller than the whole row: a multiple of 16 values.
    with pytest.raises(ValueError, match=rf"^{op}\(\): group_size is 8; expected a multiple of 16"):
        getattr(sycl_kernels, op)(*args, group_size=8)
    _, scales = getattr(sycl_kernels, op)(*args, group_size=96)  # the whole row: any size
    assert scales.shape == (4, 1)


@pytest.mark.parametrize("op", DYNAMIC_OPS)
def test_out_and_scales_are_given_together(op: str) -> None:
    x = torch.randn(4, 64)
    args = (x, torch.ones(64)) if op.startswith("rmsnorm") else (x,)
    width = 32 if op.startswith("silu") else 64
    out = torch.empty(4, width, dtype=FP8)
    scales = torch.empty(1) if op.endswith("per_tensor") else torch.empty(4, 1)
    fn = getattr(sycl_kernels, op)
    with pytest.raises(TypeError, match=rf"^{op}\(\): out, scales are given together"):
        fn(*args, out=out)
    with pytest.raises(TypeError, match=r"got only scales"):
        fn(*args, scales=scales)


def test_truncate_is_for_int8_only() -> None:
    with pytest.raises(ValueError, match=r"^quantize\(\): truncate=True rounds int8 only"):
        sycl_kernels.quantize(torch.randn(4, 64), torch.ones(1), truncate=True)
    with pytest.raises(ValueError, match=r"^dynamic_quantize\(\): truncate"):
        sycl_kernels.dynamic_quantize(torch.randn(4, 64), dtype=FP8, truncate=True)


# dynamic_quantize_per_tensor: one scale, from a first kernel.


@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dynamic_quantize_per_tensor_matches_reference(
    dtype: torch.dtype, qdtype: torch.dtype
) -> None:
    x = _rows(rows=33, dtype=dtype)  # the maximum of many rows' work-groups
    q, scale = sycl_kernels.dynamic_quantize_per_tensor(x, dtype=qdtype)
    assert scale.shape == (1,) and scale.dtype == torch.float32
    want_q, want_scale = references.dynamic_quantize_per_tensor(x, qdtype)
    assert torch.equal(scale, want_scale)
    assert_same_q(q, want_q)


@pytest.mark.parametrize(
    "options",
    [
        {"scale_ub": torch.tensor([3.0])},
        {"scale_min": 1.0},
        {"scale_ub": torch.tensor([3.0]), "scale_min": 1e-3},
    ],
    ids=["scale_ub", "scale_min", "both"],
)
def test_dynamic_quantize_per_tensor_options(options: dict) -> None:
    x = _rows()
    x[2, 9] = math.nan
    q, scale = sycl_kernels.dynamic_quantize_per_tensor(x, **options)
    want_q, want_scale = references.dynamic_quantize_per_tensor(x, FP8, **options)
    assert torch.equal(scale, want_scale)
    assert_same_q(q, want_q)


@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
def test_dynamic_quantize_per_tensor_of_zeros(qdtype: torch.dtype) -> None:
    x = torch.zeros(5, HIDDEN)
    out, scale = torch.full((5, HIDDEN), 7, dtype=INT8).to(qdtype), torch.full((1,), 9.0)
    result = sycl_kernels.dynamic_quantize_per_tensor(x, dtype=qdtype, out=out, scales=scale)
    assert result[0] is out and result[1] is scale
    assert scale.tolist() == [0.0] and torch.all(out.float() == 0)


def test_dynamic_quantize_per_tensor_with_inf() -> None:
    x = torch.randn(4, HIDDEN)
    x[1, 5] = math.inf
    q, scale = sycl_kernels.dynamic_quantize_per_tensor(x)
    want_q, want_scale = references.dynamic_quantize_per_tensor(x, FP8)
    assert scale.item() == math.inf and torch.equal(scale, want_scale)
    assert_same_q(q, want_q)
    q, scale = sycl_kernels.dynamic_quantize_per_tensor(x, dtype=INT8, scale_ub=torch.ones(1))
    assert scale == torch.tensor(1.0) / 127 and q[1, 5] == 127


# rmsnorm_quantize, rmsnorm_dynamic_quantize.


def _norm_inputs(dtype: torch.dtype, rows: int = ROWS, hidden: int = HIDDEN):
    x = (4 * torch.randn(rows, hidden)).to(dtype)
    return x, (1 + 0.5 * torch.randn(hidden)).to(dtype)


@pytest.mark.parametrize("group_size", [None, 64])
@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rmsnorm_dynamic_quantize_matches_reference(
    dtype: torch.dtype, qdtype: torch.dtype, group_size: int | None
) -> None:
    x, weight = _norm_inputs(dtype)
    got = sycl_kernels.rmsnorm_dynamic_quantize(
        x, weight, 1e-6, dtype=qdtype, group_size=group_size
    )
    values, _ = references.rmsnorm_values(x, weight, 1e-6)
    assert_within_a_step(got, references.dynamic_quantize(values, qdtype, group_size))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rmsnorm_dynamic_quantize_with_residual(dtype: torch.dtype) -> None:
    x, weight = _norm_inputs(dtype)
    residual = (4 * torch.randn(ROWS, HIDDEN)).to(dtype)
    values, want_residual = references.rmsnorm_values(x, weight, 1e-6, residual)
    x_before = x.clone()
    got = sycl_kernels.rmsnorm_dynamic_quantize(
        x, weight, residual=residual, group_size=128, ue8m0=True
    )
    assert torch.equal(residual, want_residual), "residual is x + residual, rounded"
    assert torch.equal(x, x_before), "x is only read"
    assert_within_a_step(got, references.dynamic_quantize(values, FP8, 128, round_to_ue8m0=True))


@pytest.mark.parametrize("weight_kind", ["none", "fp32"])
def test_rmsnorm_dynamic_quantize_weight_kinds(weight_kind: str) -> None:
    x, weight = _norm_inputs(torch.bfloat16)
    weight = None if weight_kind == "none" else weight.float() + 0.001
    got = sycl_kernels.rmsnorm_dynamic_quantize(x, weight, 1e-5, dtype=INT8, scale_min=0.0)
    values, _ = references.rmsnorm_values(x, weight, 1e-5)
    assert_within_a_step(got, references.dynamic_quantize(values, INT8, scale_min=0.0))


NORM_FORMS = STATIC_FORMS[::2]


@pytest.mark.parametrize(("form", "dtype"), NORM_FORMS, ids=[f for f, _ in NORM_FORMS])
def test_rmsnorm_quantize_static(form: str, dtype: torch.dtype) -> None:
    x, weight = _norm_inputs(dtype)
    scale, per_group = _static_scale(form, ROWS, HIDDEN)
    q = sycl_kernels.rmsnorm_quantize(x, weight, scale, 1e-6, dtype=INT8)
    values, _ = references.rmsnorm_values(x, weight, 1e-6)
    assert_within_a_step((q, scale), (references.quantize(values, per_group, INT8), scale))


def test_rmsnorm_quantize_with_residual_strided_and_out() -> None:
    wide_x, wide_r = torch.randn(6, HIDDEN + 8), torch.randn(6, HIDDEN + 8)
    x, residual = wide_x[:, 3 : 3 + HIDDEN], wide_r[:, 1 : 1 + HIDDEN]
    weight = torch.randn(HIDDEN)
    values, want_residual = references.rmsnorm_values(x, weight, 1e-6, residual)
    out = torch.empty(6, HIDDEN, dtype=FP8)
    scale = torch.tensor([0.01])
    result = sycl_kernels.rmsnorm_quantize(x, weight, scale, residual=residual, out=out)
    assert result is out
    assert torch.equal(residual, want_residual)
    want = references.quantize(values, scale.expand(6, 1), FP8)
    assert_within_a_step((out, scale), (want, scale))


# silu_and_mul_quantize, silu_and_mul_dynamic_quantize.


# float32 values are not rounded either way: one case.
SILU_VALUES = [(d, r) for d in DTYPES for r in (True, False) if r or d != torch.float32]


@pytest.mark.parametrize("qdtype", QDTYPES, ids=str)
@pytest.mark.parametrize(
    ("dtype", "rounded"),
    SILU_VALUES,
    ids=[f"{d}-{'rounded' if r else 'float32'}" for d, r in SILU_VALUES],
)
def test_silu_and_mul_dynamic_quantize_matches_reference(
    dtype: torch.dtype, rounded: bool, qdtype: torch.dtype
) -> None:
    x = (3 * torch.randn(ROWS, 2 * HIDDEN)).to(dtype)
    group_size = 64 if qdtype == INT8 else None
    got = sycl_kernels.silu_and_mul_dynamic_quantize(
        x, dtype=qdtype, group_size=group_size, rounded=rounded
    )
    assert got[0].shape == (ROWS, HIDDEN)
    values = references.silu_and_mul_values(x, rounded)
    assert_within_a_step(got, references.dynamic_quantize(values, qdtype, group_size))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_silu_and_mul_quantize_static(dtype: torch.dtype) -> None:
    # 3-D, a scale per group of 64; the unfused pair's values (rounded).
    x = (3 * torch.randn(2, 4, 2 * HIDDEN)).to(dtype)
    scale = torch.rand(2, 4, 4) + 0.01
    q = sycl_kernels.silu_and_mul_quantize(x, scale, dtype=INT8)
    assert q.shape == (2, 4, HIDDEN)
    want = references.quantize(references.silu_and_mul_values(x), scale, INT8)
    assert_within_a_step((q, scale), (want, scale))


def test_silu_and_mul_quantize_strided_and_out() -> None:
    x = (3 * torch.randn(5, 2 * HIDDEN + 6))[:, 2 : 2 + 2 * HIDDEN]
    wide_out = torch.zeros(5, HIDDEN + 4, dtype=INT8)
    out = wide_out[:, :HIDDEN]
    scale = torch.rand(5, 1) + 0.01
    assert sycl_kernels.silu_and_mul_quantize(x, scale, dtype=INT8, truncate=True, out=out) is out
    values = references.silu_and_mul_values(x)
    assert_within_a_step((out, scale), (references.quantize(values, scale, INT8, True), scale))
    assert torch.all(wide_out[:, HIDDEN:] == 0)


# The gpu tuning: XPU tensors get it; checked here on the CPU device.


def test_gpu_tuned_kernels_compute_the_same(tuning_override: Callable[[str], None]) -> None:
    tuning_override("gpu")
    x = _rows(dtype=torch.bfloat16)
    for group_size in (None, 64):
        q, scales = sycl_kernels.dynamic_quantize(x, group_size=group_size)
        want_q, want_scales = references.dynamic_quantize(x, FP8, group_size)
        assert torch.equal(scales, want_scales)
        assert_same_q(q, want_q)
    q, scale = sycl_kernels.dynamic_quantize_per_tensor(x, dtype=INT8)
    want_q, want_scale = references.dynamic_quantize_per_tensor(x, INT8)
    assert torch.equal(scale, want_scale)
    assert_same_q(q, want_q)
    x, weight = _norm_inputs(torch.bfloat16)
    got = sycl_kernels.rmsnorm_dynamic_quantize(x, weight, group_size=64)
    values, _ = references.rmsnorm_values(x, weight, 1e-6)
    assert_within_a_step(got, references.dynamic_quantize(values, FP8, 64))


# The inputs of the suite-wide tests: the bad-input matrix, opcheck, run once
# (tests/ops/cases.py). Every argument, int8 (any tensor operation takes it).


def _quantize_args() -> dict[str, object]:
    return {
        "x": torch.randn(4, 64),
        "scale": torch.rand(4, 2) + 0.01,
        "dtype": INT8,
        "truncate": False,
        "out": torch.zeros(4, 64, dtype=INT8),
    }


def _dynamic_args(width: int = 64) -> dict[str, object]:
    return {
        "x": torch.randn(4, width),
        "dtype": INT8,
        "group_size": 32,
        "scale_ub": torch.tensor([100.0]),
        "scale_min": 1e-6,
        "ue8m0": False,
        "truncate": False,
        "column_major_scales": False,
        "out": torch.zeros(4, 64, dtype=INT8),
        "scales": torch.zeros(4, 2),
    }


def _per_tensor_args() -> dict[str, object]:
    # No out and scales: its scale is not a row's, so the zero-token call
    # (tests/ops/test_bad_inputs.py) could not cut it; their checks are tested above.
    return {"x": torch.randn(4, 64), "dtype": INT8, "scale_ub": torch.tensor([100.0])}


def _rmsnorm_args() -> dict[str, object]:
    return {
        "x": torch.randn(4, 64),
        "weight": torch.randn(64),
        "scale": torch.rand(4, 2) + 0.01,
        "eps": 1e-6,
        "residual": torch.randn(4, 64),
        "dtype": INT8,
        "truncate": False,
        "out": torch.zeros(4, 64, dtype=INT8),
    }


def _rmsnorm_dynamic_args() -> dict[str, object]:
    args = _dynamic_args()
    return {"weight": torch.randn(64), "eps": 1e-6, "residual": torch.randn(4, 64), **args}


def _silu_args() -> dict[str, object]:
    return {**_quantize_args(), "x": torch.randn(4, 128), "rounded": True}


def _silu_dynamic_args() -> dict[str, object]:
    return {**_dynamic_args(128), "rounded": True}


X = f"{cases.FLOAT} zero_dim last_dim_plus_one last_stride_2"
# Any width is valid per tensor; per group, a wider x is refused by group_size's check
# (test_group_size_must_divide_the_rows).
X_ANY_WIDTH = f"{cases.FLOAT} zero_dim last_stride_2"
SCALE = f"{cases.FLOAT} float16 extra_dim missing_dim last_dim_plus_one"
SCALE_UB = f"{cases.FLOAT} float16 last_dim_plus_one"
Q_OUT = f"{cases.FLOAT} float16 float32 extra_dim zero_dim last_dim_plus_one last_stride_2"
Q_OUT += " overlapping_rows"
SCALES = f"{cases.FLOAT} float16 extra_dim missing_dim zero_dim last_dim_plus_one overlapping_rows"
RESIDUAL = f"{cases.FLOAT} extra_dim zero_dim last_dim_plus_one last_stride_2 overlapping_rows"
DTYPE = [(torch.float16, TypeError), (None, TypeError), ("int8", TypeError)]
# 48 does not divide 64; 8 is not a multiple of 16.
GROUP_SIZE = [
    (0, ValueError),
    (48, ValueError),
    (8, ValueError),
    (1.5, TypeError),
    ("32", TypeError),
]
SCALE_MIN = [("1e-6", TypeError), (True, TypeError), (-1.0, ValueError), (math.nan, ValueError)]
DYNAMIC_SCALARS = {
    "dtype": DTYPE,
    "group_size": GROUP_SIZE,
    "scale_min": SCALE_MIN,
    "ue8m0": cases.BOOL,
    "truncate": cases.BOOL,
    "column_major_scales": cases.BOOL,
}
STATIC_SCALARS = {"dtype": DTYPE, "truncate": cases.BOOL}
DYNAMIC_TENSORS = {"x": X, "scale_ub": SCALE_UB, "out": Q_OUT, "scales": SCALES}
STATIC_TENSORS = {"x": X, "scale": SCALE, "out": Q_OUT}
NORM_TENSORS = {"weight": cases.NORM_WEIGHT, "residual": RESIDUAL}


def _opcheck_samples() -> list[tuple[str, tuple]]:
    x, w, scale = torch.randn(4, 64), torch.randn(64), torch.rand(4, 2) + 0.01
    x2, ub = torch.randn(4, 128), torch.tensor([2.0])
    q8 = torch.empty(4, 64, dtype=INT8)
    quantize_args = (x, scale, FP8, False)
    dynamic_args = (x, INT8, 32, ub, None, False, False, True)
    per_tensor_args = (x, FP8, None, 1e-4)
    rmsnorm_args = (x, w, scale, 1e-6, torch.randn(4, 64), INT8, True)
    rmsnorm_dynamic_args = (x, w, 1e-6, None, FP8, None, None, None, True, False, False)
    residual = torch.randn(4, 64)
    rmsnorm_dynamic_out_args = (x, w, 1e-6, residual, INT8, 32, ub, 1e-3, False, True, False)
    silu_args = (x2, scale, FP8, False, False)
    silu_dynamic_args = (x2, INT8, None, None, 0.0, False, True, True, False)
    # fp8 for the functional ops, int8 written by the _out ones: opcheck's schema test
    # multiplies what an op writes, which torch does not do on CPU in float8.
    return [
        ("quantize", quantize_args),
        ("quantize_out", (x, scale, INT8, True, q8.clone())),
        ("dynamic_quantize", dynamic_args),
        ("dynamic_quantize_out", (*dynamic_args, q8.clone(), torch.empty(2, 4).t())),
        ("dynamic_quantize_per_tensor", per_tensor_args),
        ("dynamic_quantize_per_tensor_out", (x, INT8, ub, None, q8.clone(), torch.empty(1))),
        ("rmsnorm_quantize", rmsnorm_args),
        ("rmsnorm_quantize_out", (*rmsnorm_args[:4], None, *rmsnorm_args[5:], q8.clone())),
        ("rmsnorm_dynamic_quantize", rmsnorm_dynamic_args),
        (
            "rmsnorm_dynamic_quantize_out",
            (*rmsnorm_dynamic_out_args, q8.clone(), torch.empty(4, 2)),
        ),
        ("silu_and_mul_quantize", silu_args),
        ("silu_and_mul_quantize_out", (x2, scale, INT8, False, True, q8.clone())),
        ("silu_and_mul_dynamic_quantize", silu_dynamic_args),
        ("silu_and_mul_dynamic_quantize_out", (*silu_dynamic_args, q8.clone(), torch.empty(4, 1))),
    ]


# Run once: a width no manifest variant has (4096, 7168, 14336).
WIDTH = 240


def _once_quantize(op: Callable[..., object], dtype: torch.dtype) -> None:
    x, scale = _rows(5, WIDTH, dtype), torch.rand(5, 1) + 0.01
    assert_same_q(op(x, scale), references.quantize(x, scale, FP8))


def _once_dynamic(op: Callable[..., object], dtype: torch.dtype) -> None:
    x = _rows(5, WIDTH, dtype)
    q, scales = op(x, dtype=INT8, group_size=48)
    want_q, want_scales = references.dynamic_quantize(x, INT8, 48)
    assert torch.equal(scales, want_scales)
    assert_same_q(q, want_q)


def _once_per_tensor(op: Callable[..., object], dtype: torch.dtype) -> None:
    x = _rows(5, WIDTH, dtype)
    q, scale = op(x)
    want_q, want_scale = references.dynamic_quantize_per_tensor(x, FP8)
    assert torch.equal(scale, want_scale)
    assert_same_q(q, want_q)


def _once_rmsnorm(op: Callable[..., object], dtype: torch.dtype, *, dynamic: bool) -> None:
    x, weight = _norm_inputs(dtype, 5, WIDTH)
    values, _ = references.rmsnorm_values(x, weight, 1e-6)
    if dynamic:
        assert_within_a_step(op(x, weight), references.dynamic_quantize(values, FP8))
    else:
        scale = torch.tensor([0.02])
        want = references.quantize(values, scale.expand(5, 1), FP8)
        assert_within_a_step((op(x, weight, scale), scale), (want, scale))


def _once_silu(op: Callable[..., object], dtype: torch.dtype, *, dynamic: bool) -> None:
    x = (3 * torch.randn(5, 2 * WIDTH)).to(dtype)
    values = references.silu_and_mul_values(x)
    if dynamic:
        assert_within_a_step(op(x), references.dynamic_quantize(values, FP8))
    else:
        scale = torch.rand(5, 1) + 0.01
        want = references.quantize(values, scale, FP8)
        assert_within_a_step((op(x, scale), scale), (want, scale))


cases.register(
    cases.OpCase("quantize", _quantize_args, STATIC_TENSORS, STATIC_SCALARS),
    cases.OpCase(
        "dynamic_quantize", _dynamic_args, {**DYNAMIC_TENSORS, "x": X_ANY_WIDTH}, DYNAMIC_SCALARS
    ),
    cases.OpCase(
        "dynamic_quantize_per_tensor",
        _per_tensor_args,
        {"x": X_ANY_WIDTH, "scale_ub": SCALE_UB},
        {"dtype": DTYPE, "scale_min": SCALE_MIN},
    ),
    cases.OpCase(
        "rmsnorm_quantize",
        _rmsnorm_args,
        {**STATIC_TENSORS, **NORM_TENSORS},
        {**STATIC_SCALARS, "eps": cases.NON_NEGATIVE},
    ),
    cases.OpCase(
        "rmsnorm_dynamic_quantize",
        _rmsnorm_dynamic_args,
        {**DYNAMIC_TENSORS, **NORM_TENSORS},
        {**DYNAMIC_SCALARS, "eps": cases.NON_NEGATIVE},
    ),
    cases.OpCase(
        "silu_and_mul_quantize",
        _silu_args,
        STATIC_TENSORS,
        {**STATIC_SCALARS, "rounded": cases.BOOL},
    ),
    cases.OpCase(
        "silu_and_mul_dynamic_quantize",
        _silu_dynamic_args,
        DYNAMIC_TENSORS,
        {**DYNAMIC_SCALARS, "rounded": cases.BOOL},
    ),
    opcheck=_opcheck_samples,
    once={
        "quantize": cases.OnceCase(_once_quantize),
        "dynamic_quantize": cases.OnceCase(_once_dynamic),
        "dynamic_quantize_per_tensor": cases.OnceCase(_once_per_tensor),
        "rmsnorm_quantize": cases.OnceCase(functools.partial(_once_rmsnorm, dynamic=False)),
        "rmsnorm_dynamic_quantize": cases.OnceCase(functools.partial(_once_rmsnorm, dynamic=True)),
        "silu_and_mul_quantize": cases.OnceCase(functools.partial(_once_silu, dynamic=False)),
        "silu_and_mul_dynamic_quantize": cases.OnceCase(
            functools.partial(_once_silu, dynamic=True)
        ),
    },
)
