"""top_k_renorm_probs, top_p_renorm_probs and sample_from_probs against sort-based float64
references (tests/references.py sampling_mask), the Philox stream, reproducibility and
row independence, empirical frequencies, and the bad-input cases."""

from __future__ import annotations

import math

import pytest
import sycl_kernels
import torch
from sycl_kernels.ops.sampling import philox_seed

from tests import references
from tests.ops import cases


def _probs(rows: int, vocab: int, seed: int = 0, temperature: float = 2.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(rows, vocab, generator=g) * temperature, -1)


def _seed(value: int = 1) -> torch.Tensor:
    return philox_seed(torch.Generator().manual_seed(value))


def _assert_in_mask(samples: torch.Tensor, mask: torch.Tensor, indices=None) -> None:
    rows = torch.arange(samples.shape[0]) if indices is None else indices.long()
    assert samples.dtype == torch.int32
    assert bool(((samples >= 0) & (samples < mask.shape[1])).all()), samples
    allowed = mask[rows, samples.long()]
    assert bool(allowed.all()), f"outside the kept support at rows {(~allowed).nonzero()}"


# Renormalization.

RENORM_GRID = [(1, 32), (5, 1000), (3, 32000), (2, 128256), (1, 262144)]


@pytest.mark.parametrize(("rows", "vocab"), RENORM_GRID)
def test_top_k_renorm_matches_the_sort_based_reference(rows: int, vocab: int) -> None:
    probs = _probs(rows, vocab)
    for k in (1, 7, 50, vocab):
        want = references.renormalized(probs, references.sampling_mask(probs, top_k=k))
        references.assert_close(sycl_kernels.top_k_renorm_probs(probs, k), want)


@pytest.mark.parametrize(("rows", "vocab"), RENORM_GRID)
def test_top_p_renorm_matches_the_sort_based_reference(rows: int, vocab: int) -> None:
    probs = _probs(rows, vocab, seed=1)
    for p in (0.05, 0.5, 0.9, 1.0):
        want = references.renormalized(probs, references.sampling_mask(probs, top_p=p))
        references.assert_close(sycl_kernels.top_p_renorm_probs(probs, p), want)


def test_per_row_parameters_strides_and_out() -> None:
    probs = _probs(6, 3000, seed=2)[:, :2500]  # a row stride past the width
    ks = torch.tensor([1, 2, 10, 100, 2500, 5000])
    for dtype in (torch.int32, torch.int64):
        want = references.renormalized(probs, references.sampling_mask(probs, top_k=ks))
        got = sycl_kernels.top_k_renorm_probs(probs, top_k_per_row=ks.to(dtype))
        references.assert_close(got, want)
    ps = torch.tensor([0.01, 0.2, 0.5, 0.8, 0.99, 1.0])
    want = references.renormalized(probs, references.sampling_mask(probs, top_p=ps))
    out = torch.full((6, 2600), 7.0)[:, :2500]
    got = sycl_kernels.top_p_renorm_probs(probs, top_p_per_row=ps, out=out)
    assert got is out
    references.assert_close(out, want)


def test_a_top_k_past_the_vocab_keeps_every_row() -> None:
    """Any top_k at least the vocab keeps the row whole, ints past int32 and int64 too
    (clamped before the launch)."""
    probs = _probs(3, 40, seed=13)
    whole = references.renormalized(probs, references.sampling_mask(probs))
    seed = _seed(10)
    plain = sycl_kernels.sample_from_probs(probs, seed=seed)
    for k in (40, 2**31, 2**63, 2**64 + 5):
        references.assert_close(sycl_kernels.top_k_renorm_probs(probs, k), whole)
        assert torch.equal(sycl_kernels.sample_from_probs(probs, top_k=k, seed=seed), plain)
    per_row = torch.tensor([2**40, 2**62, 41])
    references.assert_close(sycl_kernels.top_k_renorm_probs(probs, top_k_per_row=per_row), whole)
    got = sycl_kernels.sample_from_probs(probs, top_k_per_row=per_row, seed=seed)
    assert torch.equal(got, plain)


