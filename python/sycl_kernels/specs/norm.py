"""sycl_kernels.specs.norm: specs of the norm kernels (kernels/norm/), for ops and AOT build."""

from __future__ import annotations

import functools
import math

from .._dtypes import BY_NAME, DType
from .spec import KernelSpec, Param, leading_row_params, row_group_size, vec_width
from .variants import manifest_op

# How a norm's weight is stored -> its C++ type (None: the activations' own type)
# and the suffix it adds to the kernel name.
WEIGHT_KINDS: dict[str, tuple[str | None, str]] = {
    "dtype": (None, ""),
    "fp32": ("sycl_kernels::fp32", "_wfp32"),
    "none": ("sycl_kernels::NoWeight", "_noweight"),
}


def norm_weight(dtype: DType, weight: str) -> tuple[str, str]:
    """The weight's C++ type and name suffix; a float32 weight on float32 rows is "dtype"."""
    try:
        cpp_type, suffix = WEIGHT_KINDS[weight]
    except KeyError:
        raise ValueError(f"weight {weight!r}: expected one of {', '.join(WEIGHT_KINDS)}") from None
    if cpp_type == dtype.cpp_type:
        cpp_type, suffix = WEIGHT_KINDS["dtype"]
    return cpp_type or dtype.cpp_type, suffix


def _row_norm_spec(
    name: str,
    dtype: DType,
    hidden: int,
    tuned_for: str,
    gemma: bool,
    weight: str,
    params: tuple[Param, ...],
    extra_template_args: tuple[str, ...] = (),
    extra_suffix: str = "",
) -> KernelSpec:
    threads = row_group_size(dtype, hidden, tuned_for)
    weight_type, weight_suffix = norm_weight(dtype, weight)
    return KernelSpec(
        name=(
            f"{'gemma_' if gemma else ''}{name}_{dtype.short_name}_h{hidden}_{tuned_for}"
            f"{weight_suffix}{extra_suffix}"
        ),
        header="norm/rmsnorm.hpp",
        function=f"sycl_kernels::{name}",
        template_args=(
            dtype.cpp_type,
            weight_type,
            str(hidden),
            str(threads),
            str(norm_vec_width(dtype, hidden, threads, tuned_for)),
            str(gemma).lower(),
            *extra_template_args,
        ),
        params=params,
        group_size=threads,
    )


