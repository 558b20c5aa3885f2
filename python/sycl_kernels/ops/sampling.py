"""sycl_kernels.ops.sampling: top-k / top-p / min-p renormalization and sampling of
probability rows (kernels/sampling/sampling.hpp).

Three ops, sort-free (a radix select over the float bits, one sub-group per row):
``top_k_renorm_probs``, ``top_p_renorm_probs`` and ``sample_from_probs``; the helper
``philox_seed`` draws a seed pair from a torch.Generator. compat/sgl_kernel.py maps
SGLang's (flashinfer's) sampling calls onto them.

Semantics, per row of float32 probabilities p (the row need not sum to one):

- support: the positive finite entries; NaN, Inf, zero and negative entries count as
  probability 0 (never kept, never sampled). S is the support's mass.
- top-k: the entries >= the k-th largest (counted with multiplicity): every entry
  equal to the k-th is kept, so ties can keep more than k; k at least the support's
  size keeps it whole.
- top-p: the entries >= the largest value t such that the entries >= t hold at least
  p * S: the smallest set of largest entries reaching a fraction p of the row's mass,
  ties at the boundary all kept; p = 1 keeps the support whole.
- both: ``joint=False`` (flashinfer's "top_k_first") applies top-p to the top-k
  entries and their mass; ``joint=True`` keeps the entries kept by top-k and by top-p
  each on the whole row (flashinfer's "joint").
- min-p (sampling): then the entries >= min_p * max(p) (relative to the largest,
  which every filter keeps).
- renormalized: kept * (1 / W) in float32, W the kept mass, 0 elsewhere; a row
  without support gives zeros. Sampled: index i with probability kept_i / W; a row
  without support gives 0. A row whose mass is outside [2^-64, 2^64] (past float32's
  range, or 1 / W overflowing) has its masses taken in units of a power of two near
  its maximum (exact scaling), so it gives what the same row at a normal scale does.

Randomness: each output row's one uniform is Philox 4x32-10 (key: the 64-bit seed,
counter: the 64-bit offset and the output row index), so a row's draw depends only on
its probabilities, its parameters, the seed pair and its position: never on the other
rows of the batch, the device's thread count or the call's timing. The kernels are
deterministic: the same inputs and seed give the same samples on every call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from ..specs.sampling import sample_spec, top_k_renorm_spec, top_p_renorm_spec
from ._checks import (
    check_bool,
    check_int,
    check_number,
    check_own_memory,
    check_same_device,
    check_shape,
    check_unit_last_stride,
    tensor_meta,
)
from ._launch import KernelBinding, Launch, bind_kernel, skip
from ._op import op
from ._schema import Args

# The largest vocabulary (an int32 index and count).
MAX_VOCAB = 2**31 - 1
_INDEX_TYPES = {torch.int32: "i32", torch.int64: "i64"}


class RenormPlan(NamedTuple):
    rows: int
    vocab: int
    probs_stride: int
    per_row_type: str
    out_stride: int


class SamplePlan(NamedTuple):
    rows: int
    vocab: int
    probs_stride: int
    top_k_type: str
    indices_type: str
    seed_stride: int
    seed_per_row: bool
    """A [rows, 2] seed (by its shape: a row stride of 0 is still one pair a row)."""
    out_stride: int


def philox_seed(
    generator: torch.Generator | None = None, device: torch.device | str | None = None
) -> torch.Tensor:
    """A (seed, offset) pair for sample_from_probs: int64 [2] on `device` (default the
    generator's), drawn from `generator` (default: torch's default generator of
    `device`, so torch.manual_seed makes it reproducible). It advances the generator,
    so successive calls give successive pairs."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"philox_seed(): generator must be a torch.Generator or None, got "
            f"{type(generator).__name__}"
        )
    source = generator.device if generator is not None else torch.device(device or "cpu")
    pair = torch.empty(2, dtype=torch.int64, device=source).random_(generator=generator)
    return pair if device is None else pair.to(device)