def test_ties_at_the_boundary_are_all_kept() -> None:
    probs = torch.tensor([[0.1, 0.2, 0.3, 0.2, 0.2], [0.25, 0.25, 0.25, 0.25, 0.0]])
    got = sycl_kernels.top_k_renorm_probs(probs, 2)
    assert torch.equal(got[0] > 0, torch.tensor([False, True, True, True, True]))
    assert torch.equal(got[1] > 0, torch.tensor([True, True, True, True, False]))
    # top_p 0.4 reaches 0.3 + 0.2: every 0.2 is kept; 0.3 alone (0.3 < 0.4) is not enough.
    got = sycl_kernels.top_p_renorm_probs(probs, 0.4)
    assert torch.equal(got[0] > 0, torch.tensor([False, True, True, True, True]))
    references.assert_close(got[0], torch.tensor([0, 2, 3, 2, 2], dtype=torch.float64) / 9)


def test_unnormalized_rows_zero_rows_and_non_finite_entries() -> None:
    probs = _probs(3, 500, seed=3)
    scaled = probs * 4.0  # a power of two: every sum scales exactly
    for op, arg in ((sycl_kernels.top_k_renorm_probs, 20), (sycl_kernels.top_p_renorm_probs, 0.7)):
        assert torch.equal(op(scaled, arg), op(probs, arg))
    seed = _seed()
    same = sycl_kernels.sample_from_probs(scaled, top_p=0.7, seed=seed)
    assert torch.equal(same, sycl_kernels.sample_from_probs(probs, top_p=0.7, seed=seed))
    # A row without support: zeros renormalized, index 0 sampled.
    special = torch.zeros(2, 64)
    special[1] = torch.tensor([math.nan, -1.0, math.inf, 0.5] * 16)
    assert torch.equal(sycl_kernels.top_k_renorm_probs(special[:1], 3), torch.zeros(1, 64))
    assert sycl_kernels.sample_from_probs(special, seed=seed)[0] == 0
    # NaN, Inf and negative entries count as zero: only the 0.5 entries are kept.
    got = sycl_kernels.top_p_renorm_probs(special[1:], 1.0)
    want = torch.tensor([0.0, 0.0, 0.0, 1 / 16] * 16)[None]
    assert torch.equal(got, want)
    samples = sycl_kernels.sample_from_probs(special[[1] * 50], seed=seed)
    assert bool((samples % 4 == 3).all())


def test_masses_past_float32s_range_are_scaled_exactly() -> None:
    """Rows whose mass would overflow float32 (or whose 1 / mass would) are summed in
    units of a power of two near their maximum: a row times 2^100 or 2^-100 gives the
    bits of the row itself, and extreme rows match the float64 reference."""
    probs = _probs(3, 500, seed=12)
    seed = _seed(8)
    for factor in (2.0**100, 2.0**-100):
        scaled = probs * factor  # every entry stays normal: exact
        for op, arg in (
            (sycl_kernels.top_k_renorm_probs, 20),
            (sycl_kernels.top_p_renorm_probs, 0.7),
        ):
            assert torch.equal(op(scaled, arg), op(probs, arg))
        for filters in ({}, {"top_k": 30, "top_p": 0.8}, {"top_p": 0.9, "min_p": 0.01}):
            want = sycl_kernels.sample_from_probs(probs, seed=seed, **filters)
            assert torch.equal(sycl_kernels.sample_from_probs(scaled, seed=seed, **filters), want)
    # A mass of 6e38 (float32's largest is 3.4e38) and one of 4e-40 (1 / it overflows).
    extreme = torch.tensor([[3e38, 1e38, 2e38, 1.0, 0.0], [1e-40, 3e-40, 0.0, 0.0, 2e-45]])
    for k in (2, 3, 5):
        want = references.renormalized(extreme, references.sampling_mask(extreme, top_k=k))
        references.assert_close(sycl_kernels.top_k_renorm_probs(extreme, k), want)
    for p in (0.6, 1.0):
        want = references.renormalized(extreme, references.sampling_mask(extreme, top_p=p))
        references.assert_close(sycl_kernels.top_p_renorm_probs(extreme, p), want)


# Sampling.


def test_philox_stream_matches_the_reference() -> None:
    """With 16 equal probabilities each lane holds one token at prefix r / 16, so the
    sample is exactly floor(16 u) for the row's uniform u."""
    rows = 64
    probs = torch.full((rows, 16), 1 / 16)
    seed = torch.tensor([0x0123456789ABCDEF, -5], dtype=torch.int64)
    got = sycl_kernels.sample_from_probs(probs, seed=seed)
    want = [math.floor(16 * references.philox_uniform(*seed.tolist(), r)) for r in range(rows)]
    assert got.tolist() == want
    per_row = torch.tensor([[7, 11]] * rows)
    got = sycl_kernels.sample_from_probs(probs, seed=per_row)
    assert got.tolist() == [math.floor(16 * references.philox_uniform(7, 11, 0))] * rows


