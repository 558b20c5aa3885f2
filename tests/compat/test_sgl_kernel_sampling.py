"""sycl_kernels.compat.sgl_kernel's sampling functions against the references of
sgl-kernel-xpu's tests/test_sampling.py at 9cf16bf9 (flashinfer's), on samples of its
grids: renormalized probabilities within 1e-3, every sample inside the reference mask,
and the contract around them (generator, indices, check_nan, filter_apply_order,
dtypes, aliases)."""

from __future__ import annotations

import pytest
import torch
from sycl_kernels.compat import sgl_kernel

from tests import references


def _normalized(batch: int, vocab: int, seed: int = 42) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    pre = torch.rand(batch, vocab, generator=g)
    return pre / pre.sum(dim=-1, keepdim=True)


# sgl's references (tests/test_sampling.py), vectorized where it loops.


def _sgl_top_k_renorm(prob: torch.Tensor, k: torch.Tensor | int) -> torch.Tensor:
    rows = prob.shape[0]
    k = k if isinstance(k, torch.Tensor) else torch.full((rows,), k)
    pivot = torch.sort(prob, descending=True).values.gather(1, (k.long() - 1)[:, None])
    kept = torch.where(prob >= pivot, prob, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


def _sgl_top_p_renorm(prob: torch.Tensor, p: torch.Tensor | float) -> torch.Tensor:
    sorted_prob, indices = torch.sort(prob, descending=False)
    cdf = torch.cumsum(sorted_prob, dim=-1)
    threshold = (1 - p.float())[:, None] if isinstance(p, torch.Tensor) else 1 - float(p)
    mask = torch.zeros_like(prob, dtype=torch.int32)
    mask.scatter_add_(1, indices, (cdf >= threshold).int())
    kept = torch.where(mask == 0, 0.0, prob)
    return kept / kept.sum(dim=-1, keepdim=True)


def _sgl_joint_mask(prob: torch.Tensor, k, p, eps: float = 1e-4) -> torch.Tensor:
    rows = prob.shape[0]
    k = k if isinstance(k, torch.Tensor) else torch.full((rows,), k)
    p = p if isinstance(p, torch.Tensor) else torch.full((rows,), p)
    sorted_prob, indices = torch.sort(prob, descending=False)
    cdf = torch.cumsum(sorted_prob, dim=-1)
    mask_top_p = torch.zeros_like(prob, dtype=torch.int32)
    mask_top_p.scatter_add_(1, indices, (cdf > (1 - p)[:, None] - eps).int())
    pivot = torch.sort(prob, descending=True).values.gather(1, (k.long() - 1)[:, None])
    return torch.minimum(mask_top_p, (prob >= pivot).int()) == 1


def _sgl_min_p_mask(prob: torch.Tensor, p) -> torch.Tensor:
    top = prob.max(-1, keepdim=True).values
    scaled = (p[:, None] if isinstance(p, torch.Tensor) else p) * top
    return prob >= scaled


def _assert_in(samples: torch.Tensor, mask: torch.Tensor, indices=None) -> None:
    rows = torch.arange(samples.shape[0]) if indices is None else indices.long()
    assert samples.dtype == torch.int32
    assert bool(((samples >= 0) & (samples < mask.shape[1])).all())
    assert bool(mask[rows, samples.long()].all())


def _many(batch: int, draws: int) -> torch.Tensor:
    """indices repeating each row `draws` times: one call, many independent draws."""
    return torch.arange(batch).repeat(draws)


GRID = [(1, 111), (16, 32000), (3, 128256)]


@pytest.mark.parametrize(("batch", "vocab"), GRID)
def test_top_k_renorm_probs(batch: int, vocab: int) -> None:
    prob = _normalized(batch, vocab)
    for k in (10, 100):
        got = sgl_kernel.top_k_renorm_prob(prob, k)
        torch.testing.assert_close(got, _sgl_top_k_renorm(prob, k), rtol=1e-3, atol=1e-3)
    ks = torch.randint(10, 50, (batch,), generator=torch.Generator().manual_seed(1))
    got = sgl_kernel.top_k_renorm_probs(prob, ks)
    torch.testing.assert_close(got, _sgl_top_k_renorm(prob, ks), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(("batch", "vocab"), GRID)
def test_top_p_renorm_probs(batch: int, vocab: int) -> None:
    prob = _normalized(batch, vocab)
    for p in (0.1, 1.0):
        got = sgl_kernel.top_p_renorm_prob(prob, p)
        torch.testing.assert_close(got, _sgl_top_p_renorm(prob, p), rtol=1e-3, atol=1e-3)
    ps = torch.rand(batch, generator=torch.Generator().manual_seed(2)) * 0.4 + 0.5
    got = sgl_kernel.top_p_renorm_probs(prob, ps)
    torch.testing.assert_close(got, _sgl_top_p_renorm(prob, ps), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(("batch", "vocab"), GRID)
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_top_k_top_p_joint_sampling_from_probs(batch: int, vocab: int, p: float) -> None:
    prob = _normalized(batch, vocab)
    k = int(vocab * (0.5 if p == 0.1 else 0.1))
    mask = _sgl_joint_mask(prob, k, p)
    indices = _many(batch, 50)
    gen = torch.Generator().manual_seed(0)
    for top_k, top_p in ((k, p), (torch.full((batch,), k), torch.full((batch,), p))):
        top_k = top_k[indices] if isinstance(top_k, torch.Tensor) else top_k
        top_p = top_p[indices] if isinstance(top_p, torch.Tensor) else top_p
        samples = sgl_kernel.top_k_top_p_sampling_from_probs(
            prob, top_k, top_p, indices=indices, filter_apply_order="joint", generator=gen
        )
        _assert_in(samples, mask, indices)


def test_top_k_first_is_top_p_of_the_top_k_renormalized() -> None:
    prob = _normalized(8, 2000)
    k, p = 40, 0.5
    renormed = _sgl_top_k_renorm(prob, k)
    mask = _sgl_top_p_renorm(renormed, p) > 0
    indices = _many(8, 50)
    samples = sgl_kernel.top_k_top_p_sampling_from_probs(prob, k, p, indices=indices)
    _assert_in(samples, mask, indices)
    # The reading: top-p keeps fewer tokens once applied over the top-k mass.
    joint = sgl_kernel.top_k_top_p_sampling_from_probs(
        prob, k, p, indices=indices, filter_apply_order="joint"
    )
    assert len(set(joint.tolist())) > len(set(samples.tolist()))


@pytest.mark.parametrize(("batch", "vocab"), GRID)
def test_top_p_sampling_from_probs(batch: int, vocab: int) -> None:
    prob = _normalized(batch, vocab)
    mask = _sgl_top_p_renorm(prob, 0.5) > 0
    indices = _many(batch, 40)
    samples = sgl_kernel.top_p_sampling_from_probs(prob, 0.5, indices=indices)
    _assert_in(samples, mask, indices)


@pytest.mark.parametrize(("batch", "vocab"), GRID)
@pytest.mark.parametrize("p", [0.05, 0.7, 1])
def test_min_p_sampling(batch: int, vocab: int, p: float) -> None:
    prob = _normalized(batch, vocab)
    mask = _sgl_min_p_mask(prob, p)
    samples = sgl_kernel.min_p_sampling_from_probs(prob, p, indices=_many(batch, 40))
    _assert_in(samples, mask, _many(batch, 40))
    ps = torch.empty(batch).uniform_(0.05, 0.7, generator=torch.Generator().manual_seed(3))
    samples = sgl_kernel.min_p_sampling_from_probs(prob, ps)
    _assert_in(samples, _sgl_min_p_mask(prob, ps))


def test_generator_reproduces_and_advances() -> None:
    prob = _normalized(16, 1000)
    calls = (
        lambda g: sgl_kernel.top_p_sampling_from_probs(prob, 0.9, generator=g),
        lambda g: sgl_kernel.top_k_top_p_sampling_from_probs(prob, 50, 0.9, generator=g),
        lambda g: sgl_kernel.min_p_sampling_from_probs(prob, 0.1, generator=g),
    )
    for call in calls:
        g = torch.Generator().manual_seed(5)
        first, second = call(g), call(g)
        assert not torch.equal(first, second)  # the generator advanced
        g = torch.Generator().manual_seed(5)
        assert torch.equal(call(g), first)
    torch.manual_seed(8)
    a = sgl_kernel.top_p_sampling_from_probs(prob, 0.9, deterministic=False)
    torch.manual_seed(8)
    assert torch.equal(a, sgl_kernel.top_p_sampling_from_probs(prob, 0.9))


def test_distribution_of_top_k_top_p_samples() -> None:
    """20000 draws of one 32-token row: the total variation distance to sgl's
    renormalized top-k-first distribution stays under 0.04 (expected about 0.01)."""
    prob = _normalized(1, 32, seed=3)
    want = _sgl_top_p_renorm(_sgl_top_k_renorm(prob, 12), 0.6)[0].double()
    samples = sgl_kernel.top_k_top_p_sampling_from_probs(
        prob,
        12,
        0.6,
        indices=torch.zeros(20000, dtype=torch.int64),
        generator=torch.Generator().manual_seed(0),
    )
    freq = torch.bincount(samples.long(), minlength=32).double() / 20000
    assert bool((freq[want == 0] == 0).all())
    assert 0.5 * float((freq - want).abs().sum()) < 0.04


def test_contract_checks_dtypes_and_aliases() -> None:
    prob = _normalized(4, 64)
    bad = prob.clone()
    bad[1, 3] = float("nan")
    for call in (
        lambda: sgl_kernel.top_p_sampling_from_probs(bad, 0.9, check_nan=True),
        lambda: sgl_kernel.top_k_top_p_sampling_from_probs(bad, 5, 0.9, check_nan=True),
        lambda: sgl_kernel.top_k_top_p_sampling_from_probs(
            bad, 5, 0.9, filter_apply_order="joint", check_nan=True
        ),
        lambda: sgl_kernel.min_p_sampling_from_probs(bad, 0.1, check_nan=True),
    ):
        with pytest.raises(ValueError, match="Input probs contains NaN"):
            call()
    # Without check_nan a NaN counts as probability 0.
    samples = sgl_kernel.top_p_sampling_from_probs(bad, 1.0, indices=torch.ones(500).long())
    assert 3 not in samples.tolist()
    with pytest.raises(ValueError, match="Invalid filter_apply_order: both"):
        sgl_kernel.top_k_top_p_sampling_from_probs(prob, 5, 0.9, filter_apply_order="both")
    with pytest.raises(ValueError, match="top_p"):
        sgl_kernel.top_p_renorm_probs(prob, 1.5)
    with pytest.raises(ValueError, match="top_k"):
        sgl_kernel.top_k_renorm_probs(prob, 0)
    assert sgl_kernel.top_k_renorm_prob is sgl_kernel.top_k_renorm_probs
    assert sgl_kernel.top_p_renorm_prob is sgl_kernel.top_p_renorm_probs
    # bf16 probs are converted (sgl's probs.float()); int32 per-row top_k taken as is.
    got = sgl_kernel.top_k_renorm_probs(prob.bfloat16(), torch.tensor([1, 2, 3, 4]).int())
    want = _sgl_top_k_renorm(prob.bfloat16().float(), torch.tensor([1, 2, 3, 4]))
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
    # Samples are one per entry of indices.
    indices = torch.tensor([3, 3, 0, 1, 2, 0, 1])
    samples = sgl_kernel.top_p_sampling_from_probs(prob, 0.9, indices=indices)
    assert samples.shape == (7,) and samples.dtype == torch.int32
    mask = references.sampling_mask(prob, top_p=0.9)
    _assert_in(samples, mask, indices)
