"""sycl_kernels.jit.activation: specs of the gated activations (kernels/activation/gated.hpp)."""

from __future__ import annotations

import functools

from .._dtypes import DType
from .spec import KernelSpec, Param, row_group_size, vec_width

# Op name -> sycl_kernels::Activation value.
ACTIVATIONS = {"silu_and_mul": 0, "gelu_and_mul": 1, "gelu_tanh_and_mul": 2}


@functools.cache
def act_and_mul_spec(op: str, dtype: DType, dim: int, tuned_for: str) -> KernelSpec:
    t = dtype.cpp_type
    threads = row_group_size(dtype, dim, tuned_for)
    return KernelSpec(
        name=f"{op}_{dtype.short_name}_d{dim}_{tuned_for}",
        header="activation/gated.hpp",
        function="sycl_kernels::act_and_mul",
        template_args=(
            t,
            str(dim),
            str(threads),
            str(vec_width(dtype, tuned_for)),
            str(ACTIVATIONS[op]),
        ),
        params=(
            Param("x", f"const {t}*"),
            Param("x_row_stride", "int64_t"),
            Param("out", f"{t}*"),
            Param("out_row_stride", "int64_t"),
        ),
        group_size=threads,
    )