def _check_probs(name: str, probs: torch.Tensor) -> tuple[int, int, int]:
    """(rows, vocab, row stride) of a float32 [rows, vocab] probs."""
    shape, strides = tensor_meta(name, "probs", probs)
    if probs.dtype != torch.float32:
        raise TypeError(f"{name}(): probs has dtype {probs.dtype}; expected torch.float32")
    if len(shape) != 2:
        raise ValueError(f"{name}(): probs has shape {tuple(shape)}; expected [rows, vocab]")
    check_unit_last_stride(name, "probs", shape, strides)
    rows, vocab = shape
    if not 1 <= vocab <= MAX_VOCAB:
        raise ValueError(f"{name}(): probs has {vocab} columns; expected 1 to {MAX_VOCAB}")
    return rows, vocab, strides[0]


def _check_per_row(
    name: str, arg: str, t: torch.Tensor, probs: torch.Tensor, rows: int, dtypes: tuple
) -> None:
    """A per-row [rows] tensor of one of `dtypes`, unit stride, on probs' device."""
    shape, strides = tensor_meta(name, arg, t)
    if t.dtype not in dtypes:
        expected = " or ".join(str(d) for d in dtypes)
        raise TypeError(f"{name}(): {arg} has dtype {t.dtype}; expected {expected}")
    check_same_device(name, arg, t, "probs", probs)
    check_shape(name, arg, shape, (rows,), "one value per row")
    check_unit_last_stride(name, arg, shape, strides)


def _one_of(name: str, arg: str, value: object, per_row: torch.Tensor | None) -> None:
    if value is not None and per_row is not None:
        raise ValueError(f"{name}(): give {arg} or {arg}_per_row, not both")


def _check_out(
    name: str, out: torch.Tensor | None, dtype: torch.dtype, shape: tuple, probs: torch.Tensor
) -> int | None:
    """The row stride of a given output (for a 1-d one, its stride), or None."""
    if out is None:
        return None
    out_shape, strides = tensor_meta(name, "out", out)
    if out.dtype != dtype:
        raise TypeError(f"{name}(): out has dtype {out.dtype}; expected {dtype}")
    check_same_device(name, "out", out, "probs", probs)
    if len(shape) == 2:
        check_shape(name, "out", out_shape, shape, "[rows, vocab]")
        check_unit_last_stride(name, "out", out_shape, strides)
    else:
        check_shape(name, "out", out_shape, shape, "[rows]")
    check_own_memory(name, "out", out)
    return strides[0]


def _check_values(name: str, arg: str, t: torch.Tensor | None, bad: torch.Tensor, want: str):
    """Raises where a CPU per-row tensor has a value outside its range (`bad`: the mask)."""
    if t is not None and bad.any():
        i = int(bad.nonzero()[0])
        raise ValueError(f"{name}(): {arg}[{i}] is {t[i].item()!r}; expected {want}")


# Top-k renormalization.


def _like_probs(a: Args) -> torch.Tensor:
    return torch.empty(a.probs.shape, dtype=torch.float32, device=a.probs.device)


# The ranges of the per-row values, checked on CPU tensors at each call (they are data).
_PER_ROW_RANGES: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], str]] = {
    "top_k_per_row": (lambda t: t < 1, "at least 1"),
    "top_p_per_row": (lambda t: ~((t > 0) & (t <= 1)), "in (0, 1]"),
    "min_p_per_row": (lambda t: ~((t >= 0) & (t <= 1)), "in [0, 1]"),
}


def _check_per_row_values(a: Args) -> tuple:
    """Every per-row value the call gives on CPU tensors in its range (_PER_ROW_RANGES):
    the renorms' prepare."""
    for arg, (outside, want) in _PER_ROW_RANGES.items():
        t = getattr(a, arg, None)
        if t is not None and t.is_cpu:
            _check_values(a.op_name, arg, t, outside(t), want)
    return a


