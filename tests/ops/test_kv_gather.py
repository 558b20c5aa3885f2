"""The paged KV-cache gather (gather_cache) against tests/references.py paged_gather (vLLM's
block by block concatenation): copies bit for bit in every cache dtype, fp8 e4m3
dequantized bit for bit against torch's float(x) * scale, on vLLM's MLA grid (entry 512
+ 64, block sizes 16/32/64, several batches, seq_starts), CPU and GPU tunings; a round
trip through the store; out-of-range indices (IndexError on CPU tensors, nothing
written; the kernel alone, as an XPU runs it, leaves those rows unwritten)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sycl_kernels
import torch

from tests import references
from tests.ops import cases

FP8 = torch.float8_e4m3fn
MLA_ENTRY = 512 + 64


def _cache(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if dtype.itemsize == 1:  # every byte value, NaN patterns of fp8 included
        return torch.randint(0, 256, shape, dtype=torch.uint8).view(dtype)
    return torch.randn(shape).to(dtype)


def _batch(
    lengths: list[int], num_blocks: int, block_size: int, starts: list[int] | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """block_table (each row a random permutation: distinct blocks), cu_seq_lens and
    seq_starts (int32), for sequences of `lengths` tokens."""
    block_table = torch.stack([torch.randperm(num_blocks) for _ in lengths]).to(torch.int32)
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    cu[1:] = torch.tensor(lengths).cumsum(0)
    seq_starts = None if starts is None else torch.tensor(starts, dtype=torch.int32)
    return block_table, cu, seq_starts


def _assert_bits(got: torch.Tensor, want: torch.Tensor) -> None:
    """Bit for bit; floats NaN at the same places."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.is_floating_point and got.element_size() > 1:
        nan = want.isnan()
        assert torch.equal(got.isnan(), nan)
        assert torch.equal(got[~nan], want[~nan])
    else:
        assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


# (dtype, block_size, lengths, starts): vLLM's grid sampled, not its product.
GRID = [
    (torch.float32, 16, [37], None),
    (torch.bfloat16, 16, [0, 130, 17, 64, 1], None),
    (torch.float16, 32, [33, 0, 96], [0, 5, 64]),
    (torch.bfloat16, 64, [200, 63, 1, 0, 65, 128, 3, 90], [3, 0, 64, 7, 0, 1, 100, 64]),
    (FP8, 16, [50, 16], [16, 9]),
    (torch.float8_e5m2, 32, [40, 7, 80], None),
    (torch.uint8, 64, [129, 0], [1, 0]),
]


@pytest.mark.parametrize(("dtype", "block_size", "lengths", "starts"), GRID, ids=str)
def test_mla_grid_matches_reference(dtype, block_size, lengths, starts) -> None:
    num_blocks = 12
    cache = _cache((num_blocks, block_size, MLA_ENTRY), dtype)
    block_table, cu, seq_starts = _batch(lengths, num_blocks, block_size, starts)
    rows = int(cu[-1]) + 3  # rows past every sequence stay as they are
    dst = _cache((rows, MLA_ENTRY), dtype)
    want = references.paged_gather(cache, dst, block_table, cu, seq_starts)
    assert sycl_kernels.gather_cache(cache, dst, block_table, cu, seq_starts) is None
    _assert_bits(dst, want)


@pytest.mark.parametrize("dequant", [False, True], ids=["copy", "dequant"])
def test_gpu_tuned_kernel(dequant: bool, tuning_override: Callable[[str], None]) -> None:
    """The XPU's kernel (256 work-items over a row, one row a work-group) run on the CPU
    device."""
    tuning_override("gpu")
    cache = _cache((6, 32, MLA_ENTRY), FP8 if dequant else torch.bfloat16)
    block_table, cu, seq_starts = _batch([70, 0, 33], 6, 32, [1, 0, 32])
    dst = torch.zeros(103, MLA_ENTRY, dtype=torch.bfloat16)
    scale = torch.tensor([0.25]) if dequant else None
    want = references.paged_gather(cache, dst, block_table, cu, seq_starts, scale)
    sycl_kernels.gather_cache(cache, dst, block_table, cu, seq_starts, scale)
    _assert_bits(dst, want)


