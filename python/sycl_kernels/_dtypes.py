"""sycl_kernels._dtypes: the tables of supported dtypes (torch name, short name, C++ type).

Free of torch at import, so the wheel build can name variants without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


# eq=False: the three entries below are the only instances, so identity is equality,
# and hashing by identity keeps the ops' per-call spec lookups cheap.
@dataclass(frozen=True, eq=False)
class DType:
    torch_name: str
    short_name: str
    cpp_type: str
    size: int

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, self.torch_name)


DTYPES: tuple[DType, ...] = (
    DType("float32", "fp32", "sycl_kernels::fp32", 4),
    DType("float16", "fp16", "sycl_kernels::fp16", 2),
    DType("bfloat16", "bf16", "sycl_kernels::bf16", 2),
)

BY_NAME: dict[str, DType] = {d.short_name: d for d in DTYPES}

FLOAT_DTYPE_NAMES = ", ".join(f"torch.{d.torch_name}" for d in DTYPES)


@dataclass(frozen=True, eq=False)
class QuantDType:
    """A quantized output type (kernels/quant/convert.hpp): its range saturates."""

    torch_name: str
    short_name: str
    cpp_type: str
    min: float
    max: float

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch

        return getattr(torch, self.torch_name)


QUANT_DTYPES: tuple[QuantDType, ...] = (
    QuantDType("float8_e4m3fn", "fp8e4m3", "sycl_kernels::fp8e4m3", -448.0, 448.0),
    QuantDType("int8", "i8", "int8_t", -128.0, 127.0),
)

QUANT_BY_NAME: dict[str, QuantDType] = {d.short_name: d for d in QUANT_DTYPES}

QUANT_DTYPE_NAMES = ", ".join(f"torch.{d.torch_name}" for d in QUANT_DTYPES)