def test_an_expanded_per_row_seed_is_still_one_pair_a_row() -> None:
    """A [rows, 2] seed is one pair a row (counter (offset, 0)) whatever its row stride:
    expanded from one pair (stride 0) it draws as the same pair repeated, unlike the
    shared [2] form (counter (offset, r))."""
    rows = 8
    probs = torch.full((rows, 16), 1 / 16)
    pair = torch.tensor([123, 7])
    want = [math.floor(16 * references.philox_uniform(123, 7, 0))] * rows
    for seed in (pair.expand(rows, 2), pair.repeat(rows, 1), pair.repeat(rows, 2)[:, 2:]):
        assert sycl_kernels.sample_from_probs(probs, seed=seed).tolist() == want
    shared = [math.floor(16 * references.philox_uniform(123, 7, r)) for r in range(rows)]
    assert sycl_kernels.sample_from_probs(probs, seed=pair).tolist() == shared
    assert shared != want


SAMPLE_GRID = [
    # rows, vocab, filters
    (1, 32, {"top_k": 5}),
    (8, 1000, {"top_p": 0.8}),
    (64, 1000, {"top_k": 40, "top_p": 0.9}),
    (16, 32000, {"top_k": 50, "top_p": 0.9, "joint": True}),
    (4, 128256, {"min_p": 0.1}),
    (2, 262144, {"top_k": 1000, "top_p": 0.95, "min_p": 0.01}),
]


@pytest.mark.parametrize(("rows", "vocab", "filters"), SAMPLE_GRID)
def test_samples_lie_in_the_kept_support(rows: int, vocab: int, filters: dict) -> None:
    probs = _probs(rows, vocab, seed=rows)
    mask = references.sampling_mask(probs, **filters)
    for draw in range(3):
        got = sycl_kernels.sample_from_probs(probs, seed=_seed(draw), **filters)
        _assert_in_mask(got, mask)


def test_per_row_filters_and_indices() -> None:
    probs = _probs(5, 2000, seed=4)
    indices = torch.tensor([4, 0, 0, 2, 1, 3, 4, 4], dtype=torch.int32)
    filters = {
        "top_k_per_row": torch.tensor([1, 5, 50, 2000, 3, 100, 10, 7], dtype=torch.int32),
        "top_p_per_row": torch.tensor([1.0, 0.5, 0.9, 0.3, 0.99, 0.7, 0.2, 1.0]),
        "min_p_per_row": torch.tensor([0.0, 0.0, 0.05, 0.1, 0.0, 0.2, 0.0, 0.5]),
    }
    rows = probs[indices.long()]
    for joint in (False, True):
        mask = references.sampling_mask(
            rows, *(filters[f"{n}_per_row"] for n in ("top_k", "top_p", "min_p")), joint=joint
        )
        for draw in range(4):
            got = sycl_kernels.sample_from_probs(
                probs, indices=indices, seed=_seed(draw), joint=joint, **filters
            )
            _assert_in_mask(got, mask)
    assert int(sycl_kernels.sample_from_probs(probs, indices=indices, **filters)[0]) == int(
        probs[4].argmax()
    )


def test_joint_and_top_k_first_differ_as_documented() -> None:
    # top-k 2 keeps {0.4, 0.3}; top-p 0.5 of that mass keeps 0.4 only (top-k first),
    # while top-p 0.5 of the whole row keeps {0.4, 0.3} (joint).
    probs = torch.tensor([[0.4, 0.3, 0.2, 0.1]])
    many = probs[[0] * 400]
    first = sycl_kernels.sample_from_probs(many, top_k=2, top_p=0.5, seed=_seed())
    joint = sycl_kernels.sample_from_probs(many, top_k=2, top_p=0.5, seed=_seed(), joint=True)
    assert set(first.tolist()) == {0}
    assert set(joint.tolist()) == {0, 1}


