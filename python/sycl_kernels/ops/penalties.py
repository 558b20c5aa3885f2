"""sycl_kernels.ops.penalties: repetition, frequency and presence penalties on logits, and the
top-k mask (kernels/sampling/penalty.hpp, kernels/sampling/top_k_mask.hpp).

The penalties, per element of logits [batch, vocab], in float32 and in this order
(vLLM's ``apply_penalties``: its ``apply_repetition_penalties_`` then the OpenAI
frequency and presence terms):

    seen  = prompt_mask or count > 0        count: output_counts, or output_mask as 0/1
    x     = x / rep if x > 0 else x * rep   where seen (else unchanged)
    x     = x - freq * count
    x     = x - pres * (count > 0)

rounded once to logits' dtype. With float32 logits that is bit for bit vLLM's torch
sequence (each step its own float32 operation, none fused); in float16/bfloat16,
where the torch sequence rounds after each step, the result is within an ulp of it
(the repetition step alone, one operation, is exact either way). Hugging Face's
``x * rep if x < 0 else x / rep`` is the same function (signed zeros and NaN too).

Each penalty is per row: a float scalar (``repetition_penalty``; finite, within
float32's range) or a [batch] tensor (``repetition_penalties``, float32 or logits'
dtype, any stride), not both.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .. import _runtime
from .._dtypes import DType
from ..specs.penalties import (
    IDS_PER_GROUP,
    PENALTY_TILE,
    apply_penalties_spec,
    repetition_penalty_by_ids_spec,
    top_k_mask_logits_spec,
)
from ._checks import (
    BY_TORCH,
    check_float_dtype,
    check_int,
    check_number,
    check_own_memory,
    check_same_device,
    check_shape,
    check_unit_last_stride,
    tensor_meta,
)
from ._launch import Address, KernelBinding, Launch, bind_kernel, skip
from ._op import op
from ._schema import Args

_INDEX_NAMES = {torch.int32: "i32", torch.int64: "i64"}
_PENALTIES = ("repetition", "frequency", "presence")
# The largest penalty scalar: the kernels take float32 ones.
_FLOAT32_MAX = torch.finfo(torch.float32).max


def _check_logits(name: str, logits: object) -> tuple[DType, int, int, int]:
    """(dtype, batch, vocab, row stride) of logits [batch, vocab], unit last stride."""
    shape, strides = tensor_meta(name, "logits", logits)
    dtype = check_float_dtype(name, "logits", logits)
    if len(shape) != 2:
        raise ValueError(f"{name}(): logits has shape {tuple(shape)}; expected [batch, vocab]")
    check_unit_last_stride(name, "logits", shape, strides)
    return dtype, shape[0], shape[1], strides[0]


def _check_read(
    name: str,
    arg: str,
    t: object,
    logits: torch.Tensor,
    dtypes: tuple[torch.dtype, ...],
    expected: tuple[int, ...],
    why: str,
) -> tuple[int, ...]:
    """A tensor read beside logits, of one of `dtypes` and shape `expected`: its strides."""
    shape, strides = tensor_meta(name, arg, t)
    dtype = t.dtype  # type: ignore[union-attr]
    if dtype not in dtypes:
        expected_dtypes = " or ".join(str(d) for d in dict.fromkeys(dtypes))
        raise TypeError(f"{name}(): {arg} has dtype {dtype}; expected {expected_dtypes}")
    check_same_device(name, arg, t, "logits", logits)  # type: ignore[arg-type]
    check_shape(name, arg, shape, expected, why)
    return strides


def _check_rows_like(
    name: str, arg: str, t: object, logits: torch.Tensor, dtypes: tuple[torch.dtype, ...]
) -> int:
    """A [batch, vocab] tensor read beside logits (a mask, counts): its row stride (any,
    0 broadcasts one row), unit last stride."""
    strides = _check_read(name, arg, t, logits, dtypes, logits.shape, "logits.shape")
    check_unit_last_stride(name, arg, logits.shape, strides)
    return strides[0]


def _check_per_row(
    name: str, arg: str, t: object, logits: torch.Tensor, dtypes: tuple[torch.dtype, ...]
) -> int:
    """A [batch] tensor of one value a row: its stride (any, 0 broadcasts one value)."""
    why = "one value a row of logits"
    return _check_read(name, arg, t, logits, dtypes, logits.shape[:1], why)[0]


class _PenaltyPlan(NamedTuple):
    dtype: DType
    penalty_dtype: DType
    output: str | None
    rows: int
    tiles: int
    logits_stride: int
    prompt_stride: int
    output_stride: int
    strides: tuple[int, int, int]
    """The repetition, frequency and presence tensors' strides (0 for a scalar)."""


