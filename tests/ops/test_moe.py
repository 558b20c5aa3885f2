"""moe_align_block_size and moe_sum vs independent torch references (tests/references.py):
a sort-based alignment compared per expert as sets and, for the order this package
defines (stable by flat index), as lists; a float64 sum."""

from __future__ import annotations

import math

import pytest
import sycl_kernels
import torch

from tests import references
from tests.ops import cases
from tests.ops.cases import COMMON, NOT_A_NUMBER, OnceCase, OpCase


def _ids(tokens: int, topk: int, experts: int, dtype=torch.int32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randperm(experts, generator=g)[:topk] for _ in range(tokens)]).to(
        dtype
    )


def _check_align(topk_ids, num_experts, block_size, expert_map=None, result=None) -> None:
    if result is None:
        result = sycl_kernels.moe_align_block_size(topk_ids, num_experts, block_size, expert_map)
    sorted_ids, expert_ids, total = result
    runs, blocks, want_total = references.moe_align_block_size(
        topk_ids, num_experts, block_size, expert_map
    )
    numel = topk_ids.numel()
    assert int(total[0]) == want_total
    assert expert_ids[: len(blocks)].tolist() == blocks
    assert (expert_ids[len(blocks) :] == -1).all()
    assert (sorted_ids[want_total:] == numel).all()
    at = 0
    for run in runs:
        size = -(-len(run) // block_size) * block_size
        got = sorted_ids[at : at + size]
        assert set(got[: len(run)].tolist()) == set(run)  # the callers' comparison
        assert got[: len(run)].tolist() == run  # stable by flat index (ours)
        assert (got[len(run) :] == numel).all()
        at += size


GRID = [(e, k, b) for e in (8, 64, 256) for k in (1, 2, 8) for b in (16, 64, 128)]


@pytest.mark.parametrize(("experts", "topk", "block_size"), GRID)
@pytest.mark.parametrize("tokens", [1, 37])
def test_align_matches_sort_reference(experts, topk, block_size, tokens) -> None:
    _check_align(_ids(tokens, topk, experts), experts, block_size)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_align_with_expert_map_and_many_tokens(dtype) -> None:
    experts = 64
    g = torch.Generator().manual_seed(3)
    expert_map = torch.full((experts,), -1, dtype=torch.int32)
    local = torch.randperm(experts, generator=g)[:16]
    expert_map[local] = torch.arange(16, dtype=torch.int32)
    ids = _ids(300, 4, experts, dtype)
    _check_align(ids, experts, 32, expert_map)
    _check_align(ids, experts, 16)


def test_align_given_outputs_of_callers_sizes() -> None:
    ids = _ids(3, 2, 8)
    size = min(ids.numel() * 16, ids.numel() + 8 * 15)  # vLLM's for few tokens
    outs = (
        torch.empty(size, dtype=torch.int32),
        torch.empty(-(-size // 16), dtype=torch.int32),
        torch.empty(1, dtype=torch.int32),
    )
    got = sycl_kernels.moe_align_block_size(
        ids,
        8,
        16,
        sorted_token_ids=outs[0],
        expert_ids=outs[1],
        num_tokens_post_padded=outs[2],
    )
    assert all(a is b for a, b in zip(got, outs, strict=True))
    _check_align(ids, 8, 16, result=outs)


def test_align_ids_out_of_range_raise_index_error() -> None:
    with pytest.raises(IndexError, match="topk_ids"):
        sycl_kernels.moe_align_block_size(torch.tensor([[0, 8]], dtype=torch.int32), 8, 16)
    bad_map = torch.full((8,), 9, dtype=torch.int32)
    with pytest.raises(IndexError, match="expert_map"):
        sycl_kernels.moe_align_block_size(torch.tensor([[0, 1]]), 8, 16, bad_map)


def test_align_outputs_too_small_for_the_padded_total_raise() -> None:
    """Given outputs shorter than the padded total: ValueError, and nothing written past
    them (the kernels bound every write)."""
    ids = torch.arange(8, dtype=torch.int32).view(4, 2)  # 8 experts, one slot each
    sorted_ids = torch.full((40,), -7, dtype=torch.int32)  # needs 8 * 16 = 128
    outs = (sorted_ids[:20], torch.empty(2, dtype=torch.int32), torch.empty(1, dtype=torch.int32))
    with pytest.raises(ValueError, match="padded total is 128"):
        sycl_kernels.moe_align_block_size(
            ids,
            8,
            16,
            sorted_token_ids=outs[0],
            expert_ids=outs[1],
            num_tokens_post_padded=outs[2],
        )
    assert (sorted_ids[20:] == -7).all()


def test_align_padded_total_past_int32_raises_and_writes_inside_the_outputs() -> None:
    # Two experts padded to 2**30 each: a total of 2**31, which wrapped an int32.
    ids = torch.tensor([[0, 1]], dtype=torch.int32)
    canary = torch.full((64,), 7, dtype=torch.int32)
    sorted_ids, expert_ids, total = canary[16:32], canary[40:44], canary[50:51]
    with pytest.raises(ValueError, match=r"padded total is 2147483648; expected at least"):
        sycl_kernels.moe_align_block_size(
            ids,
            2,
            2**30,
            sorted_token_ids=sorted_ids,
            expert_ids=expert_ids,
            num_tokens_post_padded=total,
        )
    untouched = torch.cat([canary[:16], canary[32:40], canary[44:50], canary[51:]])
    assert (untouched == 7).all()


@pytest.mark.parametrize(
    ("block_size", "outputs", "refusal"),
    [
        (2**31, True, r"block_size must be at most 2147483647, got 2147483648"),
        (2**63, True, r"block_size must be at most 2147483647"),
        (2**30, False, r"block_size 1073741824 with 2 experts makes sorted_token_ids 2147483648"),
    ],
)
def test_align_sizes_past_int32_are_refused_naming_block_size(block_size, outputs, refusal):
    given = {}
    if outputs:
        given = {
            "sorted_token_ids": torch.empty(16, dtype=torch.int32),
            "expert_ids": torch.empty(4, dtype=torch.int32),
            "num_tokens_post_padded": torch.empty(1, dtype=torch.int32),
        }
    ids = torch.tensor([[0, 1]], dtype=torch.int32)
    with pytest.raises(ValueError, match=refusal):
        sycl_kernels.moe_align_block_size(ids, 2, block_size, **given)


def test_moe_sum_topk_past_int32_sums_in_float32_order() -> None:
    # 2**31 + 1 slots of one element, read through stride 0: the sum of ones in float32,
    # in order, stops growing at 2**24 (topk was an int32 the host module refused).
    x = torch.ones(1).as_strided((1, 2**31 + 1, 1), (0, 0, 1))
    assert sycl_kernels.moe_sum(x).tolist() == [[2.0**24]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("tokens", "topk", "hidden"), [(1, 1, 64), (7, 2, 200), (33, 8, 1024)])
def test_moe_sum_matches_float64(dtype, tokens, topk, hidden) -> None:
    x = torch.randn(tokens, topk, hidden).to(dtype)
    want = references.moe_sum(x)
    torch.testing.assert_close(sycl_kernels.moe_sum(x), want.to(dtype))
    torch.testing.assert_close(sycl_kernels.moe_sum(x, scale=2.5), (want * 2.5).to(dtype))


def test_moe_sum_masks_and_strides() -> None:
    x = torch.randn(6, 8, 4, 128)[:, ::2, 1]  # token and topk strides, unit last
    ids = torch.tensor([[0, -1, 5, 3]] * 6)
    expert_map = torch.tensor([0, 1, -1, 2, -1, -1, 3, 4], dtype=torch.int32)
    torch.testing.assert_close(
        sycl_kernels.moe_sum(x, ids, expert_map), references.moe_sum(x, ids, expert_map).float()
    )
    out = torch.empty(6, 256)[:, :128]
    sycl_kernels.moe_sum(x, ids.int(), out=out)
    torch.testing.assert_close(out, references.moe_sum(x, ids).float())
    with pytest.raises(IndexError, match="topk_ids"):
        sycl_kernels.moe_sum(x, torch.full((6, 4), 8), expert_map)
    with pytest.raises(ValueError, match="expert_map"):
        sycl_kernels.moe_sum(x, None, expert_map)
    with pytest.raises(TypeError, match="topk_ids"):
        sycl_kernels.moe_sum(x, ids.float())


def _align_args() -> dict[str, object]:
    return {
        "topk_ids": _ids(5, 2, 8),
        "num_experts": 8,
        "block_size": 4,
        "expert_map": torch.tensor([0, 1, -1, 2, 3, -1, 4, 5], dtype=torch.int32),
    }


def _sum_args() -> dict[str, object]:
    return {"x": torch.randn(5, 2, 64), "scale": 1.0}


INDEX_KINDS = "float32 extra_dim missing_dim last_stride_2 index_too_large index_negative"


def _opcheck() -> list[tuple[str, tuple]]:
    ids = _ids(5, 2, 8)
    outs = (torch.empty(5 * 2 + 8 * 3, dtype=torch.int32), torch.empty(9, dtype=torch.int32))
    x = torch.randn(4, 3, 64)
    return [
        ("moe_align_block_size", (ids, 8, 4, None)),
        ("moe_align_block_size_out", (ids, 8, 4, None, *outs, torch.empty(1, dtype=torch.int32))),
        ("moe_sum", (x, None, None, 1.0)),
        ("moe_sum", (x, _ids(4, 3, 8), None, 0.5)),
        ("moe_sum_out", (x, None, None, 1.0, torch.empty(4, 64))),
    ]


def _once_align(op, dtype) -> None:
    _check_align(_ids(9, 3, 40, dtype), 40, 16)


def _once_sum(op, dtype) -> None:
    x = torch.randn(5, 3, 200).to(dtype)
    torch.testing.assert_close(op(x), references.moe_sum(x).to(dtype))


cases.register(
    OpCase(
        "moe_align_block_size",
        _align_args,
        tensors={"topk_ids": f"{COMMON} {INDEX_KINDS}", "expert_map": f"{COMMON} {INDEX_KINDS}"},
        scalars={
            "num_experts": [(0, ValueError), (2000, ValueError), ("8", TypeError)],
            "block_size": [(0, ValueError), (None, TypeError)],
        },
    ),
    OpCase(
        "moe_sum",
        _sum_args,
        tensors={"x": f"{COMMON} int32 float64 extra_dim missing_dim zero_dim last_stride_2"},
        scalars={"scale": [*NOT_A_NUMBER, (math.nan, ValueError)]},
    ),
    opcheck=_opcheck,
    once={
        "moe_align_block_size": OnceCase(_once_align, (torch.int32, torch.int64)),
        "moe_sum": OnceCase(_once_sum),
    },
)
