"""sycl_kernels.jit.norm: specs of the norm kernels (kernels/norm/), for ops and AOT build."""

from __future__ import annotations

import functools

from .._dtypes import DType
from .spec import KernelSpec, Param, row_group_size, vec_width


def _row_norm_spec(
    name: str, function: str, dtype: DType, hidden: int, tuned_for: str, gemma: bool, params
) -> KernelSpec:
    threads = row_group_size(dtype, hidden, tuned_for)
    return KernelSpec(
        name=f"{'gemma_' if gemma else ''}{name}_{dtype.short_name}_h{hidden}_{tuned_for}",
        header="norm/rmsnorm.hpp",
        function=function,
        template_args=(
            dtype.cpp_type,
            str(hidden),
            str(threads),
            str(vec_width(dtype, tuned_for)),
            str(gemma).lower(),
        ),
        params=params,
        group_size=threads,
    )


@functools.cache
def rmsnorm_spec(dtype: DType, hidden: int, tuned_for: str, gemma: bool = False) -> KernelSpec:
    t = dtype.cpp_type
    params = (
        Param("x", f"const {t}*"),
        Param("x_row_stride", "int64_t"),
        Param("weight", f"const {t}*"),
        Param("out", f"{t}*"),
        Param("out_row_stride", "int64_t"),
        Param("eps", "float"),
    )
    return _row_norm_spec(
        "rmsnorm", "sycl_kernels::rmsnorm", dtype, hidden, tuned_for, gemma, params
    )


@functools.cache
def fused_add_rmsnorm_spec(
    dtype: DType, hidden: int, tuned_for: str, gemma: bool = False
) -> KernelSpec:
    t = dtype.cpp_type
    params = (
        Param("x", f"{t}*"),
        Param("x_row_stride", "int64_t"),
        Param("residual", f"{t}*"),
        Param("residual_row_stride", "int64_t"),
        Param("weight", f"const {t}*"),
        Param("eps", "float"),
    )
    return _row_norm_spec(
        "fused_add_rmsnorm",
        "sycl_kernels::fused_add_rmsnorm",
        dtype,
        hidden,
        tuned_for,
        gemma,
        params,
    )


@functools.cache
def qknorm_spec(dtype: DType, head_dim: int, tuned_for: str) -> KernelSpec:
    t = dtype.cpp_type
    threads = row_group_size(dtype, head_dim, tuned_for)
    return KernelSpec(
        name=f"qknorm_{dtype.short_name}_d{head_dim}_{tuned_for}",
        header="norm/qknorm.hpp",
        function="sycl_kernels::qknorm",
        template_args=(t, str(head_dim), str(threads), str(vec_width(dtype, tuned_for))),
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
