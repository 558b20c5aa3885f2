"""compat.vllm and compat.sgl_kernel MoE calls: the engines' signatures and in-place
contracts, per-expert sets vs the sort-based reference (tests/references.py)."""

from __future__ import annotations

import torch
from sycl_kernels.compat import sgl_kernel, vllm

from tests import references
from tests.ops.test_moe import _ids


def _buffers(numel: int, experts: int, block: int):
    size = numel + experts * (block - 1)
    return (
        torch.empty(size, dtype=torch.int32),
        torch.empty(-(-size // block), dtype=torch.int32),
        torch.empty(1, dtype=torch.int32),
    )


def test_vllm_moe_align_block_size_in_place() -> None:
    ids, experts, block = _ids(20, 4, 64), 64, 16
    s, e, n = _buffers(ids.numel(), experts, block)
    assert vllm.moe_align_block_size(ids, experts, block, s, e, n, None) is None
    runs, blocks, total = references.moe_align_block_size(ids, experts, block)
    assert int(n[0]) == total
    assert e[: len(blocks)].tolist() == blocks and (e[len(blocks) :] == 0).all()
    at = 0
    for run in runs:  # per expert, as sets (the callers' comparison)
        size = -(-len(run) // block) * block
        assert set(s[at : at + size].tolist()) - {ids.numel()} == set(run)
        at += size


def test_sgl_moe_align_block_size_minus_one_bucket() -> None:
    ids = _ids(10, 2, 8).long()
    ids[0, 0] = -1
    experts, block = 8 + 1, 16
    s, e, n = _buffers(ids.numel(), experts, block)
    cumsum = torch.empty(experts + 1, dtype=torch.int32)
    sgl_kernel.moe_align_block_size(ids, experts, block, s, e, n, cumsum, True)
    _, blocks, total = references.moe_align_block_size(ids + 1, experts, block)
    assert int(n[0]) == total == int(cumsum[-1])
    assert e[: len(blocks)].tolist() == [b - 1 for b in blocks]
    assert e[0] == -1 and 0 in s[:block].tolist()


def test_moe_sums() -> None:
    x = torch.randn(7, 3, 96, dtype=torch.bfloat16)
    out = torch.empty(7, 96, dtype=torch.bfloat16)
    ids = torch.tensor([[0, 1, -1]] * 7, dtype=torch.int32)
    emap = torch.tensor([0, -1], dtype=torch.int32)
    vllm.moe_sum(x, out, ids, emap)
    torch.testing.assert_close(out, references.moe_sum(x, ids, emap).bfloat16())
    sgl_kernel.moe_sum_reduce(x, out, 0.5)
    torch.testing.assert_close(out, references.moe_sum(x, scale=0.5).bfloat16())
    sgl_kernel.moe_sum(x, out)
    torch.testing.assert_close(out, references.moe_sum(x).bfloat16())
