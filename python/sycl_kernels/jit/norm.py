"""sycl_kernels.jit.norm: specs of the norm kernels (kernels/norm/), for ops and AOT build."""

from __future__ import annotations

import functools

from .._dtypes import DType
from .spec import KernelSpec, Param, row_group_size


@functools.cache
def rmsnorm_spec(dtype: DType, hidden: int, gemma: bool = False) -> KernelSpec:
    t = dtype.cpp_type
    threads = row_group_size(dtype, hidden)
    return KernelSpec(
        name=f"{'gemma_' if gemma else ''}rmsnorm_{dtype.short_name}_h{hidden}",
        header="norm/rmsnorm.hpp",
        function="sycl_kernels::rmsnorm",
        template_args=(t, str(hidden), str(threads), str(gemma).lower()),
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


@functools.cache
def fused_add_rmsnorm_spec(dtype: DType, hidden: int, gemma: bool = False) -> KernelSpec:
    t = dtype.cpp_type
    threads = row_group_size(dtype, hidden)
    return KernelSpec(
        name=f"{'gemma_' if gemma else ''}fused_add_rmsnorm_{dtype.short_name}_h{hidden}",
        header="norm/rmsnorm.hpp",
        function="sycl_kernels::fused_add_rmsnorm",
        template_args=(t, str(hidden), str(threads), str(gemma).lower()),
        params=(
            Param("x", f"{t}*"),
            Param("x_row_stride", "int64_t"),
            Param("residual", f"{t}*"),
            Param("residual_row_stride", "int64_t"),
            Param("weight", f"const {t}*"),
            Param("eps", "float"),
        ),
        group_size=threads,
    )


@functools.cache
def qknorm_spec(dtype: DType, head_dim: int) -> KernelSpec:
    t = dtype.cpp_type
    threads = row_group_size(dtype, head_dim)
    return KernelSpec(
        name=f"qknorm_{dtype.short_name}_d{head_dim}",
        header="norm/qknorm.hpp",
        function="sycl_kernels::qknorm",
        template_args=(t, str(head_dim), str(threads)),
        params=(
            Param("q", f"{t}*"),
            Param("q_token_stride", "int64_t"),
            Param("num_q_heads", "int64_t"),
            Param("k", f"{t}*"),
            Param("k_token_stride", "int64_t"),
            Param("num_k_heads", "int64_t"),
            Param("q_weight", f"const {t}*"),
            Param("k_weight", f"const {t}*"),
            Param("eps", "float"),
        ),
        group_size=threads,
    )
