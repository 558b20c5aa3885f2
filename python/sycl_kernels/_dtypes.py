"""sycl_kernels._dtypes: the one table of supported dtypes (torch dtype, short name, C++ type)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DType:
    torch_dtype: torch.dtype
    short_name: str
    cpp_type: str
    size: int


DTYPES: tuple[DType, ...] = (
    DType(torch.float32, "fp32", "sycl_kernels::fp32", 4),
    DType(torch.float16, "fp16", "sycl_kernels::fp16", 2),
    DType(torch.bfloat16, "bf16", "sycl_kernels::bf16", 2),
)

BY_TORCH: dict[torch.dtype, DType] = {d.torch_dtype: d for d in DTYPES}
BY_NAME: dict[str, DType] = {d.short_name: d for d in DTYPES}

FLOAT_DTYPE_NAMES = ", ".join(str(d.torch_dtype) for d in DTYPES)