def _check_penalty(
    name: str,
    kind: str,
    scalar: object,
    neutral: float,
    tensor: torch.Tensor | None,
    logits: torch.Tensor,
    positive: bool,
) -> tuple[bool, int, torch.dtype | None]:
    """(whether it changes anything, the tensor's stride, the tensor's dtype)."""
    check_number(name, f"{kind}_penalty", scalar, positive=positive)
    # Past float32's range it would be infinite there: inf * 0 makes every unseen token NaN.
    if not abs(scalar) <= _FLOAT32_MAX:
        raise ValueError(
            f"{name}(): {kind}_penalty is {scalar!r}; expected a finite value within "
            "float32's range"
        )
    if tensor is None:
        return scalar != neutral, 0, None
    if scalar != neutral:
        raise ValueError(
            f"{name}(): {kind}_penalty is {scalar!r} and {kind}_penalties is given; expected "
            f"one of them ({kind}_penalty={neutral} with the tensor)"
        )
    stride = _check_per_row(
        name, f"{kind}_penalties", tensor, logits, (torch.float32, logits.dtype)
    )
    return True, stride, tensor.dtype


def _bind_penalties(plan: _PenaltyPlan | None, a: Args) -> KernelBinding | Launch:
    if plan is None:
        return skip
    logits = a.logits
    output = Address("output_counts" if plan.output != "u8" else "output_mask")
    return bind_kernel(
        apply_penalties_spec(
            plan.dtype,
            plan.penalty_dtype,
            plan.prompt_stride >= 0,
            plan.output,
            _runtime.tuning_of(logits),
        ),
        logits,
        plan.rows * plan.tiles,
        logits_stride=plan.logits_stride,
        vocab=logits.shape[1],
        tiles=plan.tiles,
        prompt_mask_stride=max(plan.prompt_stride, 0),
        output=output,
        output_stride=plan.output_stride,
        repetition_penalty=float(a.repetition_penalty),
        frequency_penalty=float(a.frequency_penalty),
        presence_penalty=float(a.presence_penalty),
        **{f"{kind}_stride": s for kind, s in zip(_PENALTIES, plan.strides, strict=True)},
    )


