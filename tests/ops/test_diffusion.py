"""timestep_embedding against a float64 reference written from diffusers' definition."""

from __future__ import annotations

import math

import pytest
import sycl_kernels
import torch

from tests import references
from tests.grids import pairwise
from tests.ops import cases


# Pairwise (tests/grids.py), not the product: shift, scale and max_period are runtime
# arguments, so each set of them runs at every dim and both orders, every dim in both.
@pytest.mark.parametrize(
    ("dim", "flip_sin_to_cos", "shift", "scale", "max_period"),
    [
        (dim, flip, *params)
        for dim, flip, params in pairwise(
            [1, 7, 256, 320, 1001],
            [False, True],
            [(1.0, 1.0, 10000), (0.0, 1000.0, 10000), (1.0, 2.5, 500.0)],
        )
    ],
    ids=str,
)
def test_timestep_embedding(
    dim: int, flip_sin_to_cos: bool, shift: float, scale: float, max_period: float
) -> None:
    t = torch.rand(33) * 1000
    got = sycl_kernels.timestep_embedding(t, dim, flip_sin_to_cos, shift, scale, max_period)
    assert got.shape == (33, dim) and got.dtype == torch.float32
    want = references.timestep_embedding(t, dim, flip_sin_to_cos, shift, scale, max_period)
    # Arguments reach 1e6 at scale 1000: float32 rounding of the argument alone moves
    # sin/cos by up to ~0.06 there, so the tolerance grows with the largest argument.
    atol = 1e-4 if scale * 1000 <= 1000 else 0.1
    torch.testing.assert_close(got.double(), want, rtol=0, atol=atol)
    if dim % 2:
        assert torch.all(got[:, -1] == 0)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float16, torch.bfloat16])
def test_timestep_embedding_converts_timesteps(dtype: torch.dtype) -> None:
    t = torch.arange(0, 1000, 37).to(dtype)
    torch.testing.assert_close(
        sycl_kernels.timestep_embedding(t, 256).double(),
        references.timestep_embedding(t.float(), 256),
        rtol=0,
        atol=1e-4,
    )


@pytest.mark.parametrize(
    ("t", "kwargs", "error", "message"),
    [
        (torch.zeros(2, 2), {"dim": 8}, ValueError, "t has shape (2, 2); expected [N]"),
        (torch.zeros(2, dtype=torch.bool), {"dim": 8}, TypeError, "t has dtype torch.bool"),
        (torch.zeros(2), {"dim": 0}, ValueError, "dim must be at least 1, got 0"),
        (torch.zeros(2), {"dim": 8.0}, TypeError, "dim must be an int, got float"),
        (torch.zeros(2), {"dim": 8, "max_period": 0}, ValueError, "max_period must be positive"),
        ([0.0, 1.0], {"dim": 8}, TypeError, "t must be a torch.Tensor"),
    ],
)
def test_timestep_embedding_rejects_bad_input(t, kwargs, error, message: str) -> None:
    with pytest.raises(error) as info:
        sycl_kernels.timestep_embedding(t, **kwargs)
    assert str(info.value).startswith("timestep_embedding(): ") and message in str(info.value)


# The inputs of the suite-wide tests: the bad-input matrix and opcheck (tests/ops/cases.py).


def _once(op, dtype: torch.dtype) -> None:
    # The run-once case (tests/ops/test_every_op_once.py): dim 200, not bundled.
    t = (torch.rand(5) * 1000).to(dtype)
    got = op(t, 200)
    assert got.dtype == torch.float32
    torch.testing.assert_close(
        got.double(), references.timestep_embedding(t.float(), 200), rtol=0, atol=1e-4
    )


cases.register(
    cases.OpCase(
        "timestep_embedding",
        lambda: {"t": torch.rand(6) * 1000, "dim": 64},
        {"t": f"{cases.COMMON} bool complex extra_dim zero_dim"},
        {
            "dim": [(0, ValueError), (-8, ValueError), (8.0, TypeError), ("8", TypeError)],
            "flip_sin_to_cos": [(None, TypeError), (1, TypeError)],
            "downscale_freq_shift": [*cases.NOT_A_NUMBER, (math.nan, ValueError)],
            "scale": [*cases.NOT_A_NUMBER, (math.nan, ValueError)],
            "max_period": [*cases.NON_NEGATIVE, (0, ValueError)],
        },
    ),
    opcheck=lambda: [("timestep_embedding", (torch.rand(5) * 1000, 64, True, 1.0, 1.0, 10000.0))],
    # One kernel (float32 math and output) for every timestep dtype.
    once={"timestep_embedding": cases.OnceCase(_once, dtypes=(torch.float32,))},
)
