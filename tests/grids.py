"""Sampled parameter grids: every pair of values of any two axes, not the full product.

A test crossing dtype x shape x option, where the options' code path does not depend
on the crossing, runs a pairwise covering of the axes instead of their product
(docs/kernel-development.md, "Test grids"): every value of every axis appears, and so
does every pair of values of two axes (every dtype at every shape, every option in
every dtype), in about max(|a| * |b|) cases rather than |a| * |b| * |c| * ....
Deterministic (no randomness, the same cases on every run and machine), so the
kernels a run compiles stay those tests/suite-kernels.json.gz records.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence


def pairwise(*axes: Sequence[object]) -> list[tuple[object, ...]]:
    """Cases (one value of each axis) covering every pair of values of two axes.

    Greedy: each case is the product's first tuple that covers the most pairs not
    yet covered; with fewer than three axes that is the whole product. Values of
    an axis may be tuples (parameters that go together, as (head_dim, rotary_dim)).
    """
    axes = tuple(tuple(axis) for axis in axes)
    if any(not axis for axis in axes):
        raise ValueError("pairwise(): an axis has no values")
    if len(axes) < 3:
        return list(itertools.product(*axes))
    pairs = itertools.combinations(range(len(axes)), 2)
    uncovered = {
        (i, a, j, b) for i, j in pairs for a in range(len(axes[i])) for b in range(len(axes[j]))
    }
    product = list(itertools.product(*(range(len(axis)) for axis in axes)))
    cases = []
    while uncovered:
        best = max(product, key=lambda case: len(_pairs(case) & uncovered))
        uncovered -= _pairs(best)
        cases.append(best)
    return [tuple(axes[k][v] for k, v in enumerate(case)) for case in cases]


def _pairs(case: tuple[int, ...]) -> set[tuple[int, int, int, int]]:
    return {(i, case[i], j, case[j]) for i, j in itertools.combinations(range(len(case)), 2)}
