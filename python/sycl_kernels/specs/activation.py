"""sycl_kernels.specs.activation: specs of the activations (kernels/activation/).

The gated ones, act(gate) * up (gated.hpp), and the one-value ones, act(x)
(elementwise.hpp: the gated kernel's row loop with the gate alone).
"""

from __future__ import annotations

import functools

from .._dtypes import BY_NAME, DType
from .spec import KernelSpec, Param, leading_row_params, row_group_size, vec_width
from .variants import manifest_op

# Activation name -> sycl_kernels::Activation value. Kernels are named after the op
# over x's halves (silu_and_mul_...); act_and_mul(gate, up) launches the same ones.
# ACTIVATIONS are act_and_mul's: an activation of one value, without parameters.
ACTIVATIONS = {"silu": 0, "gelu": 1, "gelu_tanh": 2}
# The one-value activations of the elementwise ops (act(x)): gelu_tanh(x), gelu_quick(x).
ELEMENTWISE_ACTIVATIONS = {"gelu_tanh": 2, "gelu_quick": 3}
# The gated-only activations, with their runtime float parameters in kernel order
# (gated.hpp's gate_and_mul: param0, param1).
PARAMETRIZED_ACTIVATIONS = {"fatrelu": (4, ("threshold",)), "swigluoai": (5, ("alpha", "limit"))}
_ACTIVATION_VALUES = {
    **ACTIVATIONS,
    **ELEMENTWISE_ACTIVATIONS,
    **{name: value for name, (value, _) in PARAMETRIZED_ACTIVATIONS.items()},
}
# sycl_kernels::Operands: gate and up in two rows, or interleaved in one.
_SEPARATE, _INTERLEAVED = 0, 1

# cpu: 1024 work-items a row rather than the row kernels' 256, so that each unrolls
# 4 steps of a 4096 row, not 16. The transcendental's code is long, and 16 unrolled
# copies of it ran at half the speed: at 4096 x 2*4096, 0.46-0.76x the time for
# gelu, 0.59-0.70x for silu and gelu_tanh; 256 tokens 0.90-0.98x, 1 and 16 tokens
# 0.97-1.05x. 11008 and 14336 wide rows: 0.58-1.05x at 1024 tokens. 2048 work-items
# were no better, 4096 up to 2x slower.
ACTIVATION_CPU_THREADS = 1024


@functools.cache
def act_and_mul_spec(
    activation: str, dtype: DType, dim: int, tuned_for: str, interleaved: bool = False
) -> KernelSpec:
    """The gated kernel on rows of `dim` outputs; interleaved: gate and up alternate
    in one row (gate at even elements), named ..._and_mul_interleaved_...."""
    t = dtype.cpp_type
    threads = row_group_size(dtype, dim, tuned_for, min_cpu_threads=ACTIVATION_CPU_THREADS)
    vec = vec_width(dtype, tuned_for, cpu_pairs=True)
    # Interleaved, a step loads 2 * vec elements: a cpu pair (one 32- or 64-bit SIMD
    # lane, kernels/common/vec.hpp) or a gpu 16-byte vector.
    vec = max(1, vec // 2) if interleaved else vec
    _, floats = PARAMETRIZED_ACTIVATIONS.get(activation, (None, ()))
    layout = "_interleaved" if interleaved else ""
    return KernelSpec(
        name=f"{activation}_and_mul{layout}_{dtype.short_name}_d{dim}_{tuned_for}",
        header="activation/gated.hpp",
        function="sycl_kernels::act_and_mul",
        template_args=(
            t,
            str(dim),
            str(threads),
            str(vec),
            str(_ACTIVATION_VALUES[activation]),
            *((str(_INTERLEAVED),) if interleaved else ()),
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
            *(Param(name, "float") for name in floats),
        ),
        group_size=threads,
    )


@functools.cache
def act_spec(activation: str, dtype: DType, dim: int, tuned_for: str) -> KernelSpec:
    """The one-value kernel, out = act(x), on rows of `dim` (the gated kernel's tuning)."""
    t = dtype.cpp_type
    threads = row_group_size(dtype, dim, tuned_for, min_cpu_threads=ACTIVATION_CPU_THREADS)
    return KernelSpec(
        name=f"{activation}_{dtype.short_name}_d{dim}_{tuned_for}",
        header="activation/elementwise.hpp",
        function="sycl_kernels::act",
        template_args=(
            t,
            str(dim),
            str(threads),
            str(vec_width(dtype, tuned_for, cpu_pairs=True)),
            str(ELEMENTWISE_ACTIVATIONS[activation]),
        ),
        params=(
            Param("x", f"const {t}*"),
            *leading_row_params("x"),
            Param("out", f"{t}*"),
            *leading_row_params("out"),
            Param("middle_size", "int64_t"),
            Param("inner_size", "int64_t"),
        ),
        group_size=threads,
    )


def _act_and_mul_variant(activation: str, dtype: str, dim: int, tuned_for: str) -> KernelSpec:
    return act_and_mul_spec(activation, BY_NAME[dtype], dim, tuned_for)


def _act_variant(activation: str, dtype: str, dim: int, tuned_for: str) -> KernelSpec:
    return act_spec(activation, BY_NAME[dtype], dim, tuned_for)


# The manifest's [<activation>_and_mul] and [<activation>] tables (kernels/variants.toml).
for _activation in ACTIVATIONS:
    manifest_op(f"{_activation}_and_mul")(functools.partial(_act_and_mul_variant, _activation))
for _activation in ELEMENTWISE_ACTIVATIONS:
    manifest_op(_activation)(functools.partial(_act_variant, _activation))
