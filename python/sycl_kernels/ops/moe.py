"""sycl_kernels.ops.moe: a MoE layer's token alignment and expert-output sum
(kernels/moe/align.hpp, kernels/moe/sum.hpp).

``moe_align_block_size`` routes the [tokens, topk] token slots into blocks of
``block_size`` rows that each belong to one expert (the grouped GEMM's tiling):
``sorted_token_ids`` holds the flat slot indices (token * topk + k) grouped by expert
in increasing expert order, each expert's run padded to a multiple of block_size with
``topk_ids.numel()``; within an expert the slots keep the order of their flat index
(stable, deterministic). ``expert_ids[b]`` is block b's expert (-1 past the last
block); ``num_tokens_post_padded[0]`` the padded total. With an ``expert_map``
(expert parallelism, vLLM's): a slot's expert is ``expert_map[topk_ids[i]]``, a
local id, and slots mapped to -1 (not on this rank) are left out.

``moe_sum`` sums x [tokens, topk, hidden] over topk in float32 (k = 0, 1, ...),
times ``scale``, rounded once to x's dtype; with ``topk_ids`` the slots with a
negative id or, with ``expert_map``, an id mapped to a negative value are left out
(vLLM's moe_sum).

Ids are checked on CPU tensors (IndexError naming the argument): moe_align_block_size's
by its kernels, which flag a bad id in the pass that reads it (the op raises after the
launch, and the outputs are then unspecified); moe_sum's in the launch's ``prepare``,
before it. On an XPU they are not checked (that would wait for the device): the
kernels leave out-of-range ids out and never write out of bounds.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch

from ..specs.moe import (
    ALIGN_CHUNK_GROUP,
    MAX_EXPERTS,
    moe_align_count_spec,
    moe_align_scan_spec,
    moe_align_scatter_spec,
    moe_sum_spec,
)
from ._checks import (
    INT32_MAX,
    check_float_dtype,
    check_index_range,
    check_int,
    check_number,
    check_own_memory,
    check_same,
    check_same_device,
    check_shape,
    check_tensor,
    check_unit_last_stride,
)
from ._launch import KernelBinding, Launch, ScratchBinding, TorchLaunch, bind_kernel, skip
from ._op import op
from ._schema import Args

_INDEX = {torch.int32: "i32", torch.int64: "i64"}
# moe_align_block_size's slots a chunk at least, and chunks at most (_bind_align).
_ALIGN_CHUNK = 128
_ALIGN_CHUNKS = 256


def _check_index(op_name: str, name: str, t: object, dims: int, dtypes: tuple) -> torch.Tensor:
    check_tensor(op_name, name, t)
    assert isinstance(t, torch.Tensor)
    if t.dtype not in dtypes:
        names = " or ".join(str(d) for d in dtypes)
        raise TypeError(f"{op_name}(): {name} has dtype {t.dtype}; expected {names}")
    if t.dim() != dims:
        raise ValueError(f"{op_name}(): {name} has {t.dim()} dimensions; expected {dims}")
    if not t.is_contiguous():
        raise ValueError(f"{op_name}(): {name} is not contiguous; expected a contiguous tensor")
    return t


# moe_align_block_size


class AlignPlan(NamedTuple):
    index: str
    sorted_size: int
    expert_ids_size: int


def _align_sizes(numel: int, num_experts: int, block_size: int) -> tuple[int, int]:
    """The outputs' sizes as the engines allocate them: every expert's run padded."""
    padded = numel + num_experts * (block_size - 1)
    return padded, -(-padded // block_size)


def _new_align(a: Args) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    padded, blocks = _align_sizes(a.topk_ids.numel(), a.num_experts, a.block_size)
    new = functools.partial(torch.empty, dtype=torch.int32, device=a.topk_ids.device)
    return new((padded,)), new((blocks,)), new((1,))


def _align_flags(sorted_size: int, flags: int, a: Args) -> None:
    """The kernels flagged an id out of range or a padded total past sorted_token_ids
    (kernels/moe/align.hpp) on CPU tensors: raises, naming the argument and the value."""
    name = a.op_name
    topk_ids, expert_map, num_experts, block_size = (
        a.topk_ids,
        a.expert_map,
        a.num_experts,
        a.block_size,
    )
    check_index_range(name, "topk_ids", topk_ids.reshape(-1), num_experts, "num_experts")
    ids = topk_ids.reshape(-1).long()
    if expert_map is not None:
        used = expert_map[ids]
        what = "-1 or a local expert id"
        check_index_range(name, "expert_map", used, num_experts, what, low=-1)
        ids = used[used >= 0].long()
    counts = torch.bincount(ids, minlength=num_experts)
    total = int(((counts + block_size - 1) // block_size).sum()) * block_size
    raise ValueError(
        f"{name}(): sorted_token_ids has {sorted_size} entries but the padded total is "
        f"{total}; expected at least that many"
    )


def _empty_align(a: Args) -> None:
    """No slots: nothing to route, and no kernel (torch fills the outputs)."""
    a.sorted_token_ids.fill_(0)
    a.expert_ids.fill_(-1)
    a.num_tokens_post_padded.fill_(0)


def _bind_align(plan: AlignPlan, a: Args) -> ScratchBinding | Launch:
    topk_ids, num_experts, block_size = a.topk_ids, a.num_experts, a.block_size
    numel = topk_ids.numel()
    if numel == 0:
        return TorchLaunch(_empty_align)
    # Chunks of at least _ALIGN_CHUNK slots, at most _ALIGN_CHUNKS of them: the scan
    # reads chunks x num_experts counts in one work-group.
    chunks = min(-(-numel // _ALIGN_CHUNK), _ALIGN_CHUNKS)
    chunk_size = -(-numel // chunks)
    chunks = -(-numel // chunk_size)
    groups = -(-chunks // ALIGN_CHUNK_GROUP)
    slots = {
        "numel": numel,
        "num_experts": num_experts,
        "chunk_size": chunk_size,
        "chunks": chunks,
    }
    return ScratchBinding(
        (
            bind_kernel(moe_align_count_spec(plan.index), topk_ids, groups, **slots),
            bind_kernel(
                moe_align_scan_spec(),
                topk_ids,
                1,
                numel=numel,
                num_experts=num_experts,
                block_size=block_size,
                chunks=chunks,
                sorted_size=plan.sorted_size,
                expert_ids_size=plan.expert_ids_size,
            ),
            bind_kernel(
                moe_align_scatter_spec(plan.index),
                topk_ids,
                groups,
                sorted_size=plan.sorted_size,
                **slots,
            ),
        ),
        1 + chunks * (num_experts + 1),
        functools.partial(_align_flags, plan.sorted_size),
    )


@op(
    bind=_bind_align,
    new_output=_new_align,
    outputs=("sorted_token_ids", "expert_ids", "num_tokens_post_padded"),
)
def moe_align_block_size(
    topk_ids: torch.Tensor,
    num_experts: int,
    block_size: int,
    expert_map: torch.Tensor | None = None,
    *,
    sorted_token_ids: torch.Tensor | None = None,
    expert_ids: torch.Tensor | None = None,
    num_tokens_post_padded: torch.Tensor | None = None,
) -> AlignPlan:
    """Routes MoE token slots into blocks of one expert each: returns
    (sorted_token_ids, expert_ids, num_tokens_post_padded), int32.

    topk_ids: [tokens, topk] int32/int64, contiguous, each in [0, num_experts).
    num_experts: 1 .. 1024. block_size: 1 .. 2**31 - 1; without the outputs given,
    numel + num_experts * (block_size - 1) at most 2**31 - 1 too. expert_map: optional int32
    [num_experts], contiguous, each -1 (the expert is not on this rank: its slots are
    left out) or the local id in [0, num_experts) the slot is counted under (an entry
    some slot reads that is neither raises IndexError on CPU tensors).

    sorted_token_ids [numel + num_experts * (block_size - 1)]: the flat slot indices
    grouped by expert (0, 1, ...), within an expert in increasing order, each
    expert's run padded to a multiple of block_size with numel; every entry past the
    padded total is numel too. expert_ids [ceil(that / block_size)]: each block's
    expert, -1 past the padded total. num_tokens_post_padded [1]: the padded total.
    The three may be given (all or none): int32, contiguous, sorted_token_ids 1-D of
    any size that holds the padded total (checked on CPU tensors), expert_ids at least
    ceil(its size / block_size) entries, num_tokens_post_padded at least one. Ids out
    of range raise IndexError on CPU tensors; on an XPU they are left out (unchecked).
    """
    name = "moe_align_block_size"
    _check_index(name, "topk_ids", topk_ids, 2, (torch.int32, torch.int64))
    check_int(name, "num_experts", num_experts, minimum=1)
    if num_experts > MAX_EXPERTS:
        raise ValueError(f"{name}(): num_experts must be at most {MAX_EXPERTS}, got {num_experts}")
    check_int(name, "block_size", block_size, minimum=1, maximum=INT32_MAX)
    # The entries (slot indices, the padding numel, the total) are int32.
    if topk_ids.numel() > INT32_MAX:
        raise ValueError(
            f"{name}(): topk_ids has {topk_ids.numel()} slots; expected at most {INT32_MAX} "
            "(sorted_token_ids holds them as int32)"
        )
    if expert_map is not None:
        _check_index(name, "expert_map", expert_map, 1, (torch.int32,))
        check_same_device(name, "expert_map", expert_map, "topk_ids", topk_ids)
        check_shape(name, "expert_map", expert_map.shape, (num_experts,), "[num_experts]")
    sorted_size, blocks = _align_sizes(topk_ids.numel(), num_experts, block_size)
    if sorted_token_ids is None and sorted_size > INT32_MAX:
        raise ValueError(
            f"{name}(): block_size {block_size} with {num_experts} experts makes "
            f"sorted_token_ids {sorted_size} entries; expected at most {INT32_MAX} "
            "(numel + num_experts * (block_size - 1), int32 entries)"
        )
    if sorted_token_ids is not None:
        outputs = (
            ("sorted_token_ids", sorted_token_ids),
            ("expert_ids", expert_ids),
            ("num_tokens_post_padded", num_tokens_post_padded),
        )
        for out_name, t in outputs:
            _check_index(name, out_name, t, 1, (torch.int32,))
            check_same_device(name, out_name, t, "topk_ids", topk_ids)
        assert expert_ids is not None and num_tokens_post_padded is not None
        sorted_size = sorted_token_ids.shape[0]
        if sorted_size > INT32_MAX:
            raise ValueError(
                f"{name}(): sorted_token_ids has {sorted_size} entries; expected at most "
                f"{INT32_MAX} (the padded total is an int32)"
            )
        blocks = expert_ids.shape[0]
        needed = -(-sorted_size // block_size)
        if blocks < needed:
            raise ValueError(
                f"{name}(): expert_ids has {blocks} entries; expected at least {needed} "
                "(ceil(sorted_token_ids.numel() / block_size))"
            )
        if num_tokens_post_padded.shape[0] < 1:
            raise ValueError(f"{name}(): num_tokens_post_padded is empty; expected [1]")
    return AlignPlan(_INDEX[topk_ids.dtype], sorted_size, blocks)


# moe_sum


class SumPlan(NamedTuple):
    dtype: str
    index: str
    tokens: int
    topk: int
    hidden: int
    x_strides: tuple[int, ...]
    out_token: int | None


def _new_sum(a: Args) -> torch.Tensor:
    x = a.x
    return torch.empty((x.shape[0], x.shape[2]), dtype=x.dtype, device=x.device)


def _check_sum_ids(a: Args) -> tuple:
    """topk_ids index expert_map: on CPU tensors, each below its size (a prepare)."""
    check_index_range(
        a.op_name,
        "topk_ids",
        a.topk_ids.reshape(-1),
        a.expert_map.shape[0],
        "expert_map.shape[0]; negative ids are inactive slots",
        low=None,
    )
    return a


def _bind_sum(plan: SumPlan, a: Args) -> KernelBinding | Launch:
    if plan.tokens == 0 or plan.hidden == 0:
        return skip
    expert_map = a.expert_map
    map_size = 0 if expert_map is None else expert_map.shape[0]
    prepare = None
    if expert_map is not None and a.x.is_cpu:
        prepare = _check_sum_ids
    return bind_kernel(
        moe_sum_spec(plan.dtype, plan.index),
        a.x,
        plan.tokens,
        prepare=prepare,
        x_token=plan.x_strides[0],
        x_k=plan.x_strides[1],
        out_token=plan.hidden if plan.out_token is None else plan.out_token,
        map_size=map_size,
        topk=plan.topk,
        hidden=plan.hidden,
        scale=float(a.scale),
    )


@op(bind=_bind_sum, new_output=_new_sum)
def moe_sum(
    x: torch.Tensor,
    topk_ids: torch.Tensor | None = None,
    expert_map: torch.Tensor | None = None,
    scale: float = 1.0,
    out: torch.Tensor | None = None,
) -> SumPlan:
    """The sum of a MoE layer's expert outputs per token: x [tokens, topk, hidden]
    float32/float16/bfloat16 -> [tokens, hidden] of its dtype, out[t] = scale * sum over
    k of x[t, k], accumulated in float32 in the order of k and rounded once.

    x: unit last stride, any token and topk strides. topk_ids: optional [tokens,
    topk] int32/int64, contiguous: a slot with a negative id is left out. expert_map:
    optional int32 [E], contiguous, only with topk_ids: a slot whose id maps to a
    negative value is left out; ids must be below E (IndexError on CPU tensors; on an
    XPU such a slot is left out). scale: sgl's routed_scaling_factor (1.0: the plain
    sum). out: optional [tokens, hidden] of x's dtype, unit last stride.
    """
    name = "moe_sum"
    check_tensor(name, "x", x)
    dtype = check_float_dtype(name, "x", x)
    if x.dim() != 3:
        raise ValueError(f"{name}(): x has shape {tuple(x.shape)}; expected [tokens, topk, hidden]")
    tokens, topk, hidden = x.shape
    x_strides = x.stride()
    check_unit_last_stride(name, "x", x.shape, x_strides)
    index = "i32"
    if topk_ids is not None:
        _check_index(name, "topk_ids", topk_ids, 2, (torch.int32, torch.int64))
        check_same_device(name, "topk_ids", topk_ids, "x", x)
        check_shape(name, "topk_ids", topk_ids.shape, (tokens, topk), "[tokens, topk] of x")
        index = _INDEX[topk_ids.dtype]
    if expert_map is not None:
        if topk_ids is None:
            raise ValueError(f"{name}(): expert_map is given without topk_ids; expected both")
        _check_index(name, "expert_map", expert_map, 1, (torch.int32,))
        check_same_device(name, "expert_map", expert_map, "x", x)
    check_number(name, "scale", scale)
    out_token = None
    if out is not None:
        check_tensor(name, "out", out)
        check_same(name, "out", out, "x", x)
        check_shape(name, "out", out.shape, (tokens, hidden), "[tokens, hidden] of x")
        out_strides = out.stride()
        check_unit_last_stride(name, "out", out.shape, out_strides)
        check_own_memory(name, "out", out)
        out_token = out_strides[0]
    return SumPlan(dtype.short_name, index, tokens, topk, hidden, x_strides, out_token)
