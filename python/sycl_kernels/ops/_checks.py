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
    if tuple(t.shape) != shape:
        raise ValueError(f"{op}(): {name} has shape {tuple(t.shape)}; expected {shape} ({why})")


def check_unit_last_stride(op: str, name: str, t: torch.Tensor) -> None:
    if t.dim() > 0 and t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(
            f"{op}(): {name} has stride {t.stride(-1)} in its last dimension; expected 1 "
            f"(call {name}.contiguous())"
        )


def as_rows(op: str, name: str, t: torch.Tensor, width: int) -> torch.Tensor:
    """`t` seen as a 2-D [rows, width] view with unit column stride, without copying."""
    if t.dim() == 2:
        return t
    try:
        return t.view(-1, width)
    except RuntimeError:
        raise ValueError(
            f"{op}(): {name} of shape {tuple(t.shape)} and strides {t.stride()} cannot be "
            f"viewed as rows of {width} elements; expected its leading dimensions to be "
            f"mergeable (call {name}.contiguous())"
        ) from None


def check_eps(op: str, eps: object) -> None:
    if isinstance(eps, bool) or not isinstance(eps, (float, int)) or not eps >= 0:
        raise ValueError(f"{op}(): eps must be a non-negative number, got {eps!r}")