def _bind_top_k(plan: RenormPlan, a: Args) -> KernelBinding | Launch:
    if plan.rows == 0:
        return skip
    return bind_kernel(
        top_k_renorm_spec(plan.per_row_type),
        a.probs,
        plan.rows,
        prepare=_check_per_row_values,
        probs_stride=plan.probs_stride,
        vocab=plan.vocab,
        top_k=min(a.top_k or 1, plan.vocab),
        out_stride=plan.out_stride,
    )


@op(bind=_bind_top_k, new_output=_like_probs)
def top_k_renorm_probs(
    probs: torch.Tensor,
    top_k: int | None = None,
    *,
    top_k_per_row: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> RenormPlan:
    """Each row of probs kept to its top_k largest entries and renormalized: float32
    [rows, vocab] (module doc: support, ties, renormalization).

    probs: float32 [rows, vocab], unit last stride (any row stride), need not sum to
    one. top_k: an int >= 1 for every row (at least vocab, however large, keeps every
    row whole), or
    top_k_per_row: int32 or int64 [rows], one per row, each at least 1 (checked on
    CPU; on an XPU, unchecked: a value below 1 acts as 1). Give exactly one of them.
    Ties with the k-th largest are all kept. out: optional float32 [rows, vocab]
    output, unit last stride; None returns a new contiguous one. Not differentiable.
    """
    name = "top_k_renorm_probs"
    rows, vocab, probs_stride = _check_probs(name, probs)
    _one_of(name, "top_k", top_k, top_k_per_row)
    per_row_type = "i64"
    if top_k_per_row is not None:
        _check_per_row(name, "top_k_per_row", top_k_per_row, probs, rows, tuple(_INDEX_TYPES))
        per_row_type = _INDEX_TYPES[top_k_per_row.dtype]
    elif top_k is None:
        raise ValueError(f"{name}(): give top_k (an int) or top_k_per_row (a tensor)")
    else:
        check_int(name, "top_k", top_k, minimum=1)
    out_stride = _check_out(name, out, torch.float32, (rows, vocab), probs)
    return RenormPlan(
        rows, vocab, probs_stride, per_row_type, vocab if out_stride is None else out_stride
    )


# Top-p renormalization.


def _bind_top_p(plan: RenormPlan, a: Args) -> KernelBinding | Launch:
    if plan.rows == 0:
        return skip
    return bind_kernel(
        top_p_renorm_spec(),
        a.probs,
        plan.rows,
        prepare=_check_per_row_values,
        probs_stride=plan.probs_stride,
        vocab=plan.vocab,
        top_p=float(1.0 if a.top_p is None else a.top_p),
        out_stride=plan.out_stride,
    )


def _check_top_p(name: str, top_p: object) -> None:
    check_number(name, "top_p", top_p)
    if not 0 < top_p <= 1:
        raise ValueError(f"{name}(): top_p is {top_p!r}; expected a value in (0, 1]")


def _check_min_p(name: str, min_p: object) -> None:
    check_number(name, "min_p", min_p)
    if not 0 <= min_p <= 1:
        raise ValueError(f"{name}(): min_p is {min_p!r}; expected a value in [0, 1]")


@op(bind=_bind_top_p, new_output=_like_probs)
def top_p_renorm_probs(
    probs: torch.Tensor,
    top_p: float | None = None,
    *,
    top_p_per_row: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> RenormPlan:
    """Each row of probs kept to its top-p nucleus and renormalized: float32 [rows,
    vocab] (module doc: the nucleus is the smallest set of largest entries holding a
    fraction top_p of the row's mass, ties at its boundary all kept).

    probs: float32 [rows, vocab], unit last stride, need not sum to one (top_p is a
    fraction of each row's own mass). top_p: a number in (0, 1] for every row (1 keeps
    every row whole), or top_p_per_row: float32 [rows], each in (0, 1] (checked on CPU;
    on an XPU, unchecked: above 1 acts as 1, at most 0 keeps the largest entry and its
    ties). Give exactly one of them. out: optional float32 [rows, vocab] output, unit
    last stride; None returns a new contiguous one. Not differentiable.
    """
    name = "top_p_renorm_probs"
    rows, vocab, probs_stride = _check_probs(name, probs)
    _one_of(name, "top_p", top_p, top_p_per_row)
    if top_p_per_row is not None:
        _check_per_row(name, "top_p_per_row", top_p_per_row, probs, rows, (torch.float32,))
    elif top_p is None:
        raise ValueError(f"{name}(): give top_p (a number) or top_p_per_row (a tensor)")
    else:
        _check_top_p(name, top_p)
    out_stride = _check_out(name, out, torch.float32, (rows, vocab), probs)
    return RenormPlan(rows, vocab, probs_stride, "", vocab if out_stride is None else out_stride)


# Sampling.


def _new_samples(a: Args) -> torch.Tensor:
    rows = a.probs.shape[0] if a.indices is None else a.indices.shape[0]
    return torch.empty(rows, dtype=torch.int32, device=a.probs.device)


def _prepare_sample(a: Args) -> tuple:
    """At each call: the CPU per-row values and indices checked, and a seed pair drawn
    from torch's default generator of probs' device when none is given."""
    name = a.op_name
    _check_per_row_values(a)
    indices = a.indices
    if indices is not None and indices.is_cpu and indices.numel():
        rows = a.probs.shape[0]
        bad = (indices < 0) | (indices >= rows)
        if bad.any():
            i = int(bad.nonzero()[0])
            raise IndexError(
                f"{name}(): indices[{i}] is {int(indices[i])}; expected a row of probs, "
                f"0 to {rows - 1}"
            )
    if a.seed is None:
        return a._replace(seed=philox_seed(device=a.probs.device))
    return a


def _bind_sample(plan: SamplePlan, a: Args) -> KernelBinding | Launch:
    if plan.rows == 0:
        return skip
    return bind_kernel(
        sample_spec(a.joint, plan.top_k_type, plan.indices_type),
        a.probs,
        plan.rows,
        prepare=_prepare_sample,
        probs_stride=plan.probs_stride,
        vocab=plan.vocab,
        top_k=min(plan.vocab if a.top_k is None else a.top_k, plan.vocab),
        top_p=float(1.0 if a.top_p is None else a.top_p),
        min_p=float(0.0 if a.min_p is None else a.min_p),
        seed_stride=plan.seed_stride,
        seed_per_row=int(plan.seed_per_row),
        out_stride=plan.out_stride,
    )


@op(bind=_bind_sample, new_output=_new_samples)
def sample_from_probs(
    probs: torch.Tensor,
    *,
    top_k: int | None = None,
    top_k_per_row: torch.Tensor | None = None,
    top_p: float | None = None,
    top_p_per_row: torch.Tensor | None = None,
    min_p: float | None = None,
    min_p_per_row: torch.Tensor | None = None,
    indices: torch.Tensor | None = None,
    seed: torch.Tensor | None = None,
    joint: bool = False,
    out: torch.Tensor | None = None,
) -> SamplePlan:
    """One token index per output row, sampled from its row of probs filtered by top-k,
    top-p and min-p (module doc): int32 [rows] (SGLang's and flashinfer's sample dtype).

    probs: float32 [rows of probs, vocab], unit last stride, need not sum to one.
    indices: optional int32 or int64 [rows]: output row r samples from probs[indices[r]]
    (several outputs may share a row); None: row r from probs[r]. Out of range raises
    IndexError on CPU (an XPU's are not checked).
    Each filter is off when None, and takes a number for every row or a [rows] tensor
    (exactly one of the two): top_k / top_k_per_row (int >= 1; int32 or int64),
    top_p / top_p_per_row (in (0, 1]; float32), min_p / min_p_per_row (in [0, 1];
    float32). Per-row values are checked on CPU only (as top_k_renorm_probs and
    top_p_renorm_probs say on an XPU; min_p above 1 keeps nothing). joint: top-k and
    top-p each on the whole row (flashinfer's "joint"); False applies top-p to the
    top-k entries' mass ("top_k_first"); min-p comes last either way.
    seed: int64 [2] (seed, offset) shared by every row, the draw of output row r being
    Philox 4x32-10 with key seed and counter (offset, r); or int64 [rows, 2], one pair
    per row (counter (offset, 0), so a row's draw does not depend on its position;
    any row stride: one pair expanded to [rows, 2] is that pair for every row); on
    probs' device. None draws a pair from torch's default generator of probs'
    device at each call (torch.manual_seed reproduces it); philox_seed(generator)
    draws one from a torch.Generator. The same probs, parameters and seed give the
    same samples, whatever the other rows of the batch.
    A row without support (nothing positive and finite, or min_p keeping nothing)
    samples 0. out: optional int32 [rows] output (any stride); None returns a new one.
    """
    name = "sample_from_probs"
    prob_rows, vocab, probs_stride = _check_probs(name, probs)
    rows, indices_type = prob_rows, "i64"
    if indices is not None:
        shape, strides = tensor_meta(name, "indices", indices)
        if indices.dtype not in _INDEX_TYPES:
            raise TypeError(
                f"{name}(): indices has dtype {indices.dtype}; expected torch.int32 or torch.int64"
            )
        check_same_device(name, "indices", indices, "probs", probs)
        if len(shape) != 1:
            raise ValueError(f"{name}(): indices has shape {tuple(shape)}; expected [rows]")
        check_unit_last_stride(name, "indices", shape, strides)
        rows, indices_type = shape[0], _INDEX_TYPES[indices.dtype]
        if rows and not prob_rows:
            raise IndexError(f"{name}(): indices has {rows} entries but probs has no rows")
    top_k_type = "i64"
    _one_of(name, "top_k", top_k, top_k_per_row)
    if top_k_per_row is not None:
        _check_per_row(name, "top_k_per_row", top_k_per_row, probs, rows, tuple(_INDEX_TYPES))
        top_k_type = _INDEX_TYPES[top_k_per_row.dtype]
    elif top_k is not None:
        check_int(name, "top_k", top_k, minimum=1)
    _one_of(name, "top_p", top_p, top_p_per_row)
    if top_p_per_row is not None:
        _check_per_row(name, "top_p_per_row", top_p_per_row, probs, rows, (torch.float32,))
    elif top_p is not None:
        _check_top_p(name, top_p)
    _one_of(name, "min_p", min_p, min_p_per_row)
    if min_p_per_row is not None:
        _check_per_row(name, "min_p_per_row", min_p_per_row, probs, rows, (torch.float32,))
    elif min_p is not None:
        _check_min_p(name, min_p)
    seed_stride, seed_per_row = 0, False
    if seed is not None:
        shape, strides = tensor_meta(name, "seed", seed)
        if seed.dtype != torch.int64:
            raise TypeError(f"{name}(): seed has dtype {seed.dtype}; expected torch.int64")
        check_same_device(name, "seed", seed, "probs", probs)
        if tuple(shape) == (2,):
            check_unit_last_stride(name, "seed", shape, strides)
        elif tuple(shape) == (rows, 2):
            check_unit_last_stride(name, "seed", shape, strides)
            seed_stride, seed_per_row = strides[0], True
        else:
            raise ValueError(
                f"{name}(): seed has shape {tuple(shape)}; expected [2] (seed, offset) or "
                f"[{rows}, 2] (one pair per row)"
            )
    check_bool(name, "joint", joint)
    out_stride = _check_out(name, out, torch.int32, (rows,), probs)
    return SamplePlan(
        rows,
        vocab,
        probs_stride,
        top_k_type,
        indices_type,
        seed_stride,
        seed_per_row,
        1 if out_stride is None else out_stride,
    )