def test_same_seed_same_samples_and_the_default_generator() -> None:
    probs = _probs(16, 5000, seed=5)
    seed = _seed(3)
    a = sycl_kernels.sample_from_probs(probs, top_p=0.95, seed=seed)
    assert torch.equal(a, sycl_kernels.sample_from_probs(probs, top_p=0.95, seed=seed))
    b = sycl_kernels.sample_from_probs(probs, top_p=0.95, seed=_seed(4))
    assert not torch.equal(a, b)
    torch.manual_seed(123)
    c = sycl_kernels.sample_from_probs(probs, top_p=0.95)
    d = sycl_kernels.sample_from_probs(probs, top_p=0.95)  # the generator advanced
    torch.manual_seed(123)
    assert torch.equal(c, sycl_kernels.sample_from_probs(probs, top_p=0.95))
    assert not torch.equal(c, d)
    g = torch.Generator().manual_seed(9)
    first = philox_seed(g)
    assert not torch.equal(first, philox_seed(g))
    assert torch.equal(first, philox_seed(torch.Generator().manual_seed(9)))


def test_a_rows_draw_does_not_depend_on_the_other_rows() -> None:
    row = _probs(1, 4096, seed=6)
    seed = _seed(5)
    alone = sycl_kernels.sample_from_probs(row, top_k=100, seed=seed)
    batch = torch.cat([row, _probs(7, 4096, seed=7)])
    assert sycl_kernels.sample_from_probs(batch, top_k=100, seed=seed)[0] == alone[0]
    # Row 3 of a batch of 8 and of a batch of 16 with other neighbours.
    small = _probs(8, 4096, seed=8)
    large = torch.cat([_probs(3, 4096, seed=9), small[3:4], _probs(12, 4096, seed=10)])
    got_small = sycl_kernels.sample_from_probs(small, top_k=100, seed=seed)
    got_large = sycl_kernels.sample_from_probs(large, top_k=100, seed=seed)
    assert got_small[3] == got_large[3]
    # Per-row seeds: a row's draw does not depend on its position either.
    pairs = torch.tensor([[21, 0]] * 8)
    alone = sycl_kernels.sample_from_probs(small[5:6], top_p=0.9, seed=pairs[:1])
    assert sycl_kernels.sample_from_probs(small, top_p=0.9, seed=pairs)[5] == alone[0]


@pytest.mark.parametrize(
    "filters",
    [{}, {"top_k": 10}, {"top_p": 0.6}, {"top_k": 20, "top_p": 0.7, "joint": True}, {"min_p": 0.3}],
    ids=["plain", "top_k", "top_p", "joint", "min_p"],
)
def test_empirical_frequencies_follow_the_renormalized_distribution(filters: dict) -> None:
    """20000 draws of one row (indices repeat it: each draw its own Philox subsequence),
    fixed seed: the total variation distance to the renormalized reference is about
    0.01 for 32 tokens (the expected sampling error); the bound 0.04 is four times it,
    and an off-by-one token or a wrong filter moves it past 0.1."""
    probs = _probs(1, 32, seed=11, temperature=1.0)
    want = references.renormalized(probs, references.sampling_mask(probs, **filters))[0]
    draws = 20000
    indices = torch.zeros(draws, dtype=torch.int64)
    got = sycl_kernels.sample_from_probs(probs, indices=indices, seed=_seed(7), **filters)
    freq = torch.bincount(got.long(), minlength=32).double() / draws
    assert bool((freq[want == 0] == 0).all())
    assert 0.5 * float((freq - want).abs().sum()) < 0.04


@pytest.mark.parametrize(
    "filters",
    [{}, {"top_k": 2}, {"top_p": 0.6}, {"top_k": 3, "top_p": 0.6, "joint": True}, {"min_p": 0.5}],
    ids=["plain", "top_k", "top_p", "joint", "min_p"],
)
def test_rows_of_extreme_mass_sample_their_distribution(filters: dict) -> None:
    """A row of mass 6e38 (past float32's largest) and one of 4e-40 (subnormal): 4000
    draws each, total variation to the float64 reference well under 0.1 (its expected
    sampling error is about 0.01; an overflowed mass always drew the last kept entry)."""
    rows = torch.tensor([[3e38, 1e38, 2e38, 1.0, 0.0], [1e-40, 3e-40, 0.0, 0.0, 2e-45]])
    want = references.renormalized(rows, references.sampling_mask(rows, **filters))
    draws = 4000
    for r in range(2):
        indices = torch.full((draws,), r, dtype=torch.int64)
        got = sycl_kernels.sample_from_probs(rows, indices=indices, seed=_seed(9), **filters)
        freq = torch.bincount(got.long(), minlength=5).double() / draws
        assert bool((freq[want[r] == 0] == 0).all()), (r, freq)
        assert 0.5 * float((freq - want[r]).abs().sum()) < 0.05, (r, freq, want[r])


