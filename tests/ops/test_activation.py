"""Activations against float64 references: every activation, dtype, odd sizes, out=.

The gated ones (act(gate) * up: the halves of x, fatrelu's threshold, swigluoai's
interleaved gate and up) and the elementwise ones (act(x): gelu_tanh, gelu_quick).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable

import pytest
import sycl_kernels
import torch
from sycl_kernels import _dtypes as dtype_table

from tests import references
from tests.grids import pairwise
from tests.ops import cases

OPS = ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"]
DTYPES = [d.torch_dtype for d in dtype_table.DTYPES]


# Pairwise (tests/grids.py), not the product: the three ops share gated.hpp's row loop
# (the activation is one template value), so every (dim, dtype) kernel class runs, each
# op at every dim and in every dtype, and each row count with each of them.
@pytest.mark.parametrize(
    ("op", "rows", "dim", "dtype"), pairwise(OPS, [1, 33], [1, 1000, 4096, 11008], DTYPES), ids=str
)
def test_act_and_mul(op: str, rows: int, dim: int, dtype: torch.dtype) -> None:
    x = (3 * torch.randn(rows, 2 * dim)).to(dtype)
    got = getattr(sycl_kernels, op)(x)
    assert got.shape == (rows, dim) and got.dtype == dtype
    torch.testing.assert_close(
        got.double(), references.act_and_mul(op, x), **references.tolerance(dtype)
    )


@pytest.mark.parametrize("op", OPS)
def test_act_and_mul_out_and_leading_dims(op: str) -> None:
    x = torch.randn(2, 3, 2 * 520)
    wide_out = torch.zeros(6, 530)
    out = wide_out[:, :520]
    result = getattr(sycl_kernels, op)(x.view(6, 1040), out=out)
    assert result is out
    torch.testing.assert_close(
        out.double(),
        references.act_and_mul(op, x.view(6, 1040)),
        **references.tolerance(torch.float32),
    )
    assert torch.all(wide_out[:, 520:] == 0)
    got = getattr(sycl_kernels, op)(x)
    assert got.shape == (2, 3, 520)
    torch.testing.assert_close(
        got.double(), references.act_and_mul(op, x), **references.tolerance(torch.float32)
    )


@pytest.mark.parametrize(
    ("x", "out", "error", "message"),
    [
        (torch.randn(4, 7), None, ValueError, "x has shape (4, 7); expected [..., 2 * d]"),
        (torch.randn(4, 8).int(), None, TypeError, "x has dtype torch.int32"),
        (torch.randn(8, 4).t(), None, ValueError, "x has stride 4"),
        (torch.randn(4, 8), torch.empty(4, 8), ValueError, "out has shape (4, 8); expected (4, 4)"),
        (torch.randn(4, 8), torch.empty(4, 4).half(), TypeError, "out has dtype torch.float16"),
    ],
)
@pytest.mark.parametrize("op", OPS)
def test_act_and_mul_rejects_bad_input(op: str, x, out, error, message: str) -> None:
    with pytest.raises(error) as info:
        getattr(sycl_kernels, op)(x, out=out)
    assert str(info.value).startswith(f"{op}(): ") and message in str(info.value)


@pytest.mark.parametrize("op", OPS)
def test_gpu_tuned_kernels_compute_the_same(
    op: str, tuning_override: Callable[[str], None]
) -> None:
    # XPU tensors get the "gpu" tuning; checked here on the CPU device.
    tuning_override("gpu")
    x = torch.randn(7, 2 * 1000).to(torch.bfloat16)
    out = getattr(sycl_kernels, op)(x)
    torch.testing.assert_close(
        out.double(), references.act_and_mul(op, x), **references.tolerance(torch.bfloat16)
    )


@pytest.mark.parametrize("op", OPS)
def test_act_and_mul_keeps_relative_accuracy_far_below_zero(op: str) -> None:
    # gelu(-5) is about -1.4e-6: written as 1 + erf(z) (or 1 + tanh(z)) in float32 it
    # cancels to a few ulps of 1; a large multiplier then shows the lost digits.
    a = torch.linspace(-9.0, -3.0, 512)
    x = torch.cat([a, torch.full_like(a, 100.0)])[None, :]
    want = references.act_and_mul(op, x)
    torch.testing.assert_close(getattr(sycl_kernels, op)(x).double(), want, rtol=1e-5, atol=0)


# fatrelu_and_mul and swigluoai_and_mul: gated, with float parameters. Odd sizes (999)
# take the vector path on even rows and the scalar one where a row starts unaligned.

PARAM_OPS = ["fatrelu_and_mul", "swigluoai_and_mul"]
ELEMENTWISE = ["gelu_tanh", "gelu_quick"]
ODD = 999


def _param_reference(op: str, x: torch.Tensor, *params: float) -> torch.Tensor:
    return getattr(references, op)(x, *params)


# Parameters each op is called with in the grid: fatrelu's threshold; swigluoai's
# defaults (alpha=1.702, limit=7.0) and others, with a limit the inputs cross.
PARAMS = {"fatrelu_and_mul": [(0.0,), (0.3,)], "swigluoai_and_mul": [(), (1.0, 2.5)]}
# Every dtype at the odd size, and rows of one element (no whole vector step: a
# bfloat16 step is a pair). Few sizes: each (op, dtype, size) is a kernel to compile.
SIZES = [*((ODD, dtype) for dtype in DTYPES), (1, torch.bfloat16)]


@pytest.mark.parametrize(("dim", "dtype"), SIZES, ids=str)
@pytest.mark.parametrize(
    ("op", "params"), [(op, p) for op in PARAM_OPS for p in PARAMS[op]], ids=str
)
def test_parametrized_gated(op: str, params: tuple, dim: int, dtype: torch.dtype) -> None:
    x = (4 * torch.randn(33, 2 * dim)).to(dtype)
    got = getattr(sycl_kernels, op)(x, *params)
    assert got.shape == (33, dim) and got.dtype == dtype
    want = _param_reference(op, x, *params)
    if op == "fatrelu_and_mul":
        # gate or 0, times up: the exact product rounded once, bit for bit (as vLLM's).
        assert torch.equal(got, want.to(dtype))
    else:
        torch.testing.assert_close(got.double(), want, **references.tolerance(dtype))


def test_fatrelu_compares_strictly_and_zeroes_nan() -> None:
    # vLLM's kernel: gate > threshold ? gate : 0, so gate == threshold and NaN give 0.
    gate = torch.tensor([[0.5, 0.5000001, -1.0, math.nan, math.inf, 2.0]])
    up = torch.tensor([[3.0, 3.0, 3.0, 3.0, 3.0, math.nan]])
    got = sycl_kernels.fatrelu_and_mul(torch.cat([gate, up], -1), 0.5)
    want = torch.tensor([[0.0, 1.5000003, 0.0, 0.0, math.inf, math.nan]])
    torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)


def test_swigluoai_reads_gate_and_up_interleaved() -> None:
    # gate x[..., 0::2], up x[..., 1::2] (gpt-oss, vLLM); the halves would give others.
    x = torch.randn(7, 2 * ODD) * 4
    got = sycl_kernels.swigluoai_and_mul(x)
    gate, up = x[:, 0::2].double(), x[:, 1::2].double()
    want = (up.clamp(-7, 7) + 1) * gate.clamp(max=7) * torch.sigmoid(1.702 * gate.clamp(max=7))
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    halves = torch.cat([x[:, 0::2], x[:, 1::2]], -1)
    assert not torch.allclose(sycl_kernels.swigluoai_and_mul(halves), got)


@pytest.mark.parametrize("op", PARAM_OPS)
def test_parametrized_gated_strided_out_and_empty(op: str) -> None:
    # Rows of a wider tensor, one element in (unaligned: the scalar path), 3-D.
    wide = torch.randn(2, 3, 2 * ODD + 5) * 4
    x = wide[..., 1 : 1 + 2 * ODD]
    wide_out = torch.zeros(2, 3, ODD + 3)
    out = wide_out[..., :ODD]
    params = PARAMS[op][1]
    assert getattr(sycl_kernels, op)(x, *params, out=out) is out
    torch.testing.assert_close(out.double(), _param_reference(op, x, *params), rtol=1e-5, atol=1e-5)
    assert torch.all(wide_out[..., ODD:] == 0)
    assert getattr(sycl_kernels, op)(x[:0], *params).shape == (0, 3, ODD)


@pytest.mark.parametrize("op", PARAM_OPS)
def test_parametrized_gated_gpu_tuned(op: str, tuning_override: Callable[[str], None]) -> None:
    tuning_override("gpu")
    x = (4 * torch.randn(7, 2 * ODD)).to(torch.bfloat16)
    got = getattr(sycl_kernels, op)(x, *PARAMS[op][1])
    torch.testing.assert_close(
        got.double(),
        _param_reference(op, x, *PARAMS[op][1]),
        **references.tolerance(torch.bfloat16),
    )


@pytest.mark.parametrize(
    ("op", "message"),
    [
        ("fatrelu_and_mul", "threshold is NaN"),
        ("swigluoai_and_mul", "limit must be at least 0.0, got -1.0"),
    ],
)
def test_parametrized_gated_rejects_bad_parameters(op: str, message: str) -> None:
    bad = (math.nan,) if op == "fatrelu_and_mul" else (1.702, -1.0)
    with pytest.raises(ValueError, match=re.escape(f"{op}(): {message}")):
        getattr(sycl_kernels, op)(torch.randn(4, 8), *bad)


# Elementwise: out = act(x).


@pytest.mark.parametrize(("dim", "dtype"), SIZES, ids=str)
@pytest.mark.parametrize("op", ELEMENTWISE)
def test_elementwise(op: str, dim: int, dtype: torch.dtype) -> None:
    x = (3 * torch.randn(33, dim)).to(dtype)
    got = getattr(sycl_kernels, op)(x)
    assert got.shape == x.shape and got.dtype == dtype and got.is_contiguous()
    torch.testing.assert_close(
        got.double(), references.activation(op, x), **references.tolerance(dtype)
    )


@pytest.mark.parametrize("op", ELEMENTWISE)
def test_elementwise_at_a_manifest_width(op: str) -> None:
    x = (3 * torch.randn(5, 4096)).to(torch.bfloat16)
    references.assert_close(getattr(sycl_kernels, op)(x), references.activation(op, x))


@pytest.mark.parametrize("op", ELEMENTWISE)
def test_elementwise_strided_out_in_place_and_empty(op: str) -> None:
    # A transposed 4-D view whose three leading dimensions cannot merge.
    x = torch.randn(2, 5, 3, ODD + 11)[..., :ODD].transpose(1, 2)
    want = references.activation(op, x)
    wide_out = torch.zeros(2, 3, 5, ODD + 4)
    out = wide_out[..., :ODD]
    assert getattr(sycl_kernels, op)(x, out=out) is out
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-5)
    assert torch.all(wide_out[..., ODD:] == 0)
    y = x.clone()
    assert getattr(sycl_kernels, op)(y, out=y) is y
    torch.testing.assert_close(y, out, rtol=0, atol=0)
    assert getattr(sycl_kernels, op)(x[:, :, :0]).shape == (2, 3, 0, ODD)
    assert getattr(sycl_kernels, op)(torch.empty(4, 0)).shape == (4, 0)


@pytest.mark.parametrize("op", ELEMENTWISE)
def test_elementwise_gpu_tuned(op: str, tuning_override: Callable[[str], None]) -> None:
    tuning_override("gpu")
    x = (3 * torch.randn(7, ODD)).to(torch.bfloat16)
    references.assert_close(getattr(sycl_kernels, op)(x), references.activation(op, x))


@pytest.mark.parametrize("op", ELEMENTWISE)
def test_elementwise_keeps_relative_accuracy_far_below_zero(op: str) -> None:
    x = torch.linspace(-9.0, -3.0, ODD)[None, :]
    want = references.activation(op, x)
    torch.testing.assert_close(getattr(sycl_kernels, op)(x).double(), want, rtol=1e-5, atol=0)


@pytest.mark.parametrize("op", [*ELEMENTWISE, *PARAM_OPS])
def _call(op: str, x: torch.Tensor) -> torch.Tensor:
    """A new op on x; the gated ones with their second parameters (PARAMS)."""
    return getattr(sycl_kernels, op)(x, *PARAMS.get(op, [(), ()])[1])


def _reference(op: str, x: torch.Tensor) -> torch.Tensor:
    """_call's float64 reference."""
    if op in ELEMENTWISE:
        return references.activation(op, x)
    return _param_reference(op, x, *PARAMS[op][1])