def test_strided_cache_dst_and_block_table_with_flash_entry() -> None:
    """A flash-layout cache [blocks, block_size, heads, head_size] with padded pages, a
    dst with padded rows, a block table with padded rows and unread garbage columns."""
    blocks, block_size, heads, head_size = 6, 16, 2, 64
    padded = torch.randn(blocks, block_size, heads * head_size + 16)
    cache = padded[..., : heads * head_size].unflatten(2, (heads, head_size))
    table = torch.full((2, 9), -7, dtype=torch.int32)
    table[0, :6], table[1, 2:6] = torch.randperm(6).int(), torch.randperm(6)[:4].int()
    cu = torch.tensor([0, 40, 90], dtype=torch.int32)
    seq_starts = torch.tensor([0, 32], dtype=torch.int32)
    dst = torch.zeros(90, heads * head_size + 4)[:, : heads * head_size].unflatten(1, (heads, -1))
    want = references.paged_gather(cache, dst, table, cu, seq_starts)
    sycl_kernels.gather_cache(cache, dst, table, cu, seq_starts)
    assert torch.equal(dst, want)
    # block_table rows of stride 12: a slice of a wider table.
    wide = torch.full((2, 12), -7, dtype=torch.int32)
    wide[:, :9] = table
    dst.zero_()
    sycl_kernels.gather_cache(cache, dst, wide[:, :9], cu, seq_starts)
    assert torch.equal(dst, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_fp8_dequantize_every_byte(dtype) -> None:
    """Each of the 256 fp8 e4m3 values (NaN, subnormals, +-448) times a scale, rounded
    once to dst's dtype, as torch computes it."""
    cache = torch.arange(256, dtype=torch.uint8).view(FP8).reshape(2, 16, 8)
    block_table, cu, _ = _batch([32], 2, 16)
    scale = torch.tensor([0.37])
    dst = torch.zeros(32, 8, dtype=dtype)
    want = references.paged_gather(cache, dst, block_table, cu, None, scale)
    sycl_kernels.gather_cache(cache, dst, block_table, cu, scale=scale)
    _assert_bits(dst, want)
    assert dst.isnan().sum() == 2  # 0x7f and 0xff


@pytest.mark.parametrize("cache_dtype", [torch.bfloat16, FP8], ids=str)
def test_round_trip_store_then_gather(cache_dtype) -> None:
    """concat_and_cache_mla at the slots a block table gives, then gather_cache: the
    rows back (fp8: the stored values dequantized)."""
    block_size, num_blocks, dtype = 16, 12, torch.bfloat16
    lengths, starts = [21, 40, 5], [0, 16, 3]
    _, cu, seq_starts = _batch(lengths, num_blocks, block_size, starts)
    block_table = torch.randperm(num_blocks).view(3, 4).to(torch.int32)  # no block shared
    slots = torch.cat(
        [
            block_table[b, pos // block_size].long() * block_size + pos % block_size
            for b, n in enumerate(lengths)
            for pos in [torch.arange(starts[b], starts[b] + n)]
        ]
    )
    kv_c, k_pe = torch.randn(66, 512).to(dtype), torch.randn(66, 64).to(dtype)
    kv_cache = torch.zeros(num_blocks, block_size, MLA_ENTRY, dtype=cache_dtype)
    scale = torch.tensor([0.02]) if cache_dtype == FP8 else None
    sycl_kernels.concat_and_cache_mla(kv_c, k_pe, kv_cache, slots, scale)
    dst = torch.zeros(66, MLA_ENTRY, dtype=dtype)
    sycl_kernels.gather_cache(kv_cache, dst, block_table, cu, seq_starts, scale)
    rows = torch.cat([kv_c, k_pe], -1)
    if cache_dtype == FP8:
        rows = ((rows.float() / scale).clamp(-448, 448).to(FP8).float() * scale).to(dtype)
    assert torch.equal(dst, rows)


def test_through_torch_ops_and_compile() -> None:
    cache = torch.randn(4, 16, 96)
    block_table, cu, seq_starts = _batch([20, 9], 4, 16, [4, 0])
    want = references.paged_gather(cache, torch.zeros(29, 96), block_table, cu, seq_starts)
    dst = torch.zeros(29, 96)
    torch.ops.sycl_kernels.gather_cache(cache, dst, block_table, cu, seq_starts)
    assert torch.equal(dst, want)
    dst.zero_()
    torch.compile(sycl_kernels.gather_cache, fullgraph=True, backend="eager")(
        cache, dst, block_table, cu, seq_starts
    )
    assert torch.equal(dst, want)


def _bad(**changes: object) -> dict[str, object]:
    args = _gather_args()
    args.update(changes)
    return args


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"block_table": torch.tensor([[0, 8], [1, 2]], dtype=torch.int32)}, IndexError, "8"),
        ({"block_table": torch.tensor([[0, -1], [1, 2]], dtype=torch.int32)}, IndexError, "-1"),
        ({"cu_seq_lens": torch.tensor([0, 20, 33], dtype=torch.int32)}, IndexError, "33"),
        ({"cu_seq_lens": torch.tensor([0, 20, 18], dtype=torch.int32)}, ValueError, "decreases"),
        ({"seq_starts": torch.tensor([0, 21], dtype=torch.int32)}, IndexError, "column 2"),
        ({"seq_starts": torch.tensor([-1, 0], dtype=torch.int32)}, IndexError, "seq_starts"),
    ],
    ids=["block_id_past", "block_id_negative", "cu_past_dst", "cu_decreasing", "start_past", "neg"],
)
def test_out_of_range_raises_and_writes_nothing(changes, error, match) -> None:
    args = _bad(**changes)
    with pytest.raises(error, match=match):
        sycl_kernels.gather_cache(**args)
    assert not args["dst"].any()


