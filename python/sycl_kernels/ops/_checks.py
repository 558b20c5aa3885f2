"""sycl_kernels.ops._checks: argument checks whose errors name the argument."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import NamedTuple

import torch

from .._dtypes import DTYPES, FLOAT_DTYPE_NAMES, DType

# The largest value of an int32_t kernel parameter or int32 index entry.
INT32_MAX = 2**31 - 1
# The float dtypes by torch dtype (the table in _dtypes.py is torch-free).
BY_TORCH: dict[torch.dtype, DType] = {d.torch_dtype: d for d in DTYPES}


def check_tensor(op: str, name: str, t: object) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}(): {name} must be a torch.Tensor, got {type(t).__name__}")
    # is_cpu / is_xpu, not t.device: building a torch.device costs ~0.25 us a call.
    if not (t.is_cpu or t.is_xpu):
        raise ValueError(f"{op}(): {name} is on {t.device}; expected a cpu or xpu tensor")
    if t.layout is not torch.strided:
        raise ValueError(f"{op}(): {name} has layout {t.layout}; expected torch.strided")
    return t


Meta = tuple[torch.Size, tuple[int, ...]]


def tensor_meta(op: str, name: str, t: object) -> Meta:
    """check_tensor, then t's shape and strides, read once.

    Each read of a tensor's metadata costs 0.1-0.2 us, and a small op's whole host
    budget is a few microseconds, so the checks below take these tuples.
    """
    check_tensor(op, name, t)
    return t.shape, t.stride()  # type: ignore[union-attr]


def check_float_dtype(op: str, name: str, t: torch.Tensor) -> DType:
    dtype = BY_TORCH.get(t.dtype)
    if dtype is None:
        raise TypeError(f"{op}(): {name} has dtype {t.dtype}; expected one of {FLOAT_DTYPE_NAMES}")
    return dtype


def check_float32_or_dtype_of(
    op: str, name: str, t: torch.Tensor, like_name: str, like: torch.Tensor
) -> DType:
    """t (a weight, a table, a bias read beside like) in float32 or like's dtype."""
    if t.dtype != like.dtype and t.dtype != torch.float32:
        raise TypeError(
            f"{op}(): {name} has dtype {t.dtype}; expected {like_name}'s dtype {like.dtype} "
            "or torch.float32"
        )
    return BY_TORCH[t.dtype]


def check_same(op: str, name: str, t: torch.Tensor, like_name: str, like: torch.Tensor) -> None:
    """t on like's device and of like's dtype."""
    check_same_device(op, name, t, like_name, like)
    if t.dtype != like.dtype:
        raise TypeError(
            f"{op}(): {name} has dtype {t.dtype} but {like_name} has {like.dtype}; "
            "expected the same dtype"
        )


def check_shape(
    op: str, name: str, shape: tuple[int, ...], expected: tuple[int, ...], why: str
) -> None:
    if shape != expected:  # torch.Size equals the tuple of its sizes; no conversion
        raise ValueError(
            f"{op}(): {name} has shape {tuple(shape)}; expected {tuple(expected)} ({why})"
        )


def check_unit_last_stride(
    op: str, name: str, shape: tuple[int, ...], strides: tuple[int, ...]
) -> None:
    if shape and shape[-1] > 1 and strides[-1] != 1:
        raise ValueError(
            f"{op}(): {name} has stride {strides[-1]} in its last dimension; expected 1 "
            f"(call {name}.contiguous())"
        )


class RowLayout(NamedTuple):
    """Rows of `width` elements under up to three leading dimensions (kernels/common/rows.hpp).

    rows is their number; middle_size and inner_size the sizes of the last two
    leading dimensions once merged; strides holds, per tensor, the (outer, middle,
    inner) strides to pass to the kernel.
    """

    rows: int
    middle_size: int
    inner_size: int
    strides: tuple[tuple[int, int, int], ...]


RowEntries = tuple[tuple[str, tuple[int, ...], bool], ...]


def row_layout(op: str, width: int, shape: tuple[int, ...], tensors: RowEntries) -> RowLayout:
    """The rows of tensors of one shape [..., width] (unit last stride), without copying.

    shape is that shape: only its leading dimensions are read (and it is quoted in
    errors). Each entry is (name, strides, written). Leading dimensions are merged
    where every tensor's strides allow; more than three that cannot merge are
    refused. Rows of a written tensor must not overlap (an expanded tensor, say):
    work-groups would write the same memory at once.

    Memoized: a layout costs 1-4 us to work out and a call's whole host budget is a
    few. Symbolic shapes (torch.compile's fake tensors) cannot be hashed, and are
    worked out each time.
    """
    try:
        return _memoized_row_layout(op, width, shape, tensors)
    except TypeError:  # unhashable: the layout itself raises only ValueError
        return _row_layout(op, width, shape, tensors)


