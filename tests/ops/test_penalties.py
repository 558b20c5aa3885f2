"""The logit penalties and the top-k mask against the engines' torch forms
(tests/references.py): apply_penalties bit for bit against vLLM's float32 sequence
(rounded once), repetition_penalty_by_ids against Hugging Face's gather / scatter and
its RepetitionPenaltyLogitsProcessor, top_k_mask_logits against TopKLogitsWarper's
comparison with torch.topk (ties, NaN, signed zeros). Sampled grids of batch 1..64,
vocab 32..256k, every dtype, strided and broadcast rows."""

from __future__ import annotations

import math

import pytest
import sycl_kernels
import torch
from sycl_kernels import _dtypes as dtype_table
from sycl_kernels.jit import stats

from tests import references
from tests.ops import cases

DTYPES = [d.torch_dtype for d in dtype_table.DTYPES]
# Each penalty's neutral value, by its name.
_NEUTRAL = {"repetition": 1.0, "frequency": 0.0, "presence": 0.0}
_PENALTIES_BY_NAME = tuple(_NEUTRAL)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _logits(batch: int, vocab: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """Logits with exact zeros of both signs, and ties."""
    x = 3 * torch.randn(batch, vocab, generator=_gen(seed))
    x[:, ::7] = x[:, ::7].round()  # ties and zeros
    x[:, 1::11] = -0.0
    return x.to(dtype)


def _mask(batch: int, vocab: int, density: float, seed: int) -> torch.Tensor:
    return torch.rand(batch, vocab, generator=_gen(seed)) < density


def _counts(batch: int, vocab: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = _gen(seed)
    return (torch.randint(1, 4, (batch, vocab), generator=g) * _mask(batch, vocab, 0.1, seed)).to(
        dtype
    )


def _penalties(batch: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = _gen(seed)
    return (
        0.5 + 1.5 * torch.rand(batch, generator=g),
        torch.rand(batch, generator=g) - 0.2,
        torch.rand(batch, generator=g) - 0.2,
    )


# (batch, vocab, prompt mask, output: "counts64", "counts32", "mask" or None, per-row
# tensors or scalars): sampled, not a product.
PENALTY_GRID = [
    (1, 32, True, "counts64", True),
    (1, 262144, True, "mask", True),
    (3, 5000, False, "counts32", True),
    (16, 32000, True, None, True),
    (64, 4099, True, "counts64", False),
    (7, 128256, False, "mask", False),
    (2, 4096, True, "counts32", False),
]


@pytest.mark.parametrize(("batch", "vocab", "prompt", "output", "per_row"), PENALTY_GRID, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_apply_penalties_matches_vllm(dtype, batch, vocab, prompt, output, per_row) -> None:
    logits = _logits(batch, vocab, dtype)
    prompt_mask = _mask(batch, vocab, 0.05, 1) if prompt else None
    counts = mask = None
    if output == "mask":
        mask = _mask(batch, vocab, 0.05, 2)
    elif output is not None:
        counts = _counts(batch, vocab, torch.int64 if output == "counts64" else torch.int32, 3)
    rep, freq, pres = _penalties(batch, 4)
    if not per_row:
        rep, freq, pres = (torch.full((batch,), t[0].item()) for t in (rep, freq, pres))
    if output is None:
        freq = pres = torch.zeros(batch)
    output_like = counts if counts is not None else mask
    want = references.penalties(logits, prompt_mask, output_like, rep, freq, pres)
    if per_row:
        kwargs = {"repetition_penalties": rep}
        if output is not None:
            kwargs |= {"frequency_penalties": freq, "presence_penalties": pres}
    else:
        kwargs = {"repetition_penalty": rep[0].item()}
        if output is not None:
            kwargs |= {"frequency_penalty": freq[0].item(), "presence_penalty": pres[0].item()}
    got = logits.clone()
    result = sycl_kernels.apply_penalties(got, prompt_mask, counts, mask, **kwargs)
    assert result is None
    assert torch.equal(got, want)


def test_strided_logits_broadcast_masks_and_penalties() -> None:
    """logits rows of a wider buffer, a prompt mask of one row for all (row stride 0),
    per-row penalties every other element of a tensor, and a bf16 penalty tensor."""
    batch, vocab = 5, 3000
    buffer = _logits(batch, vocab + 40, torch.bfloat16)
    logits = buffer[:, 8 : 8 + vocab]
    prompt_mask = _mask(1, vocab, 0.1, 5).expand(batch, vocab)
    counts = _counts(batch, vocab, torch.int64, 6)
    wide = torch.rand(2 * batch, generator=_gen(7)) + 0.8
    rep = wide[::2]
    freq = torch.full((1,), 0.25).expand(batch)
    pres = torch.rand(batch, generator=_gen(8)).bfloat16()
    want_buffer = buffer.clone()
    want_buffer[:, 8 : 8 + vocab] = references.penalties(
        logits, prompt_mask, counts, rep, freq, torch.zeros(batch)
    )
    sycl_kernels.apply_penalties(
        logits, prompt_mask, counts, repetition_penalties=rep, frequency_penalties=freq
    )
    assert torch.equal(buffer, want_buffer)  # the padding columns untouched too
    # Penalty tensors in logits' dtype (vLLM's convention).
    logits = _logits(batch, vocab, torch.bfloat16)
    want = references.penalties(
        logits, None, counts, (pres + 1).float(), pres.float(), pres.float()
    )
    sycl_kernels.apply_penalties(
        logits,
        output_counts=counts,
        repetition_penalties=pres + 1,
        frequency_penalties=pres,
        presence_penalties=pres,
    )
    assert torch.equal(logits, want)


@pytest.mark.parametrize("special", [math.nan, math.inf, -math.inf])
def test_nan_and_inf_follow_the_formula(special: float) -> None:
    logits = _logits(3, 64, torch.float32)
    logits[:, :8] = special
    mask = torch.zeros(3, 64, dtype=torch.bool)
    mask[:, ::2] = True
    counts = mask.long() * 2
    rep, freq, pres = _penalties(3, 9)
    want = references.penalties(logits, None, counts, rep, freq, pres)
    sycl_kernels.apply_penalties(
        logits,
        output_counts=counts,
        repetition_penalties=rep,
        frequency_penalties=freq,
        presence_penalties=pres,
    )
    assert torch.equal(logits.isnan(), want.isnan())
    assert torch.equal(logits.nan_to_num(), want.nan_to_num())


def test_no_penalty_in_effect_launches_nothing() -> None:
    logits = _logits(2, 64, torch.float32)
    before, kept = stats(), logits.clone()
    sycl_kernels.apply_penalties(logits, _mask(2, 64, 0.5, 1), repetition_penalty=1.0)
    sycl_kernels.apply_penalties(logits)
    after = stats()
    assert (after.hits, after.misses) == (before.hits, before.misses)
    assert torch.equal(logits, kept)


def test_penalty_arguments_are_checked() -> None:
    logits = _logits(2, 64, torch.float32)
    mask, counts = _mask(2, 64, 0.5, 1), _counts(2, 64, torch.int64, 2)
    with pytest.raises(ValueError, match="output_counts and output_mask"):
        sycl_kernels.apply_penalties(logits, None, counts, mask, repetition_penalty=1.2)
    with pytest.raises(ValueError, match=r"repetition_penalty is 1\.2 and repetition_penalties"):
        sycl_kernels.apply_penalties(
            logits, mask, repetition_penalty=1.2, repetition_penalties=torch.ones(2)
        )
    with pytest.raises(ValueError, match="no prompt_mask, output_counts or output_mask"):
        sycl_kernels.apply_penalties(logits, repetition_penalty=1.2)
    with pytest.raises(ValueError, match="presence penalty is given but no output_counts"):
        sycl_kernels.apply_penalties(logits, mask, presence_penalty=0.5)
    with pytest.raises(TypeError, match="penalty tensors have dtypes"):
        sycl_kernels.apply_penalties(
            logits.bfloat16(),
            output_counts=counts,
            repetition_penalties=torch.ones(2),
            frequency_penalties=torch.ones(2).bfloat16(),
        )
    for bad, error in (
        (mask.int(), TypeError),
        (mask[:, :63], ValueError),
        (torch.stack([mask, mask], -1)[..., 0], ValueError),
        (mask.tolist(), TypeError),
    ):
        with pytest.raises(error, match=r"apply_penalties\(\): output_mask"):
            sycl_kernels.apply_penalties(logits, output_mask=bad, repetition_penalty=1.2)
        assert torch.equal(logits, _logits(2, 64, torch.float32))


def test_penalty_scalars_past_float32_are_rejected() -> None:
    """The kernels take float32 scalars: past float32's range one would be infinite there
    (a frequency penalty's inf * 0 made every unseen token NaN), so it is refused by name;
    float32's largest is taken, and matches the float32 reference."""
    logits, counts = _logits(2, 64, torch.float32), _counts(2, 64, torch.int64, 4)
    big = torch.finfo(torch.float32).max
    for kind in _PENALTIES_BY_NAME:
        for value in (math.inf, -math.inf, 1e39, 10**400):
            if kind == "repetition" and value < 0:
                continue
            got = logits.clone()
            with pytest.raises(ValueError, match=rf"apply_penalties\(\): {kind}_penalty is"):
                sycl_kernels.apply_penalties(
                    got, output_counts=counts, **{f"{kind}_penalty": value}
                )
            assert torch.equal(got, logits)
        got = logits.clone()
        sycl_kernels.apply_penalties(got, output_counts=counts, **{f"{kind}_penalty": big})
        per_row = {k: torch.full((2,), big if k == kind else v) for k, v in _NEUTRAL.items()}
        want = references.penalties(logits, None, counts, *per_row.values())
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.nan_to_num(), want.nan_to_num())
    with pytest.raises(ValueError, match=r"repetition_penalty_by_ids\(\): repetition_penalty"):
        sycl_kernels.repetition_penalty_by_ids(logits, counts, repetition_penalty=1e39)


# --- Hugging Face's form ---


@pytest.mark.parametrize(
    ("batch", "vocab", "seq", "ids_dtype"),
    [(1, 32, 5, torch.int64), (4, 32000, 300, torch.int64), (2, 151936, 77, torch.int32)],
    ids=str,
)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_repetition_penalty_by_ids(dtype, batch, vocab, seq, ids_dtype) -> None:
    logits = _logits(batch, vocab, dtype)
    ids = torch.randint(0, vocab, (batch, seq), generator=_gen(1))
    ids[:, 1::3] = ids[:, :1]  # repeated ids
    ids[0, -1] = vocab + 3  # past the vocab: skipped
    ids[-1, 0] = -1  # padding: skipped
    ids = ids.to(ids_dtype)
    kept = logits.clone()
    got = sycl_kernels.repetition_penalty_by_ids(logits, ids, repetition_penalty=1.3)
    assert torch.equal(
        got, references.repetition_penalty_by_ids(logits, ids, torch.full((batch,), 1.3))
    )
    assert torch.equal(logits, kept) and got.is_contiguous()
    rows = torch.rand(batch, generator=_gen(2)) + 0.5
    got = sycl_kernels.repetition_penalty_by_ids(logits, ids, repetition_penalties=rows)
    assert torch.equal(got, references.repetition_penalty_by_ids(logits, ids, rows))


def test_repetition_penalty_by_ids_wide_and_broadcast_ids() -> None:
    """int64 ids past int32 and past the vocab (either sign) are skipped; one row of ids
    expanded over the batch (row stride 0) is every row's."""
    logits = _logits(3, 300, torch.bfloat16, seed=9)
    ids = torch.tensor([[5, 2**31 + 5, -(2**31) - 1, 2**62, 299, 300, 0, 5]])
    want = references.repetition_penalty_by_ids(logits, ids.expand(3, 8), torch.full((3,), 1.5))
    for given in (ids.expand(3, 8), ids.repeat(3, 1)):
        got = sycl_kernels.repetition_penalty_by_ids(logits, given, repetition_penalty=1.5)
        assert torch.equal(got, want)
    assert not torch.equal(want, logits)


def test_repetition_penalty_by_ids_equals_hugging_face() -> None:
    """Against HF's processor itself (float32 scores, ids within the vocab), strided
    logits rows."""
    logits = _logits(3, 1000, torch.float32, seed=3)[:, :900]
    ids = torch.randint(0, 900, (3, 50), generator=_gen(4))
    ids[:, 10:20] = ids[:, :10]
    hf = pytest.importorskip("transformers.generation.logits_process")
    want = hf.RepetitionPenaltyLogitsProcessor(1.3)(ids, logits.clone())
    assert torch.equal(
        sycl_kernels.repetition_penalty_by_ids(logits, ids, repetition_penalty=1.3), want
    )


# --- The top-k mask ---


@pytest.mark.parametrize(
    ("batch", "vocab", "k"),
    [(1, 32, 1), (3, 32, 32), (2, 5000, 50), (16, 32000, 40), (1, 262144, 1000), (64, 300, 7)],
    ids=str,
)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_top_k_mask_logits(dtype, batch, vocab, k) -> None:
    logits = _logits(batch, vocab, dtype, seed=batch)
    want = references.top_k_mask(logits, torch.full((batch,), k))
    kept = logits.clone()
    got = sycl_kernels.top_k_mask_logits(logits, k)
    assert torch.equal(got, want) and torch.equal(logits, kept)


def test_top_k_mask_ties_are_kept_and_equals_hugging_face() -> None:
    logits = torch.tensor(
        [[1.0, 3.0, 3.0, 2.0, 3.0, -0.0, 0.0], [0.0, -0.0, -1.0, 0.0, -2.0, 5.0, 0.0]]
    )
    got = sycl_kernels.top_k_mask_logits(logits, 2)
    inf = -math.inf
    assert torch.equal(got[0], torch.tensor([inf, 3.0, 3.0, inf, 3.0, inf, inf]))
    # -0.0 ties with 0.0: every zero stays beside the 5.
    assert torch.equal(got[1], torch.tensor([0.0, -0.0, inf, 0.0, inf, 5.0, 0.0]))
    hf = pytest.importorskip("transformers.generation.logits_process")
    scores = _logits(4, 3000, torch.float32, seed=5)
    assert torch.equal(
        sycl_kernels.top_k_mask_logits(scores, 20), hf.TopKLogitsWarper(20)(None, scores)
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_top_k_mask_nan_and_inf(dtype: torch.dtype) -> None:
    logits = _logits(4, 64, dtype, seed=6)
    logits[0, 5] = math.nan  # ranks first, kept
    logits[1, :4] = math.nan  # four NaNs and k = 3: the k-th is NaN, the row stays whole
    logits[2, 7:9] = math.inf  # two infinities and a NaN: the k-th is +inf
    logits[2, 10] = math.nan
    logits[3, :] = -math.inf  # all tied: all kept
    got = sycl_kernels.top_k_mask_logits(logits, 3)
    want = references.top_k_mask(logits, torch.full((4,), 3))
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(), want.nan_to_num())
    assert not got[1].isinf().any() and got[0].isfinite().sum() == 2
    assert (got[2] > -math.inf).sum() == 2 and got[2].isnan().sum() == 1
    assert torch.equal(got[3], logits[3])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_top_k_mask_rows_of_exactly_k_nans_stay_whole(dtype: torch.dtype) -> None:
    """Row r holds r + 1 NaNs: with k = 3 the row of exactly three NaNs has a NaN for its
    k-th largest (torch.topk ranks NaN first) and stays whole, as do the rows of more;
    per-row k equal to each row's NaN count keeps every row whole."""
    nan = math.nan
    got = sycl_kernels.top_k_mask_logits(torch.tensor([[nan, nan, nan, 1.0, 2.0]], dtype=dtype), 3)
    assert got.isnan().sum() == 3 and torch.equal(got[0, 3:], torch.tensor([1.0, 2.0], dtype=dtype))
    logits = _logits(6, 200, dtype, seed=10)
    for r in range(6):
        logits[r, torch.randperm(200, generator=_gen(r))[: r + 1]] = nan
    nan_counts = torch.arange(1, 7)
    for got, top_ks in (
        (sycl_kernels.top_k_mask_logits(logits, 3), torch.full((6,), 3)),
        (sycl_kernels.top_k_mask_logits(logits, top_ks=nan_counts), nan_counts),
    ):
        want = references.top_k_mask(logits, top_ks)
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.nan_to_num(), want.nan_to_num())
    assert not got.isinf().any()  # per-row k = the NaN count: every row whole


def test_top_k_mask_top_k_past_the_vocab_keeps_the_row() -> None:
    """Any top_k at least the vocab keeps every row, ints past int64 too (clamped before
    the launch), as per-row values past int32 do."""
    logits = _logits(3, 50, torch.float32, seed=11)
    for k in (50, 2**31, 2**63, 2**64 + 5):
        assert torch.equal(sycl_kernels.top_k_mask_logits(logits, k), logits)
    top_ks = torch.tensor([2**31, 2**62, 2**63 - 1])
    assert torch.equal(sycl_kernels.top_k_mask_logits(logits, top_ks=top_ks), logits)


def test_top_k_mask_per_row_in_place_and_strided_out() -> None:
    batch, vocab = 6, 2000
    logits = _logits(batch, vocab, torch.float16, seed=7)
    top_ks = torch.tensor([0, 1, -1, 50, vocab, vocab - 1], dtype=torch.int32)
    want = references.top_k_mask(logits, top_ks)
    assert torch.equal(sycl_kernels.top_k_mask_logits(logits, top_ks=top_ks.long()), want)
    wide = torch.full((batch, vocab + 8), 7.0, dtype=torch.float16)
    out = wide[:, 4 : 4 + vocab]
    assert sycl_kernels.top_k_mask_logits(logits[::1], top_ks=top_ks, out=out) is out
    assert torch.equal(out, want) and (wide[:, :4] == 7).all() and (wide[:, -4:] == 7).all()
    in_place = logits.clone()
    sycl_kernels.top_k_mask_logits(in_place, top_ks=top_ks, out=in_place)
    assert torch.equal(in_place, want)
    assert torch.equal(sycl_kernels.top_k_mask_logits(logits, 10**9), logits)


def test_top_k_arguments_are_checked() -> None:
    logits = _logits(2, 64, torch.float32)
    with pytest.raises(ValueError, match="give top_k or top_ks"):
        sycl_kernels.top_k_mask_logits(logits, 3, top_ks=torch.ones(2, dtype=torch.int64))
    for bad, error in (
        (torch.ones(2), TypeError),
        (torch.ones(3, dtype=torch.int64), ValueError),
        (torch.ones(2, 1, dtype=torch.int64), ValueError),
        ([1, 2], TypeError),
    ):
        with pytest.raises(error, match=r"top_k_mask_logits\(\): top_ks"):
            sycl_kernels.top_k_mask_logits(logits, top_ks=bad)


def test_through_torch_ops_and_compile() -> None:
    logits = _logits(4, 500, torch.bfloat16)
    mask, rep = _mask(4, 500, 0.1, 1), torch.rand(4) + 1
    want = references.penalties(logits, mask, None, rep, torch.zeros(4), torch.zeros(4))
    got = logits.clone()
    torch.ops.sycl_kernels.apply_penalties(got, mask, repetition_penalties=rep)
    assert torch.equal(got, want)

    def step(x: torch.Tensor) -> torch.Tensor:
        sycl_kernels.apply_penalties(x, mask, repetition_penalties=rep)
        return sycl_kernels.top_k_mask_logits(x, 5)

    torch._dynamo.reset()
    got = torch.compile(step, fullgraph=True, backend="eager")(logits.clone())
    assert torch.equal(got, references.top_k_mask(want, torch.full((4,), 5)))


# Suite-wide registrations (tests/ops/cases.py). Vocab 64: the zero-token matrix
# expects [0, 64] results.

_ROWS = f"{cases.COMMON} extra_dim missing_dim zero_dim last_dim_plus_one last_stride_2"
_PER_ROW = f"{cases.COMMON} int32 float16 float64 extra_dim zero_dim last_dim_plus_one"
_SCALAR = [*cases.NOT_A_NUMBER, (math.nan, ValueError)]
_POSITIVE = [*_SCALAR, (0.0, ValueError), (-1.0, ValueError)]


def _penalty_args() -> dict[str, object]:
    rep, freq, pres = _penalties(5, 1)
    return {
        "logits": torch.randn(5, 64),
        "prompt_mask": _mask(5, 64, 0.2, 2),
        "output_counts": _counts(5, 64, torch.int64, 3),
        "output_mask": None,
        "repetition_penalty": 1.0,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
        "repetition_penalties": rep,
        "frequency_penalties": freq,
        "presence_penalties": pres,
    }


def _ids_args() -> dict[str, object]:
    return {
        "logits": torch.randn(5, 64),
        "input_ids": torch.randint(0, 64, (5, 9)),
        "repetition_penalty": 1.0,
        "repetition_penalties": torch.rand(5) + 0.5,
    }


def _top_k_args() -> dict[str, object]:
    return {"logits": torch.randn(5, 64), "top_k": 4, "top_ks": None, "out": torch.zeros(5, 64)}


def _opcheck_samples() -> list[tuple[str, tuple]]:
    pen, ids = _penalty_args(), _ids_args()
    scalars = (
        torch.randn(3, 64),
        None,
        None,
        _mask(3, 64, 0.3, 4),
        1.3,
        0.0,
        0.0,
        None,
        None,
        None,
    )
    return [
        ("apply_penalties", tuple(pen.values())),
        ("apply_penalties", scalars),
        ("repetition_penalty_by_ids", tuple(ids.values())),
        ("top_k_mask_logits", (torch.randn(4, 64).bfloat16(), 3, None)),
        (
            "top_k_mask_logits_out",
            (torch.randn(4, 64), None, torch.tensor([1, 0, 64, 7]), torch.empty(4, 64)),
        ),
    ]


def _once_penalties(op, dtype: torch.dtype) -> None:
    args = _penalty_args()
    logits = _logits(5, 200, dtype)
    prompt_mask, counts = _mask(5, 200, 0.2, 2), _counts(5, 200, torch.int32, 3)
    rep, freq, pres = _penalties(5, 1)
    want = references.penalties(logits, prompt_mask, counts, rep, freq, pres)
    args |= {"logits": logits, "prompt_mask": prompt_mask, "output_counts": counts}
    op(**args)
    assert torch.equal(logits, want)


def _once_by_ids(op, dtype: torch.dtype) -> None:
    logits = _logits(3, 200, dtype)
    ids = torch.randint(0, 200, (3, 30), generator=_gen(5))
    want = references.repetition_penalty_by_ids(logits, ids, torch.full((3,), 1.7))
    assert torch.equal(op(logits, ids, repetition_penalty=1.7), want)


def _once_top_k(op, dtype: torch.dtype) -> None:
    logits = _logits(3, 200, dtype)
    assert torch.equal(op(logits, 9), references.top_k_mask(logits, torch.full((3,), 9)))


cases.register(
    cases.OpCase(
        "apply_penalties",
        _penalty_args,
        {
            "logits": f"{cases.FLOAT} extra_dim missing_dim zero_dim last_stride_2 "
            "overlapping_rows",
            "prompt_mask": f"{_ROWS} int32 float32",
            "output_counts": f"{_ROWS} float32 bool",
            "repetition_penalties": _PER_ROW,
            "frequency_penalties": _PER_ROW,
            "presence_penalties": _PER_ROW,
        },
        {
            "repetition_penalty": _POSITIVE,
            "frequency_penalty": [*_SCALAR, (0.5, ValueError)],
            "presence_penalty": [*_SCALAR, (0.5, ValueError)],
        },
    ),
    cases.OpCase(
        "repetition_penalty_by_ids",
        _ids_args,
        {
            "logits": f"{cases.FLOAT} extra_dim missing_dim zero_dim last_stride_2",
            "input_ids": f"{cases.COMMON} float32 bool extra_dim missing_dim zero_dim "
            "last_stride_2",
            "repetition_penalties": _PER_ROW,
        },
        {"repetition_penalty": _POSITIVE},
    ),
    cases.OpCase(
        "top_k_mask_logits",
        _top_k_args,
        {
            "logits": f"{cases.FLOAT} extra_dim missing_dim zero_dim last_stride_2",
            "out": f"{cases.FLOAT} float16 extra_dim missing_dim zero_dim last_dim_plus_one "
            "last_stride_2 overlapping_rows",
        },
        {
            "top_k": [
                ("2", TypeError),
                (2.5, TypeError),
                (True, TypeError),
                (0, ValueError),
                (None, ValueError),
            ]
        },
    ),
    opcheck=_opcheck_samples,
    once={
        "apply_penalties": cases.OnceCase(_once_penalties),
        "repetition_penalty_by_ids": cases.OnceCase(_once_by_ids),
        "top_k_mask_logits": cases.OnceCase(_once_top_k),
    },
)