@pytest.mark.parametrize(
    ("changes", "skipped"),
    [
        ({"block_table": torch.tensor([[0, 7], [1, 2]], dtype=torch.int32)}, slice(16, 20)),
        ({"block_table": torch.tensor([[0, 2], [-1, 2]], dtype=torch.int32)}, slice(20, 32)),
        ({"seq_starts": torch.tensor([0, 40], dtype=torch.int32)}, slice(20, 32)),
        ({"seq_starts": torch.tensor([-20, 4], dtype=torch.int32)}, slice(0, 20)),
        ({"cu_seq_lens": torch.tensor([0, 20, 40], dtype=torch.int32)}, slice(0, 0)),
        ({"cu_seq_lens": torch.tensor([0, 20, 10], dtype=torch.int32)}, slice(20, 32)),
    ],
    ids=["block_past", "block_negative", "column_past", "start_negative", "cu_past", "cu_down"],
)
def test_kernel_skips_out_of_range_rows_without_the_host_check(changes, skipped) -> None:
    """The kernel alone (the launch an XPU gets, without the CPU prepare): rows whose
    block, column or position is out of range are left unwritten, the others gathered."""
    valid = _gather_args()
    want = references.paged_gather(*valid.values())
    want[skipped] = 0
    op = sycl_kernels.gather_cache
    a = op.schema.bind((), valid | changes)
    op.bound_launch(a).launch(*a)  # the kernel, no prepare
    assert torch.equal(a.dst, want)


def test_unread_block_table_entries_are_not_checked() -> None:
    """Columns before a sequence's first block and past its last may hold anything."""
    args = _bad(
        block_table=torch.tensor([[0, 1, 99], [-5, 2, 3]], dtype=torch.int32),
        seq_starts=torch.tensor([0, 16], dtype=torch.int32),
    )
    args["cu_seq_lens"] = torch.tensor([0, 20, 30], dtype=torch.int32)
    sycl_kernels.gather_cache(**args)
    want = references.paged_gather(
        args["src_cache"],
        torch.zeros_like(args["dst"]),
        args["block_table"],
        args["cu_seq_lens"],
        args["seq_starts"],
    )
    assert torch.equal(args["dst"], want)


def test_wide_block_table_checks_only_read_entries() -> None:
    """A table past 4096 entries (the check's torch path): unread entries hold garbage."""
    args = _gather_args()
    table = torch.full((2, 3000), 10**6, dtype=torch.int32)
    table[0, :2], table[1, 1:3] = torch.tensor([0, 2]), torch.tensor([1, 2])
    args["block_table"], args["seq_starts"] = table, torch.tensor([0, 20], dtype=torch.int32)
    sycl_kernels.gather_cache(**args)
    want = references.paged_gather(
        args["src_cache"], torch.zeros(32, 64), table, args["cu_seq_lens"], args["seq_starts"]
    )
    assert torch.equal(args["dst"], want)
    table[1, 1] = -3
    with pytest.raises(IndexError, match="block_table holds -3"):
        sycl_kernels.gather_cache(**args)


