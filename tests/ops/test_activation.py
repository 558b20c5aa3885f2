"""Gated activations against float64 references: every activation, dtype, odd sizes, out=."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sycl_kernels
import torch
from sycl_kernels import _dtypes as dtype_table

from tests import references
from tests.ops import cases

OPS = ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"]
DTYPES = [d.torch_dtype for d in dtype_table.DTYPES]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dim", [1, 1000, 4096, 11008])
@pytest.mark.parametrize("rows", [1, 33])
@pytest.mark.parametrize("op", OPS)
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


def _opcheck_samples() -> list[tuple[str, tuple]]:
    samples = [("act_and_mul", (torch.randn(4, 64), torch.randn(4, 64), "gelu_tanh"))]
    for op in OPS:
        x2 = torch.randn(4, 128)
        samples += [(op, (x2,)), (f"{op}_out", (x2, False, torch.empty(4, 64)))]
    return samples


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
    opcheck=_opcheck_samples,
)
