"""apply_rope against a float64 reference: both styles, partial rotary, strided views, KV store."""

from __future__ import annotations

import pytest
import sycl_kernels
import torch
from sycl_kernels import _dtypes as dtype_table

from tests import references
from tests.grids import pairwise
from tests.ops import cases

DTYPES = [d.torch_dtype for d in dtype_table.DTYPES]
MAX_POSITION = 4096


def _qkv(tokens: int, num_q: int, num_kv: int, head_dim: int, dtype: torch.dtype):
    """q, k, v as views into one fused qkv tensor, as attention layers produce them."""
    qkv = torch.randn(tokens, (num_q + 2 * num_kv) * head_dim).to(dtype)
    q = qkv[:, : num_q * head_dim].view(tokens, num_q, head_dim)
    k = qkv[:, num_q * head_dim : (num_q + num_kv) * head_dim].view(tokens, num_kv, head_dim)
    v = qkv[:, (num_q + num_kv) * head_dim :].view(tokens, num_kv, head_dim)
    return qkv, q, k, v


# Pairwise (tests/grids.py), not the product: every (head_dim, rotary_dim) in both
# styles and every dtype, every style in every dtype, each token count with each.
@pytest.mark.parametrize(
    ("tokens", "head_dim", "rotary_dim", "is_neox", "dtype"),
    [
        (tokens, *dims, is_neox, dtype)
        for tokens, dims, is_neox, dtype in pairwise(
            [1, 37], [(64, 64), (80, 80), (128, 64), (128, 128), (256, 128)], [True, False], DTYPES
        )
    ],
    ids=str,
)
def test_apply_rope(
    tokens: int, head_dim: int, rotary_dim: int, is_neox: bool, dtype: torch.dtype
) -> None:
    _, q, k, _ = _qkv(tokens, 8, 2, head_dim, dtype)
    positions = torch.randint(0, MAX_POSITION, (tokens,))
    cache = references.rope_cache(MAX_POSITION, rotary_dim)
    want_q = references.rope(positions, q, cache, is_neox)
    want_k = references.rope(positions, k, cache, is_neox)
    sycl_kernels.apply_rope(positions, q, k, cache, is_neox)
    tol = references.tolerance(dtype)
    torch.testing.assert_close(q.double(), want_q, **tol)
    torch.testing.assert_close(k.double(), want_k, **tol)


@pytest.mark.parametrize("positions_dtype", [torch.int32, torch.int64], ids=str)
def test_apply_rope_position_dtypes(positions_dtype: torch.dtype) -> None:
    q, k = torch.randn(9, 4, 64), torch.randn(9, 4, 64)
    positions = torch.randint(0, MAX_POSITION, (9,), dtype=positions_dtype)
    cache = references.rope_cache(MAX_POSITION, 64)
    want_q, want_k = (
        references.rope(positions, q, cache, True),
        references.rope(positions, k, cache, True),
    )
    sycl_kernels.apply_rope(positions, q, k, cache, True, rotary_dim=64)
    torch.testing.assert_close(q.double(), want_q, **references.tolerance(torch.float32))
    torch.testing.assert_close(k.double(), want_k, **references.tolerance(torch.float32))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("head_dim", "rotary_dim"), [(128, 128), (128, 64), (80, 32)])
@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
def test_apply_rope_stores_kv(
    head_dim: int, rotary_dim: int, is_neox: bool, dtype: torch.dtype
) -> None:
    tokens, num_q, num_kv, slots = 19, 4, 2, 64
    _, q, k, v = _qkv(tokens, num_q, num_kv, head_dim, dtype)
    positions = torch.randint(0, MAX_POSITION, (tokens,))
    out_loc = torch.randperm(slots)[:tokens]
    out_loc[3] = -1  # a padding token: nothing stored
    cache = references.rope_cache(MAX_POSITION, rotary_dim)
    k_cache = torch.zeros(slots, num_kv, head_dim, dtype=dtype)
    v_cache = torch.zeros(slots, num_kv, head_dim, dtype=dtype)
    want_q = references.rope(positions, q, cache, is_neox)
    want_k = references.rope(positions, k, cache, is_neox)
    v_before = v.clone()
    sycl_kernels.apply_rope(
        positions, q, k, cache, is_neox, v=v, k_cache=k_cache, v_cache=v_cache, out_loc=out_loc
    )
    tol = references.tolerance(dtype)
    torch.testing.assert_close(q.double(), want_q, **tol)
    torch.testing.assert_close(k.double(), want_k, **tol)
    stored = out_loc >= 0
    torch.testing.assert_close(k_cache[out_loc[stored]].double(), want_k[stored], **tol)
    assert torch.equal(k_cache[out_loc[stored]], k[stored]), "cache holds exactly the rotated k"
    assert torch.equal(v_cache[out_loc[stored]], v_before[stored])
    untouched = torch.ones(slots, dtype=torch.bool)
    untouched[out_loc[stored]] = False
    assert torch.all(k_cache[untouched] == 0) and torch.all(v_cache[untouched] == 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["apply_rope", "qknorm_rope"])
