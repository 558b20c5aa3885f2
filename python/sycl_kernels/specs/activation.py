"""sycl_kernels.specs.activation: specs of the gated activations (kernels/activation/gated.hpp)."""

from __future__ import annotations

import functools

from .._dtypes import BY_NAME, DType
from .spec import KernelSpec, Param, leading_row_params, row_group_size, vec_width
from .variants import manifest_op

# Activation name -> sycl_kernels::Activation value. Kernels are named after the op
# over x's halves (silu_and_mul_...); act_and_mul(gate, up) launches the same ones.
ACTIVATIONS = {"silu": 0, "gelu": 1, "gelu_tanh": 2}

# cpu: 1024 work-items a row rather than the row kernels' 256, so that each unrolls
# 4 steps of a 4096 row, not 16. The transcendental's code is long, and 16 unrolled
# copies of it ran at half the speed: at 4096 x 2*4096, 0.46-0.76x the time for
# gelu, 0.59-0.70x for silu and gelu_tanh; 256 tokens 0.90-0.98x, 1 and 16 tokens
# 0.97-1.05x. 11008 and 14336 wide rows: 0.58-1.05x at 1024 tokens. 2048 work-items
# were no better, 4096 up to 2x slower.
_MIN_CPU_THREADS = 1024


@functools.cache
def act_and_mul_spec(activation: str, dtype: DType, dim: int, tuned_for: str) -> KernelSpec:
    t = dtype.cpp_type
    threads = row_group_size(dtype, dim, tuned_for, min_cpu_threads=_MIN_CPU_THREADS)
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


def _act_and_mul_variant(activation: str, dtype: str, dim: int, tuned_for: str) -> KernelSpec:
    return act_and_mul_spec(activation, BY_NAME[dtype], dim, tuned_for)


# The manifest's [<activation>_and_mul] tables (kernels/variants.toml).
for _activation in ACTIVATIONS:
    manifest_op(f"{_activation}_and_mul")(functools.partial(_act_and_mul_variant, _activation))