def test_per_row_values_are_checked_on_cpu() -> None:
    probs = _probs(3, 100)
    bad = {
        "top_k_per_row": torch.tensor([1, 0, 3]),
        "top_p_per_row": torch.tensor([0.5, 1.5, 0.1]),
        "min_p_per_row": torch.tensor([0.5, -0.1, 0.1]),
    }
    for name, value in bad.items():
        with pytest.raises(ValueError, match=rf"sample_from_probs\(\): {name}\[1\]"):
            sycl_kernels.sample_from_probs(probs, **{name: value})
    with pytest.raises(ValueError, match=r"top_k_renorm_probs\(\): top_k_per_row\[1\]"):
        sycl_kernels.top_k_renorm_probs(probs, top_k_per_row=bad["top_k_per_row"])
    with pytest.raises(ValueError, match=r"top_p_renorm_probs\(\): top_p_per_row\[1\]"):
        sycl_kernels.top_p_renorm_probs(probs, top_p_per_row=bad["top_p_per_row"])
    with pytest.raises(IndexError, match=r"sample_from_probs\(\): indices\[2\] is 3"):
        sycl_kernels.sample_from_probs(probs, indices=torch.tensor([0, 2, 3]))
    with pytest.raises(ValueError, match="give top_k or top_k_per_row, not both"):
        sycl_kernels.top_k_renorm_probs(probs, 2, top_k_per_row=torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match=r"top_p_renorm_probs\(\): give top_p"):
        sycl_kernels.top_p_renorm_probs(probs)


def test_samples_through_torch_ops_and_compile_match_eager() -> None:
    probs = _probs(4, 300)
    seed = _seed()
    want = sycl_kernels.sample_from_probs(probs, top_k=30, top_p=0.9, seed=seed)
    got = torch.ops.sycl_kernels.sample_from_probs(probs, 30, None, 0.9, seed=seed)
    assert torch.equal(got, want)
    compiled = torch.compile(
        lambda p, s: sycl_kernels.sample_from_probs(p, top_k=30, top_p=0.9, seed=s),
        fullgraph=True,
        backend="eager",
    )
    assert torch.equal(compiled(probs, seed), want)


# The bad-input matrix, opcheck and the run-once cases (tests/ops/cases.py).

PROBS = f"{cases.COMMON} float16 float64 extra_dim missing_dim zero_dim last_stride_2"
PER_ROW_FLOAT = f"{cases.COMMON} float64 int32 extra_dim zero_dim last_dim_plus_one last_stride_2"
PER_ROW_INT = f"{cases.COMMON} float32 extra_dim zero_dim last_dim_plus_one last_stride_2"
OUT = f"{cases.COMMON} float16 float64 extra_dim missing_dim last_dim_plus_one last_stride_2"
SAMPLES_OUT = f"{cases.COMMON} float32 extra_dim last_dim_plus_one overlapping_rows"
TOP_K = [("2", TypeError), (2.0, TypeError), (True, TypeError), (0, ValueError)]
TOP_P = [*cases.NOT_A_NUMBER[:1], (True, TypeError), (0.0, ValueError), (1.5, ValueError)]
TOP_P += [(math.nan, ValueError)]
MIN_P = [("0.1", TypeError), (True, TypeError), (-0.1, ValueError), (1.5, ValueError)]


def _top_k_args() -> dict[str, object]:
    return {"probs": _probs(5, 64), "top_k": None, "top_k_per_row": torch.tensor([1, 2, 3, 4, 70])}


def _top_p_args() -> dict[str, object]:
    top_p = torch.tensor([0.1, 0.5, 0.9, 1.0, 0.3])
    return {"probs": _probs(5, 64), "top_p": None, "top_p_per_row": top_p}


def _sample_args() -> dict[str, object]:
    return {
        "probs": _probs(5, 64),
        "top_k": None,
        "top_k_per_row": torch.tensor([1, 2, 3, 4, 70]),
        "top_p": None,
        "top_p_per_row": torch.tensor([0.1, 0.5, 0.9, 1.0, 0.3]),
        "min_p": None,
        "min_p_per_row": torch.tensor([0.0, 0.1, 0.2, 0.0, 1.0]),
        "indices": None,
        "seed": _seed(),
        "joint": False,
        "out": torch.zeros(5, dtype=torch.int32),
    }