def _width(op: str) -> int:
    return ODD if op in ELEMENTWISE else 2 * ODD


@pytest.mark.parametrize("op", [*ELEMENTWISE, *PARAM_OPS])
def test_new_activations_propagate_nan_and_inf(op: str) -> None:
    width = _width(op)
    x = torch.randn(4, width) * 4
    # In gate and in up of the gated ops (both layouts), at both signs of Inf.
    for row, column, special in (
        (0, 3, math.nan),
        (1, 500, math.inf),
        (2, width - 9, -math.inf),
        (3, width - 1, math.nan),
    ):
        x[row, column] = special
    torch.testing.assert_close(
        _call(op, x).double(), _reference(op, x), equal_nan=True, rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("op", [*ELEMENTWISE, *PARAM_OPS])
def test_new_activations_gradients(op: str) -> None:
    x = (4 * torch.randn(3, _width(op))).requires_grad_()
    got = _call(op, x)
    grad = torch.randn_like(got)
    (got_grad,) = torch.autograd.grad(got, x, grad)
    x64 = x.detach().double().requires_grad_()
    (want_grad,) = torch.autograd.grad(_reference(op, x64), x64, grad.double())
    torch.testing.assert_close(got_grad.double(), want_grad, rtol=1e-4, atol=1e-4)


# The inputs of the suite-wide tests: the bad-input matrix and opcheck (tests/ops/cases.py).


def _act_args() -> dict[str, object]:
    return {"x": torch.randn(4, 64), "gate_first": True, "out": torch.zeros(4, 32)}


def _act_and_mul_args() -> dict[str, object]:
    return {
        "gate": torch.randn(4, 32),
        "up": torch.randn(4, 32),
        "activation": "silu",
        "out": torch.zeros(4, 32),
    }


ACT_OUT = f"{cases.FLOAT} extra_dim zero_dim last_dim_plus_one last_stride_2 overlapping_rows"


def _param_args(op: str) -> dict[str, object]:
    names = ("threshold",) if op == "fatrelu_and_mul" else ("alpha", "limit")
    return {
        "x": torch.randn(4, 64),
        **dict(zip(names, PARAMS[op][1], strict=True)),
        "out": torch.zeros(4, 32),
    }


def _elementwise_args() -> dict[str, object]:
    return {"x": torch.randn(4, 64), "out": torch.zeros(4, 64)}


def _opcheck_samples() -> list[tuple[str, tuple]]:
    samples = [("act_and_mul", (torch.randn(4, 64), torch.randn(4, 64), "gelu_tanh"))]
    for op in OPS:
        x2 = torch.randn(4, 128)
        samples += [(op, (x2,)), (f"{op}_out", (x2, False, torch.empty(4, 64)))]
    # The sizes of the tests above: their kernels, compiled once.
    for op in PARAM_OPS:
        x = torch.randn(4, 2 * ODD) * 4
        samples += [(op, (x, *PARAMS[op][1])), (f"{op}_out", (x, *PARAMS[op][1], x[:, :ODD] * 0))]
    for op in ELEMENTWISE:
        x = torch.randn(4, ODD) * 3
        samples += [(op, (x.bfloat16(),)), (f"{op}_out", (x, torch.empty(4, ODD)))]
    return samples


def _once_elementwise(op: Callable[..., object], dtype: torch.dtype, *, name: str) -> None:
    x = (3 * torch.randn(5, ODD)).to(dtype)
    got = op(x)
    assert got.dtype == dtype
    references.assert_close(got, references.activation(name, x))


def _once_param(op: Callable[..., object], dtype: torch.dtype, *, name: str) -> None:
    x = (4 * torch.randn(5, 2 * ODD)).to(dtype)
    got = op(x, *PARAMS[name][1])
    assert got.dtype == dtype
    references.assert_close(got, _param_reference(name, x, *PARAMS[name][1]))


def _once_halves(op: Callable[..., object], dtype: torch.dtype, *, name: str) -> None:
    x = (3 * torch.randn(5, 2 * ODD)).to(dtype)
    got = op(x)
    assert got.dtype == dtype
    references.assert_close(got, references.act_and_mul(name, x))


def _once_act_and_mul(op: Callable[..., object], dtype: torch.dtype) -> None:
    gate, up = (3 * torch.randn(5, ODD)).to(dtype), torch.randn(5, ODD).to(dtype)
    got = op(gate, up, "silu")
    assert got.dtype == dtype
    references.assert_close(got, references.act_and_mul("silu_and_mul", torch.cat([gate, up], -1)))


ELEMENTWISE_OUT = f"{ACT_OUT} float16 missing_dim"


cases.register(
    *(
        cases.OpCase(
            op,
            _act_args,
            {"x": f"{cases.FLOAT} zero_dim last_dim_plus_one last_stride_2", "out": ACT_OUT},
            {"gate_first": cases.BOOL},
        )
        for op in OPS
    ),
    cases.OpCase(
        "act_and_mul",
        _act_and_mul_args,
        {
            "gate": f"{cases.FLOAT} zero_dim last_dim_plus_one last_stride_2",
            "up": f"{cases.FLOAT} extra_dim zero_dim last_dim_plus_one last_stride_2",
            "out": ACT_OUT,
        },
        {"activation": [("relu", ValueError), (None, TypeError)]},
    ),
    cases.OpCase(
        "fatrelu_and_mul",
        functools.partial(_param_args, "fatrelu_and_mul"),
        {"x": f"{cases.FLOAT} zero_dim last_dim_plus_one last_stride_2", "out": ACT_OUT},
        {"threshold": [*cases.NOT_A_NUMBER, (math.nan, ValueError)]},
    ),
    cases.OpCase(
        "swigluoai_and_mul",
        functools.partial(_param_args, "swigluoai_and_mul"),
        {"x": f"{cases.FLOAT} zero_dim last_dim_plus_one last_stride_2", "out": ACT_OUT},
        {"alpha": [*cases.NOT_A_NUMBER, (math.nan, ValueError)], "limit": cases.NON_NEGATIVE},
    ),
    *(
        cases.OpCase(
            op,
            _elementwise_args,
            {"x": f"{cases.FLOAT} zero_dim last_stride_2", "out": ELEMENTWISE_OUT},
        )
        for op in ELEMENTWISE
    ),
    opcheck=_opcheck_samples,
    once={
        **{op: cases.OnceCase(functools.partial(_once_halves, name=op)) for op in OPS},
        "act_and_mul": cases.OnceCase(_once_act_and_mul),
        **{op: cases.OnceCase(functools.partial(_once_elementwise, name=op)) for op in ELEMENTWISE},
        **{op: cases.OnceCase(functools.partial(_once_param, name=op)) for op in PARAM_OPS},
    },
)
