"""sycl_kernels.jit.activation: specs of the gated activations (kernels/activation/gated.hpp)."""

from __future__ import annotations

import functools

from .._dtypes import DType
from .spec import KernelSpec, Param, leading_row_params, row_group_size, vec_width

# Activation name -> sycl_kernels::Activation value. Kernels are named after the op
# over x's halves (silu_and_mul_...); act_and_mul(gate, up) launches the same ones.
ACTIVATIONS = {"silu": 0, "gelu": 1, "gelu_tanh": 2}


@functools.cache
def act_and_mul_spec(activation: str, dtype: DType, dim: int, tuned_for: str) -> KernelSpec:
    t = dtype.cpp_type
    threads = row_group_size(dtype, dim, tuned_for)
    return KernelSpec(
        name=f"{activation}_and_mul_{dtype.short_name}_d{dim}_{tuned_for}",
        header="activation/gated.hpp",
        function="sycl_kernels::act_and_mul",
        template_args=(
            t,
            str(dim),
            str(threads),
            str(vec_width(dtype, tuned_for, cpu_pairs=True)),
            str(ACTIVATIONS[activation]),
        ),
        params=(
            Param("gate", f"const {t}*"),
            *leading_row_params("gate"),
            Param("up", f"const {t}*"),
            *leading_row_params("up"),
            Param("out", f"{t}*"),
            *leading_row_params("out"),
            Param("middle_size", "int64_t"),
            Param("inner_size", "int64_t"),
        ),
        group_size=threads,
    )
