"""Property tests: every public op on random shapes, dtypes, layouts and scalars,
checked against the float64 references in tests/references.py.

Sizes are drawn from lists that sit on and around each vector width (4 fp32 and 8
fp16/bf16 elements a 16-byte access) and work-group size, plus 1 and large rows; so
each example may compile a new variant. The hypothesis profile bounds the number
of examples (tests/conftest.py: "ci", derandomized, by default; "dev", random, and
"long" for a manual run with --hypothesis-profile=dev or =long).
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager, nullcontext
from unittest import mock

import pytest
import sycl_kernels
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from sycl_kernels import _dtypes as dtype_table
from sycl_kernels import _runtime
from sycl_kernels.specs import spec

from tests import references

DTYPES = st.sampled_from([d.torch_dtype for d in dtype_table.DTYPES])
ROWS = st.one_of(st.integers(1, 8), st.sampled_from([33, 255, 600]))
ROW_SIZES = st.sampled_from(
    [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 255, 256, 257, 1000, 1023, 1025]
)
LARGE_ROW_SIZES = st.sampled_from([2047, 2049, 4096, 4097, 5120, 8191, 16384, 20000])
ROW_SIZES = st.one_of(ROW_SIZES, LARGE_ROW_SIZES)
HEAD_DIMS = st.sampled_from([1, 3, 8, 9, 16, 17, 32, 64, 80, 96, 128, 256])
LAYOUTS = st.sampled_from(["contiguous", "leading_dims", "row_strided", "offset"])
TUNINGS = st.sampled_from(spec.TUNINGS)
EPS = st.sampled_from([0.0, 1e-6, 1e-5, 0.1, 1.0])


def _tuned(tuning: str) -> AbstractContextManager[object]:
    """Ops pick the "gpu" tuning for XPU tensors; without an Intel GPU it runs on the CPU device."""
    if tuning == "cpu":
        return nullcontext()
    return mock.patch.object(_runtime, "tuning_of", lambda t: tuning)


def _randn(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype, scale: float = 1.0):
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


def _rows_tensor(
    gen: torch.Generator,
    rows: int,
    width: int,
    dtype: torch.dtype,
    layout: str,
    pad: int,
    scale: float = 1.0,
) -> torch.Tensor:
    """A [rows, width] tensor (or [2, rows/2, width] for "leading_dims") in `layout`:
    a row stride above `width`, or a data pointer `pad` elements off an allocation."""
    if layout == "row_strided":
        return _randn(gen, (rows, width + pad), dtype, scale)[:, :width]
    if layout == "offset":
        return _randn(gen, (rows * width + pad,), dtype, scale)[pad:].view(rows, width)
    if layout == "leading_dims" and rows % 2 == 0:
        return _randn(gen, (2, rows // 2, width), dtype, scale)
    return _randn(gen, (rows, width), dtype, scale)


def _empty_like_layout(t: torch.Tensor, width: int, layout: str, pad: int) -> torch.Tensor:
    shape = (*t.shape[:-1], width)
    if layout == "row_strided" and t.dim() == 2:
        return torch.full((t.shape[0], width + pad), 7.0, dtype=t.dtype)[:, :width]
    if layout == "offset":
        numel = math.prod(shape)
        return torch.full((numel + pad,), 7.0, dtype=t.dtype)[pad:].view(shape)
    return torch.full(shape, 7.0, dtype=t.dtype)


_common = {
    "seed": st.integers(0, 2**32 - 1),
    "dtype": DTYPES,
    "layout": LAYOUTS,
    "pad": st.integers(1, 9),
}


@pytest.mark.parametrize("op", ["rmsnorm", "gemma_rmsnorm"])
@given(
    rows=ROWS,
    hidden=ROW_SIZES,
    eps=EPS,
    scale=st.sampled_from([1e-3, 1.0, 100.0]),
    out_to=st.sampled_from(["new", "out", "x"]),
    tuning=TUNINGS,
    **_common,
)
def test_rmsnorm(op, rows, hidden, eps, scale, out_to, tuning, seed, dtype, layout, pad) -> None:
    gen = torch.Generator().manual_seed(seed)
    x = _rows_tensor(gen, rows, hidden, dtype, layout, pad, scale)
    weight = _randn(gen, (hidden,), dtype)
    out = {"new": None, "out": _empty_like_layout(x, hidden, layout, pad), "x": x}[out_to]
    want = references.rmsnorm(x, weight, eps, gemma=op == "gemma_rmsnorm")
    with _tuned(tuning):
        got = getattr(sycl_kernels, op)(x, weight, eps, out=out)
    if out is not None:
        assert got is out
    assert got.shape == x.shape and got.dtype == dtype
    torch.testing.assert_close(got.double(), want, **references.tolerance(dtype))


@pytest.mark.parametrize("op", ["fused_add_rmsnorm", "gemma_fused_add_rmsnorm"])
@given(rows=ROWS, hidden=ROW_SIZES, eps=EPS, tuning=TUNINGS, **_common)
def test_fused_add_rmsnorm(op, rows, hidden, eps, tuning, seed, dtype, layout, pad) -> None:
    gen = torch.Generator().manual_seed(seed)
    x = _rows_tensor(gen, rows, hidden, dtype, layout, pad)
    residual = _rows_tensor(gen, rows, hidden, dtype, layout, pad)
    weight = _randn(gen, (hidden,), dtype)
    want_x, want_residual = references.fused_add_rmsnorm(
        x, residual, weight, eps, gemma=op.startswith("gemma")
    )
    with _tuned(tuning):
        getattr(sycl_kernels, op)(x, residual, weight, eps)
    tol = references.tolerance(dtype)
    torch.testing.assert_close(residual.double(), want_residual, **tol)
    torch.testing.assert_close(x.double(), want_x, **tol)


@given(
    tokens=ROWS,
    head_dim=HEAD_DIMS,
    num_q_heads=st.integers(1, 8),
    num_k_heads=st.integers(1, 4),
    token_pad=st.integers(0, 70),
    eps=EPS,
    tuning=TUNINGS,
    seed=st.integers(0, 2**32 - 1),
    dtype=DTYPES,
)
def test_qknorm(tokens, head_dim, num_q_heads, num_k_heads, token_pad, eps, tuning, seed, dtype):
    gen = torch.Generator().manual_seed(seed)
    width = (num_q_heads + 2 * num_k_heads) * head_dim
    qkv = _randn(gen, (tokens, width + token_pad), dtype)
    q_end, k_end = num_q_heads * head_dim, (num_q_heads + num_k_heads) * head_dim
    q = qkv[:, :q_end].view(tokens, num_q_heads, head_dim)
    k = qkv[:, q_end:k_end].view(tokens, num_k_heads, head_dim)
    q_weight, k_weight = _randn(gen, (head_dim,), dtype), _randn(gen, (head_dim,), dtype)
    want_q, want_k = references.rmsnorm(q, q_weight, eps), references.rmsnorm(k, k_weight, eps)
    rest = qkv[:, k_end:].clone()
    with _tuned(tuning):
        sycl_kernels.qknorm(q, k, q_weight, k_weight, eps)
    tol = references.tolerance(dtype)
    torch.testing.assert_close(q.double(), want_q, **tol)
    torch.testing.assert_close(k.double(), want_k, **tol)
    assert torch.equal(qkv[:, k_end:], rest), "qknorm wrote past k"


@st.composite
def _rope_dims(draw: st.DrawFn) -> tuple[int, int]:
    head_dim = draw(st.sampled_from([2, 4, 8, 16, 32, 64, 80, 96, 128, 256]))
    rotary_dim = draw(st.sampled_from(sorted({2, max(2, head_dim // 4 * 2), head_dim})))
    return head_dim, rotary_dim


@given(
    tokens=ROWS,
    dims=_rope_dims(),
    num_q_heads=st.integers(1, 8),
    num_k_heads=st.integers(1, 4),
    token_pad=st.integers(0, 70),
    is_neox=st.booleans(),
    positions_dtype=st.sampled_from([torch.int32, torch.int64]),
    store_kv=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    dtype=DTYPES,
)
def test_apply_rope(
    tokens,
    dims,
    num_q_heads,
    num_k_heads,
    token_pad,
    is_neox,
    positions_dtype,
    store_kv,
    seed,
    dtype,
) -> None:
    gen = torch.Generator().manual_seed(seed)
    head_dim, rotary_dim = dims
    max_position = 300
    cos_sin_cache = references.rope_cache(max_position, rotary_dim)
    positions = torch.randint(0, max_position, (tokens,), generator=gen).to(positions_dtype)
    width = (num_q_heads + 2 * num_k_heads) * head_dim
    qkv = _randn(gen, (tokens, width + token_pad), dtype)
    q_end, k_end = num_q_heads * head_dim, (num_q_heads + num_k_heads) * head_dim
    q = qkv[:, :q_end].view(tokens, num_q_heads, head_dim)
    k = qkv[:, q_end:k_end].view(tokens, num_k_heads, head_dim)
    v = qkv[:, k_end:width].view(tokens, num_k_heads, head_dim)
    want_q = references.rope(positions, q, cos_sin_cache, is_neox)
    want_k = references.rope(positions, k, cos_sin_cache, is_neox)
    kv: dict[str, torch.Tensor] = {}
    if store_kv:
        slots = tokens + 3
        # Distinct slots, some tokens padding (-1): a serving batch's layout.
        out_loc = torch.randperm(slots, generator=gen)[:tokens]
        out_loc[torch.rand(tokens, generator=gen) < 0.2] = -1
        kv = {
            "v": v,
            "k_cache": torch.zeros(slots, num_k_heads, head_dim, dtype=dtype),
            "v_cache": torch.zeros(slots, num_k_heads, head_dim, dtype=dtype),
            "out_loc": out_loc,
        }
        want_v = v.clone()
    sycl_kernels.apply_rope(positions, q, k, cos_sin_cache, is_neox, rotary_dim, **kv)
    tol = references.tolerance(dtype)
    torch.testing.assert_close(q.double(), want_q, **tol)
    torch.testing.assert_close(k.double(), want_k, **tol)
    if store_kv:
        stored = kv["out_loc"] >= 0
        slots_written = kv["out_loc"][stored]
        torch.testing.assert_close(kv["k_cache"][slots_written].double(), want_k[stored], **tol)
        assert torch.equal(kv["v_cache"][slots_written], want_v[stored])
        untouched = torch.ones(kv["k_cache"].shape[0], dtype=torch.bool)
        untouched[slots_written] = False
        assert not kv["k_cache"][untouched].any() and not kv["v_cache"][untouched].any()


@pytest.mark.parametrize("op", ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"])
@given(
    rows=ROWS,
    dim=ROW_SIZES.filter(lambda d: d <= 16384),
    scale=st.sampled_from([0.01, 1.0, 8.0]),
    use_out=st.booleans(),
    tuning=TUNINGS,
    **_common,
)
def test_act_and_mul(op, rows, dim, scale, use_out, tuning, seed, dtype, layout, pad) -> None:
    gen = torch.Generator().manual_seed(seed)
    x = _rows_tensor(gen, rows, 2 * dim, dtype, layout, pad, scale)
    out = _empty_like_layout(x, dim, layout, pad) if use_out else None
    with _tuned(tuning):
        got = getattr(sycl_kernels, op)(x, out=out)
    if out is not None:
        assert got is out
    assert got.shape == (*x.shape[:-1], dim) and got.dtype == dtype
    want = references.act_and_mul(op, x)
    torch.testing.assert_close(got.double(), want, **references.tolerance(dtype))


@given(
    n=ROWS,
    dim=st.sampled_from([1, 2, 3, 7, 8, 9, 64, 255, 256, 320, 1001, 1280]),
    flip_sin_to_cos=st.booleans(),
    shift=st.sampled_from([0.0, 0.5, 1.0]),
    scale=st.sampled_from([0.01, 1.0, 4.0]),
    max_period=st.sampled_from([100.0, 10000, 1e5]),
    t_dtype=st.sampled_from([torch.float32, torch.float64, torch.float16, torch.int64]),
    t_stride=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
)
def test_timestep_embedding(
    n, dim, flip_sin_to_cos, shift, scale, max_period, t_dtype, t_stride, seed
) -> None:
    assume(dim // 2 != shift)  # freq = exp(... / (half - shift)) divides by zero there
    gen = torch.Generator().manual_seed(seed)
    t = (torch.rand(n * t_stride, generator=gen) * 1000).to(t_dtype)[::t_stride]
    got = sycl_kernels.timestep_embedding(t, dim, flip_sin_to_cos, shift, scale, max_period)
    assert got.shape == (n, dim) and got.dtype == torch.float32
    want = references.timestep_embedding(t.float(), dim, flip_sin_to_cos, shift, scale, max_period)
    # float32 rounding of the argument scale * t * freq (up to 4000 rad) moves sin/cos
    # by about |argument| * 2^-23.
    largest_argument = scale * float(t.float().abs().max())
    torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-5 + 4e-7 * largest_argument)