def norm_vec_width(dtype: DType, hidden: int, threads: int, tuned_for: str) -> int:
    """Elements a work-item moves per access in a row norm or qknorm (kVec), in both passes.

    cpu, bf16: a pair (one uint32, kernels/common/vec.hpp), where the pairs split
    evenly over the work-items (a partial last step risks the OpenCL CPU backend
    crash row_group_size avoids). Against one element an access, pairs in the
    normalizing pass made bf16 rmsnorm 15-16 % and the fused add 6-13 % faster at
    256-4096 tokens; pairs in the sum of squares too, a further 5-10 % for
    rmsnorm. They change the order each work-item sums in, so the last bit of
    an output can differ from that of one element an access (as the gpu tuning's
    wider vectors do). qknorm (16 work-items a head): 0.95-0.98x. fp16 keeps one
    element: its pairs were 12 % slower in the normalizing pass, 3.7-4.6x in both.
    Otherwise vec_width.
    """
    pairs = (
        tuned_for == "cpu"
        and dtype.short_name == "bf16"
        and hidden % 2 == 0
        and (hidden // 2) % threads == 0
    )
    return 2 if pairs else vec_width(dtype, tuned_for)


@functools.cache
def rmsnorm_spec(
    dtype: DType, hidden: int, tuned_for: str, gemma: bool = False, weight: str = "dtype"
) -> KernelSpec:
    t = dtype.cpp_type
    params = (
        Param("x", f"const {t}*"),
        *leading_row_params("x"),
        Param("weight", f"const {norm_weight(dtype, weight)[0]}*"),
        Param("out", f"{t}*"),
        *leading_row_params("out"),
        Param("middle_size", "int64_t"),
        Param("inner_size", "int64_t"),
        Param("eps", "float"),
    )
    return _row_norm_spec("rmsnorm", dtype, hidden, tuned_for, gemma, weight, params)


@functools.cache
def fused_add_rmsnorm_spec(
    dtype: DType,
    hidden: int,
    tuned_for: str,
    gemma: bool = False,
    weight: str = "dtype",
    rounded_sum: bool = True,
) -> KernelSpec:
    t = dtype.cpp_type
    params = (
        Param("x", f"{t}*"),
        *leading_row_params("x"),
        Param("residual", f"{t}*"),
        *leading_row_params("residual"),
        Param("weight", f"const {norm_weight(dtype, weight)[0]}*"),
        Param("middle_size", "int64_t"),
        Param("inner_size", "int64_t"),
        Param("eps", "float"),
    )
    # float32 rows: the two sums are the same number, so one kernel serves both.
    rounded_sum = rounded_sum or dtype.size == 4
    return _row_norm_spec(
        "fused_add_rmsnorm",
        dtype,
        hidden,
        tuned_for,
        gemma,
        weight,
        params,
        extra_template_args=(str(rounded_sum).lower(),),
        extra_suffix="" if rounded_sum else "_floatsum",
    )


def qknorm_group_size(dtype: DType, head_dim: int, tuned_for: str) -> int:
    """Work-items of a qknorm work-group.

    cpu: 16, one SIMD vector of the CPU device, or the largest power of two below it
    that divides head_dim (a partial last step risks the OpenCL CPU backend crash
    row_group_size avoids). Heads of 128, against row_group_size's 128 work-items
    (compare.py, CPU time): 32 took 0.63-0.97x, 16 a further 0.86-0.96x, 8 2.5-5x
    more (below the vector width).
    gpu: row_group_size.
    """
    if tuned_for == "cpu":
        return math.gcd(head_dim, 16)
    return row_group_size(dtype, head_dim, tuned_for)


def qknorm_heads_per_group(tuned_for: str) -> int:
    """Heads one qknorm work-group normalizes, one after another.

    cpu: 4. A head (64 to 256 elements) is little work for a work-group there:
    4096 x (32+8) heads of 128 fp32 took 6.4 ms at one head a group, 5.0 ms at 4,
    5.8 ms at 2 and 7.0-7.7 ms at 8 to 32 (bf16: 7.8 ms, within 9 % at every count),
    with 128 work-items a group; with 32, 8 heads measured as 4.
    gpu: 1, a work-group per head.
    """
    return 4 if tuned_for == "cpu" else 1


@functools.cache
def qknorm_spec(
    dtype: DType, head_dim: int, tuned_for: str, gemma: bool = False, weight: str = "dtype"
) -> KernelSpec:
    t = dtype.cpp_type
    weight_type, weight_suffix = norm_weight(dtype, weight)
    threads = qknorm_group_size(dtype, head_dim, tuned_for)
    rows = tuple(
        p
        for name in ("q", "k")
        for p in (
            Param(name, f"{t}*"),
            *leading_row_params(name),
            Param(f"{name}_middle_size", "int64_t"),
            Param(f"{name}_inner_size", "int64_t"),
            *((Param("q_rows", "int64_t"),) if name == "q" else ()),
        )
    )
    return KernelSpec(
        name=(
            f"{'gemma_' if gemma else ''}qknorm_{dtype.short_name}_d{head_dim}_{tuned_for}"
            f"{weight_suffix}"
        ),
        header="norm/qknorm.hpp",
        function="sycl_kernels::qknorm",
        template_args=(
            t,
            weight_type,
            str(head_dim),
            str(threads),
            str(norm_vec_width(dtype, head_dim, threads, tuned_for)),
            str(gemma).lower(),
            str(qknorm_heads_per_group(tuned_for)),
        ),
        params=(
            *rows,
            Param("q_weight", f"const {weight_type}*"),
            Param("k_weight", f"const {weight_type}*"),
            Param("eps", "float"),
            Param("rows", "int64_t"),
        ),
        group_size=threads,
    )


# The manifest's norm tables (kernels/variants.toml): a dtype by its short name.


@manifest_op("rmsnorm")
def _rmsnorm_variant(dtype: str, hidden: int, tuned_for: str) -> KernelSpec:
    return rmsnorm_spec(BY_NAME[dtype], hidden, tuned_for)


@manifest_op("gemma_rmsnorm")
def _gemma_rmsnorm_variant(dtype: str, hidden: int, tuned_for: str) -> KernelSpec:
    return rmsnorm_spec(BY_NAME[dtype], hidden, tuned_for, gemma=True)


@manifest_op("fused_add_rmsnorm")
def _fused_add_rmsnorm_variant(
    dtype: str, hidden: int, tuned_for: str, rounded_sum: bool = True
) -> KernelSpec:
    return fused_add_rmsnorm_spec(BY_NAME[dtype], hidden, tuned_for, rounded_sum=rounded_sum)


@manifest_op("gemma_fused_add_rmsnorm")
def _gemma_fused_add_rmsnorm_variant(
    dtype: str, hidden: int, tuned_for: str, rounded_sum: bool = True
) -> KernelSpec:
    return fused_add_rmsnorm_spec(
        BY_NAME[dtype], hidden, tuned_for, gemma=True, rounded_sum=rounded_sum
    )


@manifest_op("qknorm")
def _qknorm_variant(dtype: str, head_dim: int, tuned_for: str, gemma: bool = False) -> KernelSpec:
    return qknorm_spec(BY_NAME[dtype], head_dim, tuned_for, gemma)
