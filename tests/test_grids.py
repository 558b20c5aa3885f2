"""tests/grids.py: a pairwise grid covers every pair of values of two axes, and only
what the product has, the same on every call."""

from __future__ import annotations

import itertools

import pytest

from tests.grids import pairwise

AXES = (("fp32", "fp16", "bf16"), (1, 7, 64, 1000), (True, False), ((64, 64), (128, 64)))


def test_every_pair_of_two_axes_is_covered_in_fewer_cases_than_the_product() -> None:
    cases = pairwise(*AXES)
    for i, j in itertools.combinations(range(len(AXES)), 2):
        covered = {(case[i], case[j]) for case in cases}
        assert covered == set(itertools.product(AXES[i], AXES[j])), (i, j)
    assert set(cases) <= set(itertools.product(*AXES))
    assert len(cases) < len(list(itertools.product(*AXES))) // 2


def test_the_cases_are_deterministic_and_two_axes_are_the_product() -> None:
    assert pairwise(*AXES) == pairwise(*AXES)
    assert pairwise(AXES[0], AXES[1]) == list(itertools.product(AXES[0], AXES[1]))


def test_an_empty_axis_is_refused() -> None:
    with pytest.raises(ValueError, match="an axis has no values"):
        pairwise(AXES[0], (), AXES[2])
