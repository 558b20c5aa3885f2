"""sycl_kernels.specs.quant: specs of the quantizing kernels (kernels/quant/quantize.hpp)."""

from __future__ import annotations

import enum
import functools

from .._dtypes import BY_NAME, QUANT_BY_NAME, DType, QuantDType
from .activation import ACTIVATION_CPU_THREADS
from .norm import norm_weight
from .spec import KernelSpec, Param, leading_row_params, row_group_size, vec_width
from .variants import manifest_op


class Producer(str, enum.Enum):
    """What a row's values are made from (kernels/quant/quantize.hpp); its value names
    the kernel and the manifest's table (``<value>_quantize``, or ``quantize`` for X)."""

    X = "x"
    RMSNORM = "rmsnorm"  # rmsnorm(x)
    FUSED_ADD_RMSNORM = "fused_add_rmsnorm"  # rmsnorm(x + residual), the sum stored
    SILU_AND_MUL = "silu_and_mul"  # silu(gate) * up, the halves of x's rows

    @property
    def normalizes(self) -> bool:
        return self in (Producer.RMSNORM, Producer.FUSED_ADD_RMSNORM)


# The parameters every quantizing kernel ends with (SYCL_KERNELS_QUANT_PARAMS).
_SCALE_PARAMS = (
    Param("scales", "float*"),
    Param("rows_per_scale", "int64_t"),
    Param("scale_row_stride", "int64_t"),
    Param("scale_group_stride", "int64_t"),
    Param("scale_ub", "const float*"),
    Param("scale_min", "float"),
    Param("middle_size", "int64_t"),
    Param("inner_size", "int64_t"),
)


# Work-items that share a dynamic group smaller than the row: one sub-group
# (kernels/quant/quantize.hpp kLanes).
GROUP_LANES = 16