def _row_layout(op: str, width: int, shape: tuple[int, ...], tensors: RowEntries) -> RowLayout:
    if len(shape) == 2:  # the common case, without the general merge below
        rows = shape[0]
        strides = tuple((0, 0, s[0]) for _, s, _ in tensors)
        for name, s, written in tensors:
            if written:
                _check_apart(op, name, shape, s, ((s[0], rows),), width, "row")
        return RowLayout(rows, 1, 1 if rows == 0 else rows, strides)
    merged: list[tuple[int, list[int]]] = []
    for dim in range(len(shape) - 1):
        size = shape[dim]
        if size == 1:
            continue
        dim_strides = [s[dim] for _, s, _ in tensors]
        if merged and all(
            outer == size * inner for outer, inner in zip(merged[-1][1], dim_strides, strict=True)
        ):
            merged[-1] = (merged[-1][0] * size, dim_strides)
        else:
            merged.append((size, dim_strides))
    if len(merged) > 3:
        names = " and ".join(name for name, _, _ in tensors)
        raise ValueError(
            f"{op}(): {names} of shape {tuple(shape)} and strides {tensors[0][1]} have "
            f"{len(merged)} leading dimensions that cannot be merged; expected at most 3 "
            f"(call .contiguous())"
        )
    merged = [(1, [0] * len(tensors))] * (3 - len(merged)) + merged
    for index, (name, s, written) in enumerate(tensors):
        if written:
            _check_apart(op, name, shape, s, ((m[index], n) for n, m in merged), width, "row")
    rows = merged[0][0] * merged[1][0] * merged[2][0]
    strides = tuple(tuple(m[i] for _, m in merged) for i in range(len(tensors)))
    return RowLayout(rows, merged[1][0], merged[2][0], strides)  # type: ignore[arg-type]


_memoized_row_layout = functools.lru_cache(maxsize=4096)(_row_layout)


def contiguous_row_strides(layout: RowLayout, width: int) -> tuple[int, int, int]:
    """The (outer, middle, inner) strides of a new contiguous tensor laid out as `layout`."""
    inner = width
    middle = layout.inner_size * inner
    return (layout.middle_size * middle, middle, inner)


def check_number(
    op: str, name: str, value: object, *, minimum: float | None = None, positive: bool = False
) -> None:
    """A real Python number (not bool, not NaN), at least `minimum` or above 0 if `positive`."""
    if isinstance(value, bool) or not isinstance(value, (float, int)):
        raise TypeError(f"{op}(): {name} must be a real number, got {type(value).__name__}")
    if value != value:
        raise ValueError(f"{op}(): {name} is NaN; expected a number")
    if minimum is not None and not value >= minimum:
        raise ValueError(f"{op}(): {name} must be at least {minimum}, got {value!r}")
    if positive and not value > 0:
        raise ValueError(f"{op}(): {name} must be positive, got {value!r}")


def check_bool(op: str, name: str, value: object) -> None:
    # A truthiness test would take None or 0 for False and pick the other variant silently.
    if not isinstance(value, bool):
        raise TypeError(f"{op}(): {name} must be a bool, got {type(value).__name__}")


def check_int(
    op: str, name: str, value: object, *, minimum: int, maximum: int | None = None
) -> None:
    """An int (not bool) in [minimum, maximum]: the maximum is the kernel parameter's C
    type's where the value goes to one unchanged."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{op}(): {name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{op}(): {name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{op}(): {name} must be at most {maximum}, got {value}")


def check_index_range(
    op: str, name: str, index: torch.Tensor, high: int, what: str, *, low: int | None = 0
) -> None:
    """The values of a CPU index tensor in [low, high) (low None: no lower bound):
    IndexError naming it and the value otherwise. It reads data, so the ops call it at
    each launch (a prepare, ops/_launch.py), never on an XPU's tensors: that would
    wait for the device."""
    count = index.numel()
    if count == 0:
        return
    if count <= 256 and index.dim() == 1:
        # A decode step's few indices: a list costs ~0.9 us, a reduction ~2.2 us.
        values = index.tolist()
        lowest, highest = min(values), max(values)
    else:
        lowest, highest = (int(v) for v in torch.aminmax(index))
    if highest >= high or (low is not None and lowest < low):
        bad = highest if highest >= high else lowest
        allowed = f"[{'-inf' if low is None else low}, {high})"
        raise IndexError(f"{op}(): {name} holds {bad}; expected values in {allowed} ({what})")


def check_same_device(
    op: str, name: str, t: torch.Tensor, like_name: str, like: torch.Tensor
) -> None:
    """t on like's device (CPU tensors always are): ValueError naming both otherwise."""
    if not (t.is_cpu and like.is_cpu) and t.device != like.device:
        raise ValueError(
            f"{op}(): {name} is on {t.device} but {like_name} is on {like.device}; "
            "expected the same device"
        )


def check_own_memory(op: str, name: str, t: torch.Tensor) -> None:
    """A written tensor: no two elements at one address (an expanded or overlapping view)."""
    _check_apart(op, name, t.shape, t.stride(), zip(t.stride(), t.shape, strict=True), 1, "element")


def _check_apart(
    op: str,
    name: str,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    dims: Iterable[tuple[int, int]],
    unit_size: int,
    unit: str,
) -> None:
    """The one overlap check: units of `unit_size` elements (an element, a row) placed
    by the (stride, size) dimensions `dims` never share an address."""
    extent = unit_size
    for stride, size in sorted(d for d in dims if d[1] > 1):
        if stride < extent:
            raise ValueError(
                f"{op}(): {name} is written but its {unit}s overlap (shape {tuple(shape)}, "
                f"strides {tuple(strides)}); expected a tensor with its own memory per {unit}"
            )
        extent += stride * (size - 1)