@pytest.mark.parametrize("store_kv", [False, True], ids=["", "kv"])
def test_gptj_pairs_on_every_alignment(op: str, store_kv: bool, dtype: torch.dtype) -> None:
    """GPT-J pairs move as one integer where the head and its cache row are aligned to
    a pair, element by element where not: head_dim 9 and an odd token stride give
    heads at even and odd element offsets, and cache rows at both too."""
    tokens, num_q, num_kv, head_dim, rotary_dim, slots = 6, 3, 2, 9, 8, 16
    width = (num_q + 2 * num_kv) * head_dim
    qkv = torch.randn(tokens, width + 1).to(dtype)[:, :width]
    q = qkv[:, : num_q * head_dim].view(tokens, num_q, head_dim)
    k = qkv[:, num_q * head_dim : (num_q + num_kv) * head_dim].view(tokens, num_kv, head_dim)
    v = qkv[:, (num_q + num_kv) * head_dim :].view(tokens, num_kv, head_dim)
    positions = torch.randint(0, MAX_POSITION, (tokens,))
    cache = references.rope_cache(MAX_POSITION, rotary_dim)
    want_q, want_k = q.double(), k.double()
    if op == "qknorm_rope":
        weights = torch.randn(head_dim).to(dtype), torch.randn(head_dim).to(dtype)
        want_q = references.rmsnorm(q, weights[0], 1e-6, False)
        want_k = references.rmsnorm(k, weights[1], 1e-6, False)
    want_q = references.rope(positions, want_q, cache, False)
    want_k = references.rope(positions, want_k, cache, False)
    kv = {}
    if store_kv:
        kv = {
            "v": v,
            "k_cache": torch.zeros(slots, num_kv, head_dim, dtype=dtype),
            "v_cache": torch.zeros(slots, num_kv, head_dim, dtype=dtype),
            "out_loc": torch.randperm(slots)[:tokens],
        }
    if op == "qknorm_rope":
        sycl_kernels.qknorm_rope(positions, q, k, *weights, cache, False, 1e-6, **kv)
    else:
        sycl_kernels.apply_rope(positions, q, k, cache, False, **kv)
    tol = references.tolerance(dtype)
    torch.testing.assert_close(q.double(), want_q, **tol)
    torch.testing.assert_close(k.double(), want_k, **tol)
    if store_kv:
        assert torch.equal(kv["k_cache"][kv["out_loc"]], k), "cache holds exactly the rotated k"


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (
            {"positions": torch.zeros(5, dtype=torch.int16)},
            TypeError,
            "positions has dtype torch.int16",
        ),
        ({"positions": torch.zeros(4, dtype=torch.int64)}, ValueError, "positions has shape (4,)"),
        (
            {"positions": torch.full((5,), 4096)},
            IndexError,
            "positions holds 4096; expected values in [0, 4096)",
        ),
        ({"positions": torch.full((5,), -2)}, IndexError, "positions holds -2"),
        (
            {"cos_sin_cache": torch.zeros(4096, 64, dtype=torch.float16)},
            TypeError,
            "cos_sin_cache has dtype",
        ),
        (
            {"cos_sin_cache": torch.zeros(4096, 66)},
            ValueError,
            "rotary_dim 66 must be even and in (0, head_dim=64]",
        ),
        ({"cos_sin_cache": torch.zeros(4096, 63)}, ValueError, "rotary_dim 63 must be even"),
        ({"rotary_dim": 32}, ValueError, "rotary_dim is 32 but cos_sin_cache has 64 columns"),
        (
            {"q": torch.randn(5, 4, 64).half()},
            TypeError,
            "k has dtype torch.float32 but q has torch.float16",
        ),
        ({"k": torch.randn(5, 4, 32)}, ValueError, "k has shape (5, 4, 32)"),
        (
            {"q": torch.randn(5, 256)},
            ValueError,
            "q is 2-D [tokens, heads * head_size]; pass head_size=",
        ),
        ({"v": torch.randn(5, 2, 64)}, ValueError, "v, k_cache, v_cache and out_loc go together"),
    ],
)
def test_apply_rope_rejects_bad_input(change: dict, error: type[Exception], message: str) -> None:
    args = {
        "positions": torch.zeros(5, dtype=torch.int64),
        "q": torch.randn(5, 4, 64),
        "k": torch.randn(5, 2, 64),
        "cos_sin_cache": torch.zeros(4096, 64),
        "is_neox": True,
    }
    args.update(change)
    with pytest.raises(error) as info:
        sycl_kernels.apply_rope(**args)
    assert str(info.value).startswith("apply_rope(): ") and message in str(info.value)