def quant_threads(
    dtype: DType, hidden: int, group: int, tuned_for: str, *, min_cpu_threads: int = 256
) -> tuple[int, int]:
    """(work-items of a row's work-group, elements each moves per access) for a row of
    `hidden` with scales per `group` values, a multiple of GROUP_LANES (hidden: one
    scale a row, or groups that are not).

    One scale a row: the row kernels' (row_group_size, vec_width; min_cpu_threads as
    row_group_size's: an activation's, whose unrolled copies of exp cost). Smaller groups: a
    sub-group of GROUP_LANES work-items each, up to 256 work-items (16 groups at once);
    cpu, an element an access; gpu, the widest vector that splits the group evenly over
    the lanes. On the CPU device, 4096 x 4096 bf16 in groups of 128 took 15-24 ms with
    a work-group of 16 or 128 work-items taking the groups one after another, each
    group's maximum reduced across the work-group.
    """
    vec = vec_width(dtype, tuned_for)
    if group == hidden:
        threads = row_group_size(dtype, hidden, tuned_for, min_cpu_threads=min_cpu_threads)
        return threads, vec if hidden % vec == 0 else 1
    while group % (GROUP_LANES * vec):
        vec //= 2
    lanes = (hidden // group) * GROUP_LANES
    return min(256, 1 << (lanes - 1).bit_length()), vec


@functools.cache
def quantize_spec(
    producer: Producer,
    dtype: DType,
    qdtype: QuantDType,
    hidden: int,
    group: int,
    tuned_for: str,
    dynamic: bool,
    ue8m0: bool = False,
    truncate: bool = False,
    weight: str = "dtype",
    rounded: bool = True,
) -> KernelSpec:
    """The kernel quantizing rows of `hidden` values made by `producer` from `dtype`
    tensors, a scale per `group` values (group == hidden: one a row); dynamic: computed
    (rounded up to a power of two with ue8m0), else given; truncate: int8 rounded toward
    zero; weight: rmsnorm's weight kind; rounded: silu(gate) * up rounded as torch does."""
    producer = Producer(producer)
    if group < 1 or hidden % group:
        raise ValueError(f"group {group} does not divide the row of {hidden}")
    t = dtype.cpp_type
    ue8m0 = ue8m0 and dynamic
    truncate = truncate and qdtype.short_name == "i8"
    grouped = group < hidden and group % GROUP_LANES == 0
    if dynamic and group < hidden and not grouped:
        raise ValueError(f"dynamic groups of {group}: expected a multiple of {GROUP_LANES}")
    # silu: the gated activations' work-items on the CPU device (specs/activation.py):
    # 16 unrolled steps of silu a work-item took 1.4-2.1x the time of 4 (4096 x 4096).
    min_cpu_threads = ACTIVATION_CPU_THREADS if producer is Producer.SILU_AND_MUL else 256
    threads, vec = quant_threads(
        dtype, hidden, group if grouped else hidden, tuned_for, min_cpu_threads=min_cpu_threads
    )
    if group % vec:
        vec = 1
    common = (qdtype.cpp_type, str(hidden), str(group), str(threads), str(vec))
    flags = tuple(str(f).lower() for f in (dynamic, ue8m0, truncate))
    suffix = "_trunc" if truncate else ""
    out = (Param("out", f"{qdtype.cpp_type}*"), *leading_row_params("out"), *_SCALE_PARAMS)
    if producer is Producer.X:
        function = "quantize"
        params = (Param("x", f"const {t}*"), *leading_row_params("x"), *out)
        template_args = (t, *common, *flags)
    elif producer is Producer.SILU_AND_MUL:
        function = "silu_and_mul_quantize"
        params = (
            tuple(
                p
                for name in ("gate", "up")
                for p in (Param(name, f"const {t}*"), *leading_row_params(name))
            )
            + out
        )
        rounded = rounded and dtype.size < 4
        template_args = (t, *common, *flags, str(rounded).lower())
        suffix += "" if rounded or dtype.size == 4 else "_float"
    else:
        function = "rmsnorm_quantize"
        weight_type, weight_suffix = norm_weight(dtype, weight)
        params = (
            Param("x", f"const {t}*"),
            *leading_row_params("x"),
            Param("residual", f"{t}*"),
            *leading_row_params("residual"),
            Param("weight", f"const {weight_type}*"),
            Param("eps", "float"),
            *out,
        )
        fused_add = str(producer is Producer.FUSED_ADD_RMSNORM).lower()
        template_args = (t, weight_type, *common, *flags, fused_add)
        suffix += weight_suffix
    mode = ("dynamic_ue8m0" if ue8m0 else "dynamic") if dynamic else "static"
    group_name = "row" if group == hidden else f"g{group}"
    prefix = "" if producer is Producer.X else f"{producer.value}_"
    return KernelSpec(
        name=(
            f"{prefix}quantize_{dtype.short_name}_{qdtype.short_name}_h{hidden}_{group_name}"
            f"_{mode}_{tuned_for}{suffix}"
        ),
        header="quant/quantize.hpp",
        function=f"sycl_kernels::{function}",
        template_args=template_args,
        params=params,
        group_size=threads,
        sub_group_size=GROUP_LANES if grouped else None,
    )


@functools.cache
def absmax_scale_spec(dtype: DType, qdtype: QuantDType, hidden: int, tuned_for: str) -> KernelSpec:
    """The first kernel of dynamic per-tensor quantization: the scale into scales[0]."""
    threads, vec = quant_threads(dtype, hidden, hidden, tuned_for)
    return KernelSpec(
        name=f"absmax_scale_{dtype.short_name}_{qdtype.short_name}_h{hidden}_{tuned_for}",
        header="quant/quantize.hpp",
        function="sycl_kernels::absmax_scale",
        template_args=(dtype.cpp_type, qdtype.cpp_type, str(hidden), str(threads), str(vec)),
        params=(
            Param("x", f"const {dtype.cpp_type}*"),
            *leading_row_params("x"),
            Param("scales", "float*"),
            Param("scale_ub", "const float*"),
            Param("scale_min", "float"),
            Param("middle_size", "int64_t"),
            Param("inner_size", "int64_t"),
        ),
        group_size=threads,
    )


def _quantize_variant(
    producer: Producer,
    dtype: str,
    qdtype: str,
    hidden: int,
    group: int,
    tuned_for: str,
    dynamic: bool = True,
) -> KernelSpec:
    return quantize_spec(
        producer, BY_NAME[dtype], QUANT_BY_NAME[qdtype], hidden, group or hidden, tuned_for, dynamic
    )


# The manifest's [quantize] and [<producer>_quantize] tables (kernels/variants.toml);
# group 0 is one scale a row.
for _producer in Producer:
    _table = "quantize" if _producer is Producer.X else f"{_producer.value}_quantize"
    manifest_op(_table)(functools.partial(_quantize_variant, _producer))