def test_empty_batches_and_sequences() -> None:
    cache = torch.randn(2, 16, 32)
    dst = torch.zeros(4, 32)
    empty_table = torch.empty(0, 3, dtype=torch.int32)
    sycl_kernels.gather_cache(cache, dst, empty_table, torch.zeros(1, dtype=torch.int32))
    table = torch.zeros(2, 1, dtype=torch.int32)
    sycl_kernels.gather_cache(cache, dst, table, torch.zeros(3, dtype=torch.int32))
    sycl_kernels.gather_cache(cache, dst[:0], table, torch.zeros(3, dtype=torch.int32))
    assert not dst.any()


@pytest.mark.parametrize(
    ("changes", "error", "match"),
    [
        ({"dst": torch.zeros(32, 64, dtype=torch.float16)}, TypeError, "dst"),
        ({"scale": torch.ones(1)}, ValueError, "scale"),
    ],
    ids=["dtype", "scale_on_copy"],
)
def test_dtype_pairs_and_scales(changes, error, match) -> None:
    with pytest.raises(error, match=match):
        sycl_kernels.gather_cache(**_bad(**changes))


def test_fp8_cache_pairs() -> None:
    args = _bad(src_cache=torch.zeros(3, 16, 64, dtype=FP8))
    with pytest.raises(ValueError, match="pass scale="):
        sycl_kernels.gather_cache(**args)
    args["src_cache"] = torch.zeros(3, 16, 64, dtype=torch.float8_e5m2)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        sycl_kernels.gather_cache(**args, scale=torch.ones(1))
    args["dst"] = torch.zeros(32, 64, dtype=torch.float8_e5m2)
    sycl_kernels.gather_cache(**args)  # a copy of e5m2 bytes


# Suite-wide registrations (tests/ops/cases.py).


def _gather_args() -> dict[str, object]:
    return {
        "src_cache": torch.randn(3, 16, 64),
        "dst": torch.zeros(32, 64),
        "block_table": torch.tensor([[0, 2], [1, 2]], dtype=torch.int32),
        "cu_seq_lens": torch.tensor([0, 20, 32], dtype=torch.int32),
        "seq_starts": torch.tensor([0, 4], dtype=torch.int32),
    }


def _opcheck_samples() -> list[tuple[str, tuple]]:
    """Copies only: opcheck's schema check multiplies the inputs, which torch does not
    do for float8 tensors (the dequantize is tested above)."""
    args = _gather_args()
    no_starts = (*list(args.values())[:4], None, None)
    return [("gather_cache", (*args.values(), None)), ("gather_cache", no_starts)]


def _once_gather(op, dtype: torch.dtype) -> None:
    cache = torch.randn(5, 16, 200).to(dtype)
    block_table, cu, seq_starts = _batch([30, 0, 41], 5, 16, [2, 0, 16])
    dst = torch.zeros(71, 200, dtype=dtype)
    want = references.paged_gather(cache, dst, block_table, cu, seq_starts)
    op(cache, dst, block_table, cu, seq_starts)
    _assert_bits(dst, want)


_INDEX = f"{cases.COMMON} float32 extra_dim zero_dim index_too_large index_negative"

cases.register(
    cases.OpCase(
        "gather_cache",
        _gather_args,
        {
            "src_cache": f"{cases.FLOAT} zero_dim extra_dim missing_dim last_dim_plus_one "
            "last_stride_2",
            "dst": f"{cases.FLOAT} float16 zero_dim extra_dim missing_dim last_dim_plus_one "
            "last_stride_2 overlapping_rows",
            "block_table": f"{_INDEX} last_stride_2",
            "cu_seq_lens": f"{_INDEX} last_dim_plus_one last_stride_2",
            "seq_starts": f"{_INDEX} last_dim_plus_one last_stride_2",
        },
    ),
    opcheck=_opcheck_samples,
    once={"gather_cache": cases.OnceCase(_once_gather)},
)