@pytest.mark.parametrize("tokens", [5, 300])  # read as a list up to 256, reduced above
@pytest.mark.parametrize("batched", [False, True], ids=["1d", "2d"])
@pytest.mark.parametrize("bad", [4096, -2])
def test_a_position_out_of_range_is_found_anywhere(tokens: int, batched: bool, bad: int) -> None:
    positions = torch.zeros(tokens, dtype=torch.int64)
    positions[tokens // 2] = bad
    q, k = torch.randn(tokens, 4, 64), torch.randn(tokens, 2, 64)
    if batched:
        positions, q, k = positions.view(1, tokens), q.unsqueeze(0), k.unsqueeze(0)
    with pytest.raises(IndexError, match=f"positions holds {bad}; expected values in"):
        sycl_kernels.apply_rope(positions, q, k, torch.zeros(4096, 64), True)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (
            {"out_loc": torch.full((5,), 8)},
            IndexError,
            "out_loc holds 8; expected values in [-inf, 8)",
        ),
        (
            {"out_loc": torch.zeros(5, dtype=torch.int32)},
            TypeError,
            "out_loc has dtype torch.int32",
        ),
        ({"k_cache": torch.zeros(8, 2, 32)}, ValueError, "k_cache has shape (8, 2, 32)"),
        ({"v_cache": torch.zeros(9, 2, 64)}, ValueError, "v_cache has shape (9, 2, 64)"),
        ({"k_cache": torch.zeros(2, 8, 64).transpose(0, 1)}, ValueError, "expected a contiguous"),
        ({"v": torch.randn(5, 2, 64).half()}, TypeError, "v has dtype torch.float16"),
    ],
)
def test_apply_rope_kv_rejects_bad_input(
    change: dict, error: type[Exception], message: str
) -> None:
    args = {
        "v": torch.randn(5, 2, 64),
        "k_cache": torch.zeros(8, 2, 64),
        "v_cache": torch.zeros(8, 2, 64),
        "out_loc": torch.arange(5),
    }
    args.update(change)
    with pytest.raises(error) as info:
        sycl_kernels.apply_rope(
            torch.zeros(5, dtype=torch.int64),
            torch.randn(5, 4, 64),
            torch.randn(5, 2, 64),
            torch.zeros(4096, 64),
            True,
            **args,
        )
    assert message in str(info.value)


# The inputs of the suite-wide tests: the bad-input matrix and opcheck (tests/ops/cases.py).


def _opcheck_samples() -> list[tuple[str, tuple]]:
    qkv = torch.randn(3, 6 * 64)
    q, k = qkv[:, : 4 * 64].view(3, 4, 64), qkv[:, 4 * 64 : 5 * 64].view(3, 1, 64)
    positions, cache = torch.tensor([0, 5, 9]), references.rope_cache(16, 64)
    kv = (torch.randn(3, 1, 64), torch.zeros(4, 1, 64), torch.zeros(4, 1, 64))
    return [
        ("apply_rope", (positions, q, k, cache, True)),
        ("apply_rope", (positions, q.transpose(0, 1), None, cache, True, None, None, "HND")),
        (
            "apply_rope",
            (positions, q, k, cache, False, 64, 64, "NHD", *kv, torch.tensor([2, 0, 3])),
        ),
    ]


def _once_apply_rope(op, dtype: torch.dtype) -> None:
    # The run-once case (tests/ops/test_every_op_once.py): head size 96, not bundled.
    q, k = torch.randn(5, 4, 96).to(dtype), torch.randn(5, 2, 96).to(dtype)
    positions = torch.randint(0, MAX_POSITION, (5,))
    cache = references.rope_cache(MAX_POSITION, 96)
    want_q = references.rope(positions, q, cache, True)
    want_k = references.rope(positions, k, cache, True)
    op(positions, q, k, cache, True)
    references.assert_close(q, want_q)
    references.assert_close(k, want_k)


cases.register(
    cases.OpCase(
        "apply_rope",
        cases.rope_args,
        cases.ROPE_TENSORS,
        {
            "is_neox": cases.BOOL,
            "rotary_dim": [(32, ValueError), (0, ValueError), (64.0, TypeError), ("64", TypeError)],
            "head_size": [(32, ValueError), (0, ValueError), (64.0, TypeError)],
            "layout": [("BSHD", ValueError), (3, TypeError)],
        },
    ),
    opcheck=_opcheck_samples,
    once={"apply_rope": cases.OnceCase(_once_apply_rope)},
)