@op(bind=_bind_penalties, mutates=("logits",))
def apply_penalties(
    logits: torch.Tensor,
    prompt_mask: torch.Tensor | None = None,
    output_counts: torch.Tensor | None = None,
    output_mask: torch.Tensor | None = None,
    *,
    repetition_penalty: float = 1.0,
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    repetition_penalties: torch.Tensor | None = None,
    frequency_penalties: torch.Tensor | None = None,
    presence_penalties: torch.Tensor | None = None,
) -> _PenaltyPlan | None:
    """Repetition, frequency and presence penalties, in place on logits (module doc).

    logits: float32/float16/bfloat16 [batch, vocab], any row stride, unit last stride.
    prompt_mask: bool [batch, vocab], the tokens of each row's prompt (repetition
    only). output_counts: int32/int64 [batch, vocab], how often each token was
    generated; or output_mask: bool, whether it was (a count of 0 or 1); not both.
    Those three: any row stride (0: one row for all), unit last stride.

    repetition_penalty (> 0, 1.0 off): seen tokens' logits divided by it where
    positive, multiplied by it otherwise; needs a mask or counts.
    frequency_penalty (0.0 off): minus penalty * count; presence_penalty (0.0 off):
    minus penalty where count > 0; both need output_counts or output_mask.
    Each per row instead with the plural name: a [batch] tensor, float32 or logits'
    dtype (all given ones of one dtype), any stride; the scalar must then be left at
    its default. The tensors' values are not checked (a zero repetition penalty
    divides by zero). No penalty in effect: nothing is launched. Not differentiable.
    """
    name = "apply_penalties"
    dtype, batch, vocab, logits_stride = _check_logits(name, logits)
    check_own_memory(name, "logits", logits)
    prompt_stride = -1
    if prompt_mask is not None:
        prompt_stride = _check_rows_like(name, "prompt_mask", prompt_mask, logits, (torch.bool,))
    output, output_stride = None, 0
    if output_counts is not None and output_mask is not None:
        raise ValueError(f"{name}(): output_counts and output_mask are both given; expected one")
    if output_counts is not None:
        output_stride = _check_rows_like(
            name, "output_counts", output_counts, logits, (torch.int32, torch.int64)
        )
        output = _INDEX_NAMES[output_counts.dtype]
    elif output_mask is not None:
        output_stride = _check_rows_like(name, "output_mask", output_mask, logits, (torch.bool,))
        output = "u8"
    penalties = (
        ("repetition", repetition_penalty, 1.0, repetition_penalties, True),
        ("frequency", frequency_penalty, 0.0, frequency_penalties, False),
        ("presence", presence_penalty, 0.0, presence_penalties, False),
    )
    active, strides, dtypes = [], [], {}
    for kind, scalar, neutral, tensor, positive in penalties:
        changes, stride, tensor_dtype = _check_penalty(
            name, kind, scalar, neutral, tensor, logits, positive
        )
        active.append(changes)
        strides.append(stride)
        if tensor_dtype is not None:
            dtypes[f"{kind}_penalties"] = tensor_dtype
    if len(set(dtypes.values())) > 1:
        given = ", ".join(f"{arg} {d}" for arg, d in dtypes.items())
        raise TypeError(f"{name}(): the penalty tensors have dtypes {given}; expected one dtype")
    if active[0] and prompt_stride < 0 and output is None:
        raise ValueError(
            f"{name}(): a repetition penalty is given but no prompt_mask, output_counts or "
            "output_mask says which tokens were seen"
        )
    for kind, changes in zip(_PENALTIES[1:], active[1:], strict=True):
        if changes and output is None:
            raise ValueError(
                f"{name}(): a {kind} penalty is given but no output_counts or output_mask"
            )
    if not any(active) or batch == 0 or vocab == 0:
        return None
    return _PenaltyPlan(
        dtype,
        BY_TORCH[next(iter(dtypes.values()), torch.float32)],
        output,
        batch,
        -(-vocab // PENALTY_TILE),
        logits_stride,
        prompt_stride,
        output_stride,
        tuple(strides),  # type: ignore[arg-type]
    )


# --- Hugging Face's form: the listed token ids, a new tensor ---


class _IdsPlan(NamedTuple):
    dtype: DType
    penalty_dtype: DType
    ids: str
    rows: int
    num_ids: int
    logits_stride: int
    ids_stride: int
    penalty_stride: int


def _copy_of_logits(a: Args) -> torch.Tensor:
    return a.logits.clone(memory_format=torch.contiguous_format)


def _bind_by_ids(plan: _IdsPlan | None, a: Args) -> KernelBinding | Launch:
    if plan is None:
        return skip
    logits = a.logits
    tiles = -(-plan.num_ids // IDS_PER_GROUP)
    vocab = logits.shape[1]
    return bind_kernel(
        repetition_penalty_by_ids_spec(
            plan.dtype, plan.penalty_dtype, plan.ids, _runtime.tuning_of(logits)
        ),
        logits,
        plan.rows * tiles,
        logits_stride=plan.logits_stride,
        ids_stride=plan.ids_stride,
        num_ids=plan.num_ids,
        id_tiles=tiles,
        vocab=vocab,
        repetition_stride=plan.penalty_stride,
        repetition_penalty=float(a.repetition_penalty),
        out_stride=vocab,
    )


@op(bind=_bind_by_ids, new_output=_copy_of_logits)
def repetition_penalty_by_ids(
    logits: torch.Tensor,
    input_ids: torch.Tensor,
    *,
    repetition_penalty: float = 1.0,
    repetition_penalties: torch.Tensor | None = None,
) -> _IdsPlan | None:
    """Hugging Face's RepetitionPenaltyLogitsProcessor: a copy of logits (new,
    contiguous) where the logit of each token listed in its row of input_ids is
    multiplied by the penalty if negative, divided by it otherwise (module doc); a
    token listed several times is penalized once. logits is not changed.

    logits: float32/float16/bfloat16 [batch, vocab], unit last stride. input_ids:
    int32/int64 [batch, seq], unit last stride; ids outside [0, vocab) are skipped
    (Hugging Face drops ids >= vocab; padding). repetition_penalty (> 0) or
    repetition_penalties, a [batch] tensor (float32 or logits' dtype, any stride), not
    both. Computed in float32, rounded once. Not differentiable.
    """
    name = "repetition_penalty_by_ids"
    dtype, batch, vocab, logits_stride = _check_logits(name, logits)
    shape, strides = tensor_meta(name, "input_ids", input_ids)
    if input_ids.dtype not in _INDEX_NAMES:
        raise TypeError(
            f"{name}(): input_ids has dtype {input_ids.dtype}; expected torch.int32 or torch.int64"
        )
    check_same_device(name, "input_ids", input_ids, "logits", logits)
    if len(shape) != 2 or shape[0] != batch:
        raise ValueError(
            f"{name}(): input_ids has shape {tuple(shape)}; expected [{batch}, seq] (a row "
            "of ids a row of logits)"
        )
    check_unit_last_stride(name, "input_ids", shape, strides)
    changes, penalty_stride, penalty_dtype = _check_penalty(
        name, "repetition", repetition_penalty, 1.0, repetition_penalties, logits, True
    )
    if not changes or batch == 0 or vocab == 0 or shape[1] == 0:
        return None
    return _IdsPlan(
        dtype,
        BY_TORCH[penalty_dtype or torch.float32],
        _INDEX_NAMES[input_ids.dtype],
        batch,
        shape[1],
        logits_stride,
        strides[0],
        penalty_stride,
    )


# --- The top-k mask ---


class _TopKPlan(NamedTuple):
    dtype: DType
    top_ks: str
    rows: int
    logits_stride: int
    top_ks_stride: int
    out_stride: int


def _like_logits(a: Args) -> torch.Tensor:
    return torch.empty_like(a.logits, memory_format=torch.contiguous_format)


def _bind_top_k(plan: _TopKPlan | None, a: Args) -> KernelBinding | Launch:
    if plan is None:
        return skip
    logits, top_k = a.logits, a.top_k
    return bind_kernel(
        top_k_mask_logits_spec(plan.dtype, plan.top_ks, _runtime.tuning_of(logits)),
        logits,
        plan.rows,
        logits_stride=plan.logits_stride,
        vocab=logits.shape[1],
        top_ks_stride=plan.top_ks_stride,
        # Any k >= vocab keeps the row: clamped, a Python int past int64 is one too.
        top_k=0 if top_k is None else min(top_k, logits.shape[1]),
        out_stride=plan.out_stride,
    )


@op(bind=_bind_top_k, new_output=_like_logits)
def top_k_mask_logits(
    logits: torch.Tensor,
    top_k: int | None = None,
    *,
    top_ks: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> _TopKPlan | None:
    """flashinfer's top_k_mask_logits: logits with every element below its row's k-th
    largest set to -inf (the rest copied); returns out, or a new contiguous tensor.

    Ties: every element equal to the k-th largest is kept, so a row may keep more
    than k (Hugging Face's TopKLogitsWarper). Order: -0.0 equals +0.0; NaN ranks above
    +inf (torch.topk) and is never masked, and a row whose k-th largest is NaN is
    kept whole (Hugging Face's `scores < kth` is then false everywhere): k or more NaNs.

    logits: float32/float16/bfloat16 [batch, vocab], unit last stride. top_k: an
    int >= 1 for every row (at least vocab, however large, keeps all), or top_ks:
    int32/int64 [batch], any stride, one k a row, where a k below 1 or at least
    vocab keeps the row whole (vLLM's "no top-k"); exactly one of them. out: logits'
    dtype and shape, unit last stride; it may be logits itself (in place), any other
    overlap with logits is not allowed. Not differentiable.
    """
    name = "top_k_mask_logits"
    dtype, batch, vocab, logits_stride = _check_logits(name, logits)
    if vocab >= 2**31:
        raise ValueError(f"{name}(): logits has {vocab} columns; expected fewer than 2**31")
    if (top_k is None) == (top_ks is None):
        raise ValueError(f"{name}(): give top_k or top_ks, exactly one of them")
    top_ks_name, top_ks_stride = "i64", 0
    if top_k is not None:
        check_int(name, "top_k", top_k, minimum=1)
    else:
        top_ks_stride = _check_per_row(name, "top_ks", top_ks, logits, tuple(_INDEX_NAMES))
        top_ks_name = _INDEX_NAMES[top_ks.dtype]
    out_stride = vocab
    if out is not None:
        out_shape, out_strides = tensor_meta(name, "out", out)
        check_same_device(name, "out", out, "logits", logits)
        if out.dtype != logits.dtype:
            raise TypeError(f"{name}(): out has dtype {out.dtype}; expected logits' {logits.dtype}")
        check_shape(name, "out", out_shape, logits.shape, "logits.shape")
        check_unit_last_stride(name, "out", out_shape, out_strides)
        check_own_memory(name, "out", out)
        out_stride = out_strides[0]
    if batch == 0 or vocab == 0:
        return None
    return _TopKPlan(dtype, top_ks_name, batch, logits_stride, top_ks_stride, out_stride)
