"""sycl_kernels.ops.norm: RMSNorm (kernels/norm/rmsnorm.hpp)."""

from __future__ import annotations

import torch

from .. import _runtime
from ..jit import get_kernel
from ..jit.norm import rmsnorm_spec
from ._checks import (
    as_rows,
    check_float_dtype,
    check_same,
    check_shape,
    check_tensor,
    check_unit_last_stride,
)


def rmsnorm(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
) -> torch.Tensor:
    """RMSNorm over the last dimension: x * rsqrt(mean(x^2) + eps) * weight.

    x: [..., hidden] float32/float16/bfloat16, unit stride in the last dimension
    (a 2-D x may have any row stride). weight: [hidden], same dtype and device.
    out: optional, same shape and dtype as x. Returns out (a new tensor if None).
    CPU tensors run on the SYCL CPU device and the call returns when done; XPU
    tensors run asynchronously on the current XPU stream.
    """
    op = "rmsnorm"
    check_tensor(op, "x", x)
    check_tensor(op, "weight", weight)
    dtype = check_float_dtype(op, "x", x)
    check_same(op, "weight", weight, "x", x)
    if x.dim() == 0:
        raise ValueError(f"{op}(): x is a 0-d tensor; expected at least 1 dimension (hidden)")
    hidden = x.shape[-1]
    if not isinstance(eps, (float, int)) or not eps >= 0:
        raise ValueError(f"{op}(): eps must be a non-negative number, got {eps!r}")
    check_shape(op, "weight", weight, (hidden,), "x.shape[-1]")
    check_unit_last_stride(op, "x", x)
    check_unit_last_stride(op, "weight", weight)
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    else:
        check_tensor(op, "out", out)
        check_same(op, "out", out, "x", x)
        check_shape(op, "out", out, tuple(x.shape), "x.shape")
        check_unit_last_stride(op, "out", out)
    if x.numel() == 0:
        return out

    x_rows = as_rows(op, "x", x, hidden)
    out_rows = as_rows(op, "out", out, hidden)
    queue = _runtime.queue_for(x.device)
    spec = rmsnorm_spec(dtype, hidden)
    kernel = get_kernel(spec, queue)
    kernel.launch(
        queue,
        x_rows.shape[0] * spec.group_size,
        spec.group_size,
        x_rows,
        x_rows.stride(0),
        weight,
        out_rows,
        out_rows.stride(0),
        float(eps),
    )
    return out
