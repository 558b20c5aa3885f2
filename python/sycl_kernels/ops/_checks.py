"""sycl_kernels.ops._checks: argument checks whose errors name the argument."""

from __future__ import annotations

import torch

from .._dtypes import DTYPES, FLOAT_DTYPE_NAMES, DType

_BY_TORCH: dict[torch.dtype, DType] = {d.torch_dtype: d for d in DTYPES}


def check_tensor(op: str, name: str, t: object) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}(): {name} must be a torch.Tensor, got {type(t).__name__}")
    # is_cpu / is_xpu, not t.device: building a torch.device costs ~0.25 us a call.
    if not (t.is_cpu or t.is_xpu):
        raise ValueError(f"{op}(): {name} is on {t.device}; expected a cpu or xpu tensor")
    if t.layout is not torch.strided:
        raise ValueError(f"{op}(): {name} has layout {t.layout}; expected torch.strided")
    return t


def check_float_dtype(op: str, name: str, t: torch.Tensor) -> DType:
    dtype = _BY_TORCH.get(t.dtype)
    if dtype is None:
        raise TypeError(f"{op}(): {name} has dtype {t.dtype}; expected one of {FLOAT_DTYPE_NAMES}")
    return dtype


def check_same(op: str, name: str, t: torch.Tensor, like_name: str, like: torch.Tensor) -> None:
    if not (t.is_cpu and like.is_cpu) and t.device != like.device:
        raise ValueError(
            f"{op}(): {name} is on {t.device} but {like_name} is on {like.device}; "
            "expected the same device"
        )
    if t.dtype != like.dtype:
        raise TypeError(
            f"{op}(): {name} has dtype {t.dtype} but {like_name} has {like.dtype}; "
            "expected the same dtype"
        )


def check_shape(op: str, name: str, t: torch.Tensor, shape: tuple[int, ...], why: str) -> None:
    if t.shape != shape:  # torch.Size equals the tuple of its sizes; no conversion
        raise ValueError(
            f"{op}(): {name} has shape {tuple(t.shape)}; expected {tuple(shape)} ({why})"
        )


def check_unit_last_stride(op: str, name: str, t: torch.Tensor) -> None:
    if t.dim() > 0 and t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(
            f"{op}(): {name} has stride {t.stride(-1)} in its last dimension; expected 1 "
            f"(call {name}.contiguous())"
        )


def as_rows(op: str, name: str, t: torch.Tensor, width: int, written: bool) -> torch.Tensor:
    """`t` seen as a 2-D [rows, width] view with unit column stride, without copying.

    Rows of a `written` tensor must not overlap (an expanded tensor, say): work-groups
    would write the same memory at once.
    """
    rows = t
    if t.dim() != 2:
        try:
            rows = t.view(-1, width)
        except RuntimeError:
            raise ValueError(
                f"{op}(): {name} of shape {tuple(t.shape)} and strides {t.stride()} cannot be "
                f"viewed as rows of {width} elements; expected its leading dimensions to be "
                f"mergeable (call {name}.contiguous())"
            ) from None
    if written:
        check_disjoint_rows(op, name, rows.shape[0], rows.stride(0), width)
    return rows


def check_disjoint_rows(op: str, name: str, rows: int, row_stride: int, row_size: int) -> None:
    if rows > 1 and row_stride < row_size:
        raise ValueError(
            f"{op}(): {name} is written but its rows overlap (row stride {row_stride}, "
            f"{row_size} elements a row); expected a tensor with its own memory per row"
        )


def check_heads(op: str, name: str, t: torch.Tensor, written: bool) -> None:
    """[tokens, heads, head_dim] with heads packed (head stride head_dim), any token stride."""
    if t.dim() != 3:
        raise ValueError(
            f"{op}(): {name} has shape {tuple(t.shape)}; expected [tokens, heads, head_dim]"
        )
    check_unit_last_stride(op, name, t)
    if t.shape[1] > 1 and t.stride(1) != t.shape[2]:
        raise ValueError(
            f"{op}(): {name} has head stride {t.stride(1)}; expected {t.shape[2]} "
            "(heads packed within a token; the token stride may be anything)"
        )
    if written:
        check_disjoint_rows(op, name, t.shape[0], t.stride(0), t.shape[1] * t.shape[2])


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


def check_int(op: str, name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{op}(): {name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{op}(): {name} must be at least {minimum}, got {value}")
