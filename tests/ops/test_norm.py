"""rmsnorm on the SYCL CPU device against the float64 torch reference, and its argument checks."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest
import sycl_kernels
import torch
from sycl_kernels import _dtypes as dtype_table
from sycl_kernels.jit import stats

from tests import references
from tests.grids import pairwise
from tests.ops import cases

DTYPES = [d.torch_dtype for d in dtype_table.DTYPES]
HIDDEN = [64, 1000, 4096, 5120, 8192]
ROWS = [1, 7, 256]


def _inputs(rows: int, hidden: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(rows, hidden).to(dtype)
    weight = (1 + 0.5 * torch.randn(hidden)).to(dtype)
    return x, weight


# Pairwise (tests/grids.py): every (hidden, dtype) kernel, each at one or two row counts
# (rows are a launch size, not a kernel parameter), every row count at every size.
@pytest.mark.parametrize(("rows", "hidden", "dtype"), pairwise(ROWS, HIDDEN, DTYPES), ids=str)
def test_rmsnorm_matches_reference(rows: int, hidden: int, dtype: torch.dtype) -> None:
    x, weight = _inputs(rows, hidden, dtype)
    got = sycl_kernels.rmsnorm(x, weight, 1e-6)
    assert got.dtype == dtype and got.shape == x.shape
    torch.testing.assert_close(
        got.double(), references.rmsnorm(x, weight, 1e-6), **references.tolerance(dtype)
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("hidden", [1000, 4096])
def test_rmsnorm_writes_into_out(hidden: int, dtype: torch.dtype) -> None:
    x, weight = _inputs(7, hidden, dtype)
    out = torch.full_like(x, float("nan"))
    result = sycl_kernels.rmsnorm(x, weight, 1e-5, out=out)
    assert result is out
    torch.testing.assert_close(
        out.double(), references.rmsnorm(x, weight, 1e-5), **references.tolerance(dtype)
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("hidden", [64, 1000, 4096])
def test_rmsnorm_strided_rows(hidden: int, dtype: torch.dtype) -> None:
    # Rows of a wider tensor: stride(0) > hidden, and an odd column offset
    # misaligns every row so the scalar path runs too.
    for offset in (0, 1):
        wide = torch.randn(7, hidden + 24).to(dtype)
        x = wide[:, offset : offset + hidden]
        weight = torch.randn(hidden).to(dtype)
        out_wide = torch.zeros(7, hidden + 8, dtype=dtype)
        out = out_wide[:, :hidden]
        sycl_kernels.rmsnorm(x, weight, 1e-6, out=out)
        torch.testing.assert_close(
            out.double(), references.rmsnorm(x, weight, 1e-6), **references.tolerance(dtype)
        )
        assert torch.all(out_wide[:, hidden:] == 0), "wrote past the end of an out row"


def test_rmsnorm_flattens_leading_dimensions() -> None:
    x, weight = _inputs(2 * 3 * 5, 1000, torch.float32)
    x = x.view(2, 3, 5, 1000)
    got = sycl_kernels.rmsnorm(x, weight)
    assert got.shape == (2, 3, 5, 1000)
    torch.testing.assert_close(
        got.double(), references.rmsnorm(x, weight, 1e-6), **references.tolerance(torch.float32)
    )


def test_rmsnorm_compiles_a_variant_once(fresh_cache: Path) -> None:
    x, weight = _inputs(3, 1234, torch.float16)
    before = stats().compiles
    sycl_kernels.rmsnorm(x, weight)
    sycl_kernels.rmsnorm(x, weight)
    sycl_kernels.rmsnorm(x[:1], weight)
    assert stats().compiles == before + 1


def test_rmsnorm_handles_any_odd_hidden_size() -> None:
    x, weight = _inputs(5, 4001, torch.bfloat16)
    torch.testing.assert_close(
        sycl_kernels.rmsnorm(x, weight).double(),
        references.rmsnorm(x, weight, 1e-6),
        **references.tolerance(torch.bfloat16),
    )


def _bad_inputs() -> list[tuple[str, dict, type[Exception], str]]:
    x = torch.randn(4, 64)
    w = torch.randn(64)
    return [
        ("x not a tensor", {"x": [1.0] * 64}, TypeError, "x must be a torch.Tensor"),
        ("x int dtype", {"x": x.to(torch.int32)}, TypeError, "x has dtype torch.int32"),
        ("x float64", {"x": x.double()}, TypeError, "x has dtype torch.float64"),
        ("x 0-d", {"x": torch.tensor(1.0), "weight": torch.ones(())}, ValueError, "x is a 0-d"),
        ("x meta device", {"x": x.to("meta")}, ValueError, "x is on meta"),
        ("x column stride", {"x": torch.randn(64, 4).t()}, ValueError, "x has stride 4"),
        (
            "x with four unmergeable leading dims",
            {"x": torch.randn(2, 3, 2, 3, 64).permute(0, 2, 1, 3, 4)[:, :, :, ::2]},
            ValueError,
            "x of shape (2, 2, 3, 2, 64)",
        ),
        ("weight dtype", {"weight": w.half()}, TypeError, "weight has dtype torch.float16"),
        ("weight shape", {"weight": torch.randn(63)}, ValueError, "weight has shape (63,)"),
        ("weight 2-d", {"weight": torch.randn(1, 64)}, ValueError, "weight has shape (1, 64)"),
        ("weight stride", {"weight": torch.randn(128)[::2]}, ValueError, "weight has stride 2"),
        ("out shape", {"out": torch.empty(4, 65)}, ValueError, "out has shape (4, 65)"),
        (
            "out dtype",
            {"out": torch.empty(4, 64, dtype=torch.bfloat16)},
            TypeError,
            "out has dtype torch.bfloat16",
        ),
        ("out not tensor", {"out": 3}, TypeError, "out must be a torch.Tensor"),
        ("eps negative", {"eps": -1.0}, ValueError, "eps must be at least 0, got -1.0"),
        ("eps nan", {"eps": float("nan")}, ValueError, "eps is NaN"),
        ("eps string", {"eps": "1e-6"}, TypeError, "eps must be a real number, got str"),
    ]


@pytest.mark.parametrize(
    ("override", "error", "message"),
    [case[1:] for case in _bad_inputs()],
    ids=[case[0] for case in _bad_inputs()],
)
def test_rmsnorm_rejects_bad_input(override: dict, error: type[Exception], message: str) -> None:
    args = {"x": torch.randn(4, 64), "weight": torch.randn(64), "eps": 1e-6, "out": None}
    args.update(override)
    with pytest.raises(error, match=r"^rmsnorm\(\): ") as info:
        sycl_kernels.rmsnorm(**args)
    assert message in str(info.value)


# Pairwise (tests/grids.py): every (hidden, dtype) kernel class, plain and Gemma each
# at every size and in every dtype.
@pytest.mark.parametrize(
    ("hidden", "dtype", "gemma"), pairwise([64, 1000, 4096], DTYPES, [False, True]), ids=str
)
def test_fused_add_rmsnorm_matches_reference(hidden: int, dtype: torch.dtype, gemma: bool) -> None:
    x, weight = _inputs(7, hidden, dtype)
    residual = torch.randn(7, hidden).to(dtype)
    want_x, want_residual = references.fused_add_rmsnorm(x, residual, weight, 1e-6, gemma)
    fn = sycl_kernels.gemma_fused_add_rmsnorm if gemma else sycl_kernels.fused_add_rmsnorm
    assert fn(x, residual, weight, 1e-6) is None
    tol = references.tolerance(dtype)
    torch.testing.assert_close(residual.double(), want_residual, **tol)
    torch.testing.assert_close(x.double(), want_x, **tol)


def test_fused_add_rmsnorm_strided_rows() -> None:
    wide_x, wide_r = torch.randn(5, 1030), torch.randn(5, 1030)
    x, residual = wide_x[:, 3:1027], wide_r[:, 1:1025]
    weight = torch.randn(1024)
    want_x, want_residual = references.fused_add_rmsnorm(x, residual, weight, 1e-6)
    untouched = wide_x[:, :3].clone()
    sycl_kernels.fused_add_rmsnorm(x, residual, weight)
    tol = references.tolerance(torch.float32)
    torch.testing.assert_close(x.double(), want_x, **tol)
    torch.testing.assert_close(residual.double(), want_residual, **tol)
    assert torch.equal(wide_x[:, :3], untouched)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("hidden", [1000, 2048])
def test_gemma_rmsnorm_matches_reference(hidden: int, dtype: torch.dtype) -> None:
    x, weight = _inputs(7, hidden, dtype)
    torch.testing.assert_close(
        sycl_kernels.gemma_rmsnorm(x, weight, 1e-6).double(),
        references.rmsnorm(x, weight, 1e-6, gemma=True),
        **references.tolerance(dtype),
    )


# 72: the CPU tuning's work-group size (gcd(head_dim, 16)) falls to 8 work-items.
# Pairwise (tests/grids.py): every (head_dim, dtype) kernel, each token count with each.
@pytest.mark.parametrize(
    ("tokens", "head_dim", "dtype"), pairwise([1, 33], [64, 72, 80, 128, 256], DTYPES), ids=str
)
def test_qknorm_on_views_of_a_fused_qkv(tokens: int, head_dim: int, dtype: torch.dtype) -> None:
    num_q, num_kv = 8, 2
    qkv = torch.randn(tokens, (num_q + 2 * num_kv) * head_dim).to(dtype)
    q = qkv[:, : num_q * head_dim].view(tokens, num_q, head_dim)
    k = qkv[:, num_q * head_dim : (num_q + num_kv) * head_dim].view(tokens, num_kv, head_dim)
    v_before = qkv[:, (num_q + num_kv) * head_dim :].clone()
    q_weight, k_weight = torch.randn(head_dim).to(dtype), torch.randn(head_dim).to(dtype)
    want_q = references.rmsnorm(q, q_weight, 1e-6)
    want_k = references.rmsnorm(k, k_weight, 1e-6)
    sycl_kernels.qknorm(q, k, q_weight, k_weight, 1e-6)
    tol = references.tolerance(dtype)
    torch.testing.assert_close(q.double(), want_q, **tol)
    torch.testing.assert_close(k.double(), want_k, **tol)
    assert torch.equal(qkv[:, (num_q + num_kv) * head_dim :], v_before), "v must stay"


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda x, r, w: sycl_kernels.fused_add_rmsnorm(x, r[:, :63], w),
            ValueError,
            "fused_add_rmsnorm(): residual has shape (4, 63)",
        ),
        (
            lambda x, r, w: sycl_kernels.fused_add_rmsnorm(x, r.half(), w),
            TypeError,
            "fused_add_rmsnorm(): residual has dtype torch.float16",
        ),
        (
            lambda x, r, w: sycl_kernels.gemma_fused_add_rmsnorm(x, r, w[:8]),
            ValueError,
            "gemma_fused_add_rmsnorm(): weight has shape (8,)",
        ),
        (
            lambda x, r, w: sycl_kernels.gemma_rmsnorm(x.int(), w),
            TypeError,
            "gemma_rmsnorm(): x has dtype torch.int32",
        ),
        (
            lambda x, r, w: sycl_kernels.qknorm(x, x.view(4, 1, 64)[:, :, :32], w, w),
            ValueError,
            "qknorm(): k has shape (4, 1, 32); expected [..., 64] (q's head_dim)",
        ),
        (
            lambda x, r, w: sycl_kernels.qknorm(x.view(4, 1, 64), x.view(4, 2, 32), w, w),
            ValueError,
            "qknorm(): k has shape (4, 2, 32)",
        ),
        (
            lambda x, r, w: sycl_kernels.qknorm(x.view(4, 1, 64), x.view(4, 1, 64), w[:32], w),
            ValueError,
            "qknorm(): q_weight has shape (32,)",
        ),
        (
            lambda x, r, w: sycl_kernels.qknorm(x.view(4, 1, 64), x.view(4, 1, 64), w, w, -1.0),
            ValueError,
            "qknorm(): eps must be at least 0",
        ),
    ],
)
def test_norm_family_rejects_bad_input(call, error: type[Exception], message: str) -> None:
    x, residual, weight = torch.randn(4, 64), torch.randn(4, 64), torch.randn(64)
    with pytest.raises(error) as info:
        call(x, residual, weight)
    assert message in str(info.value)


def test_qknorm_rejects_q_and_k_in_one_memory() -> None:
    q = torch.randn(4, 3, 64)[:, :, :32]
    with pytest.raises(ValueError, match=r"qknorm\(\): q and k share memory"):
        sycl_kernels.qknorm(q, q, torch.randn(32), torch.randn(32))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("hidden", [1000, 4096])
def test_gpu_tuned_kernels_compute_the_same(
    hidden: int, dtype: torch.dtype, tuning_override: Callable[[str], None]
) -> None:
    # The ops pick "gpu" tuning for XPU tensors; no Intel GPU exists here, so the
    # gpu-tuned variants (16-byte accesses per work-item) are checked on the CPU device.
    tuning_override("gpu")
    x, weight = _inputs(5, hidden, dtype)
    out = sycl_kernels.rmsnorm(x, weight, 1e-6)
    tol = references.tolerance(dtype)
    torch.testing.assert_close(out.double(), references.rmsnorm(x, weight, 1e-6), **tol)

    residual = torch.randn(5, hidden).to(dtype)
    want_x, want_residual = references.fused_add_rmsnorm(x, residual, weight, 1e-6)
    sycl_kernels.fused_add_rmsnorm(x, residual, weight, 1e-6)
    torch.testing.assert_close(x.double(), want_x, **tol)
    torch.testing.assert_close(residual.double(), want_residual, **tol)


# The inputs of the suite-wide tests: the bad-input matrix and opcheck (tests/ops/cases.py).


def _norm_args() -> dict[str, object]:
    x, out = torch.randn(4, 64), torch.zeros(4, 64)
    return {"x": x, "weight": torch.randn(64), "eps": 1e-6, "out": out}


def _fused_add_args() -> dict[str, object]:
    return {"x": torch.randn(4, 64), "residual": torch.randn(4, 64), "weight": torch.randn(64)}


def _qknorm_args() -> dict[str, object]:
    qkv = torch.randn(5, (4 + 2) * 32)
    return {
        "q": qkv[:, :128].view(5, 4, 32),
        "k": qkv[:, 128:].view(5, 2, 32),
        "q_weight": torch.randn(32),
        "k_weight": torch.randn(32),
        "eps": 1e-6,
    }


NORM_TENSORS = {
    "x": f"{cases.FLOAT} zero_dim last_dim_plus_one last_stride_2",
    "weight": cases.NORM_WEIGHT,
    "out": f"{cases.FLOAT} extra_dim zero_dim last_dim_plus_one last_stride_2 overlapping_rows",
}
FUSED_ADD_TENSORS = {
    "x": f"{cases.FLOAT} zero_dim last_dim_plus_one last_stride_2 overlapping_rows",
    "residual": (
        f"{cases.FLOAT} extra_dim zero_dim last_dim_plus_one last_stride_2 overlapping_rows"
    ),
    "weight": cases.NORM_WEIGHT,
}


def _opcheck_samples() -> list[tuple[str, tuple]]:
    x, w = torch.randn(4, 64), torch.randn(64)
    qkv = torch.randn(3, 6 * 64)
    q, k = qkv[:, : 4 * 64].view(3, 4, 64), qkv[:, 4 * 64 : 5 * 64].view(3, 1, 64)
    samples = [
        ("fused_add_rmsnorm", (x.clone(), torch.randn(4, 64), w, 1e-6)),
        ("gemma_fused_add_rmsnorm", (x.clone(), torch.randn(4, 64), w, 1e-6)),
        ("qknorm", (q, k, torch.randn(64), torch.randn(64), 1e-6)),
    ]
    for op in ("rmsnorm", "gemma_rmsnorm"):
        samples += [(op, (x, w, 1e-6)), (f"{op}_out", (x, w, 1e-6, torch.empty_like(x)))]
    return samples


# Its run-once cases (tests/ops/test_every_op_once.py), at sizes no manifest variant has.
_ONCE_TOKENS, _ONCE_WIDTH, _ONCE_HEAD_DIM = 5, 200, 96


def _once_weight(dtype: torch.dtype, width: int = _ONCE_WIDTH) -> torch.Tensor:
    return (1 + 0.5 * torch.randn(width)).to(dtype)


def _once_norm(op: Callable[..., object], dtype: torch.dtype, *, gemma: bool) -> None:
    x, weight = torch.randn(_ONCE_TOKENS, _ONCE_WIDTH).to(dtype), _once_weight(dtype)
    got = op(x, weight, 1e-6)
    assert got.dtype == dtype
    references.assert_close(got, references.rmsnorm(x, weight, 1e-6, gemma))


def _once_fused_add(op: Callable[..., object], dtype: torch.dtype, *, gemma: bool) -> None:
    x, residual = (torch.randn(_ONCE_TOKENS, _ONCE_WIDTH).to(dtype) for _ in range(2))
    weight = _once_weight(dtype)
    want_x, want_residual = references.fused_add_rmsnorm(
        x, residual, weight, 1e-6, gemma, rounded_sum=True
    )
    op(x, residual, weight, 1e-6)  # in place; rounded_sum=True is the default
    references.assert_close(residual, want_residual)
    references.assert_close(x, want_x)


def _once_qknorm(op: Callable[..., object], dtype: torch.dtype) -> None:
    q = torch.randn(_ONCE_TOKENS, 4, _ONCE_HEAD_DIM).to(dtype)
    k = torch.randn(_ONCE_TOKENS, 2, _ONCE_HEAD_DIM).to(dtype)
    q_weight, k_weight = _once_weight(dtype, _ONCE_HEAD_DIM), _once_weight(dtype, _ONCE_HEAD_DIM)
    want_q = references.rmsnorm(q, q_weight, 1e-6)
    want_k = references.rmsnorm(k, k_weight, 1e-6)
    op(q, k, q_weight, k_weight, 1e-6)
    references.assert_close(q, want_q)
    references.assert_close(k, want_k)


cases.register(
    *(
        cases.OpCase(op, _norm_args, NORM_TENSORS, {"eps": cases.NON_NEGATIVE})
        for op in ("rmsnorm", "gemma_rmsnorm")
    ),
    *(
        cases.OpCase(op, _fused_add_args, FUSED_ADD_TENSORS, {"rounded_sum": cases.BOOL})
        for op in ("fused_add_rmsnorm", "gemma_fused_add_rmsnorm")
    ),
    cases.OpCase(
        "qknorm",
        _qknorm_args,
        {
            "q": cases.HEADS,
            "k": cases.HEADS,
            "q_weight": cases.NORM_WEIGHT,
            "k_weight": cases.NORM_WEIGHT,
        },
        {"eps": cases.NON_NEGATIVE, "gemma": cases.BOOL},
    ),
    opcheck=_opcheck_samples,
    once={
        "rmsnorm": cases.OnceCase(functools.partial(_once_norm, gemma=False)),
        "gemma_rmsnorm": cases.OnceCase(functools.partial(_once_norm, gemma=True)),
        "fused_add_rmsnorm": cases.OnceCase(functools.partial(_once_fused_add, gemma=False)),
        "gemma_fused_add_rmsnorm": cases.OnceCase(functools.partial(_once_fused_add, gemma=True)),
        "qknorm": cases.OnceCase(_once_qknorm),
    },
)
