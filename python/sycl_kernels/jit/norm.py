"""sycl_kernels.jit.norm: specs of the norm kernels (kernels/norm/), for ops and AOT build."""

from __future__ import annotations

import functools

from .._dtypes import DType
from .spec import KernelSpec, Param

_MAX_GROUP_SIZE = 256


def rmsnorm_group_size(dtype: DType, hidden: int) -> int:
    """Work-items per row: one per 16-byte vector, a power of two, at most 256.

    A function of (dtype, hidden) only, so the variant name still encodes the kernel.
    """
    vectors = max(1, hidden * dtype.size // 16)
    return min(_MAX_GROUP_SIZE, 1 << (vectors - 1).bit_length())


@functools.cache
def rmsnorm_spec(dtype: DType, hidden: int) -> KernelSpec:
    t = dtype.cpp_type
    threads = rmsnorm_group_size(dtype, hidden)
    return KernelSpec(
        name=f"rmsnorm_{dtype.short_name}_h{hidden}",
        header="norm/rmsnorm.hpp",
        function="sycl_kernels::rmsnorm",
        template_args=(t, str(hidden), str(threads)),
        params=(
            Param("x", f"const {t}*"),
            Param("x_row_stride", "int64_t"),
            Param("weight", f"const {t}*"),
            Param("out", f"{t}*"),
            Param("out_row_stride", "int64_t"),
            Param("eps", "float"),
        ),
        group_size=threads,
    )