def _sample_scalar_args() -> dict[str, object]:
    return {"probs": _probs(5, 64), "top_k": 3, "top_p": 0.9, "min_p": 0.1, "joint": False}


cases.register(
    cases.OpCase(
        "top_k_renorm_probs",
        lambda: {**_top_k_args(), "out": torch.zeros(5, 64)},
        {"probs": PROBS, "top_k_per_row": PER_ROW_INT, "out": OUT},
    ),
    cases.OpCase(
        "top_p_renorm_probs",
        lambda: {**_top_p_args(), "out": torch.zeros(5, 64)},
        {"probs": PROBS, "top_p_per_row": PER_ROW_FLOAT, "out": OUT},
    ),
    cases.OpCase(
        "sample_from_probs",
        _sample_args,
        {
            "probs": PROBS,
            "top_k_per_row": PER_ROW_INT,
            "top_p_per_row": PER_ROW_FLOAT,
            "min_p_per_row": PER_ROW_FLOAT,
            "seed": f"{cases.COMMON} float32 int32 extra_dim zero_dim last_dim_plus_one",
            "out": SAMPLES_OUT,
        },
    ),
    opcheck=lambda: [
        ("top_k_renorm_probs", (_probs(3, 40), 5, None)),
        (
            "top_k_renorm_probs_out",
            (_probs(3, 40), None, torch.tensor([1, 2, 50]), torch.empty(3, 40)),
        ),
        ("top_p_renorm_probs", (_probs(3, 40), 0.5, None)),
        ("top_p_renorm_probs_out", (_probs(3, 40), 0.9, None, torch.empty(3, 40))),
        ("sample_from_probs", (_probs(3, 40), 5, None, 0.9, None, 0.05, None, None, _seed(), True)),
        (
            "sample_from_probs_out",
            (
                _probs(2, 40),
                None,
                torch.tensor([1, 2, 50]),
                None,
                None,
                None,
                None,
                torch.tensor([0, 0, 1]),
                _seed(),
                False,
                torch.empty(3, dtype=torch.int32),
            ),
        ),
    ],
    once={
        "top_k_renorm_probs": cases.OnceCase(
            lambda op, dtype: references.assert_close(
                op(_probs(5, 200), 9),
                references.renormalized(
                    _probs(5, 200), references.sampling_mask(_probs(5, 200), 9)
                ),
            ),
            (torch.float32,),
        ),
        "top_p_renorm_probs": cases.OnceCase(
            lambda op, dtype: references.assert_close(
                op(_probs(5, 200), 0.7),
                references.renormalized(
                    _probs(5, 200), references.sampling_mask(_probs(5, 200), top_p=0.7)
                ),
            ),
            (torch.float32,),
        ),
        "sample_from_probs": cases.OnceCase(
            lambda op, dtype: _assert_in_mask(
                op(_probs(5, 200), top_k=20, top_p=0.8, min_p=0.05, seed=_seed()),
                references.sampling_mask(_probs(5, 200), 20, 0.8, 0.05),
            ),
            (torch.float32,),
        ),
    },
)


def test_scalar_filters_are_rejected_by_name() -> None:
    """The scalar filters (the matrix's cases give the per-row tensors)."""
    for name, values in (("top_k", TOP_K), ("top_p", TOP_P), ("min_p", MIN_P)):
        for value, error in values:
            args = {**_sample_scalar_args(), name: value}
            with pytest.raises(error, match=rf"sample_from_probs\(\): {name}"):
                sycl_kernels.sample_from_probs(**args)
    for value, error in TOP_K:
        with pytest.raises(error, match=r"top_k_renorm_probs\(\): top_k"):
            sycl_kernels.top_k_renorm_probs(_probs(2, 8), value)
    for value, error in TOP_P:
        with pytest.raises(error, match=r"top_p_renorm_probs\(\): top_p"):
            sycl_kernels.top_p_renorm_probs(_probs(2, 8), value)
    for value in (None, 1):
        with pytest.raises(TypeError, match=r"sample_from_probs\(\): joint"):
            sycl_kernels.sample_from_probs(**{**_sample_scalar_args(), "joint": value})
    with pytest.raises(ValueError, match=r"sample_from_probs\(\): seed has shape"):
        sycl_kernels.sample_from_probs(_probs(5, 8), seed=torch.zeros(3, 2, dtype=torch.int64))
