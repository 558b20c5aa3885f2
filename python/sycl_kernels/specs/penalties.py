"""sycl_kernels.specs.penalties: specs of the logit penalties and the top-k mask
(kernels/sampling/penalty.hpp, kernels/sampling/top_k_mask.hpp)."""

from __future__ import annotations

import functools

from .._dtypes import DType
from .spec import KernelSpec, Param

# Elements a work-group of apply_penalties covers (a row's tiles are work-groups: a
# batch of one still spreads over the device).
PENALTY_TILE = 4096
# The top-k mask's tile: a work-group per row walks it in tiles of this many.
TOP_K_TILE = 1024
# Ids a work-group of repetition_penalty_by_ids reads, one a work-item.
IDS_PER_GROUP = 64

# Index element types by their short names (masks, counts, ids, top-k values).
INDEX_TYPES = {"u8": "uint8_t", "i32": "int32_t", "i64": "int64_t"}


def _threads(tuned_for: str) -> int:
    """Work-items of a tile's work-group: cpu 16 (one SIMD vector: consecutive
    elements on consecutive lanes), gpu 256."""
    return 16 if tuned_for == "cpu" else 256


def _penalty_params(name: str, p: str) -> tuple[Param, ...]:
    return (
        Param(f"{name}_penalties", f"const {p}*"),
        Param(f"{name}_stride", "int64_t"),
        Param(f"{name}_penalty", "float"),
    )


@functools.cache
def apply_penalties_spec(
    dtype: DType,
    penalty_dtype: DType,
    prompt: bool,
    output: str | None,
    tuned_for: str,
) -> KernelSpec:
    """Penalties in place on `dtype` logits: penalty tensors of penalty_dtype, a prompt
    mask (`prompt`), an output mask or count tensor (`output`: u8, i32, i64 or None)."""
    threads = _threads(tuned_for)
    c = INDEX_TYPES["u8" if output is None else output]
    prompt_part = "_prompt" if prompt else ""
    output_part = f"_out{output}" if output else ""
    return KernelSpec(
        name=(
            f"apply_penalties_{dtype.short_name}_p{penalty_dtype.short_name}{prompt_part}"
            f"{output_part}_{tuned_for}"
        ),
        header="sampling/penalty.hpp",
        function="sycl_kernels::apply_penalties",
        template_args=(
            dtype.cpp_type,
            penalty_dtype.cpp_type,
            c,
            str(prompt).lower(),
            str(output is not None).lower(),
            str(PENALTY_TILE),
            str(threads),
        ),
        params=(
            Param("logits", f"{dtype.cpp_type}*"),
            Param("logits_stride", "int64_t"),
            Param("vocab", "int64_t"),
            Param("tiles", "int64_t"),
            Param("prompt_mask", "const uint8_t*"),
            Param("prompt_mask_stride", "int64_t"),
            Param("output", f"const {c}*"),
            Param("output_stride", "int64_t"),
            *_penalty_params("repetition", penalty_dtype.cpp_type),
            *_penalty_params("frequency", penalty_dtype.cpp_type),
            *_penalty_params("presence", penalty_dtype.cpp_type),
        ),
        group_size=threads,
    )


@functools.cache
def repetition_penalty_by_ids_spec(
    dtype: DType, penalty_dtype: DType, ids: str, tuned_for: str
) -> KernelSpec:
    """Hugging Face's repetition penalty of the listed ids (`ids`: i32 or i64)."""
    i = INDEX_TYPES[ids]
    return KernelSpec(
        name=(
            f"repetition_penalty_by_ids_{dtype.short_name}_p{penalty_dtype.short_name}_{ids}"
            f"_{tuned_for}"
        ),
        header="sampling/penalty.hpp",
        function="sycl_kernels::repetition_penalty_by_ids",
        template_args=(dtype.cpp_type, penalty_dtype.cpp_type, i, str(IDS_PER_GROUP)),
        params=(
            Param("logits", f"const {dtype.cpp_type}*"),
            Param("logits_stride", "int64_t"),
            Param("input_ids", f"const {i}*"),
            Param("ids_stride", "int64_t"),
            Param("num_ids", "int64_t"),
            Param("id_tiles", "int64_t"),
            Param("vocab", "int64_t"),
            *_penalty_params("repetition", penalty_dtype.cpp_type),
            Param("out", f"{dtype.cpp_type}*"),
            Param("out_stride", "int64_t"),
        ),
        group_size=IDS_PER_GROUP,
    )


@functools.cache
def top_k_mask_logits_spec(dtype: DType, top_ks: str, tuned_for: str) -> KernelSpec:
    """The top-k mask of `dtype` logits, per-row k of `top_ks` (i32 or i64) or a scalar."""
    threads = _threads(tuned_for)
    i = INDEX_TYPES[top_ks]
    return KernelSpec(
        name=f"top_k_mask_logits_{dtype.short_name}_k{top_ks}_{tuned_for}",
        header="sampling/top_k_mask.hpp",
        function="sycl_kernels::top_k_mask_logits",
        template_args=(dtype.cpp_type, i, str(TOP_K_TILE), str(threads)),
        params=(
            Param("logits", f"const {dtype.cpp_type}*"),
            Param("logits_stride", "int64_t"),
            Param("vocab", "int64_t"),
            Param("top_ks", f"const {i}*"),
            Param("top_ks_stride", "int64_t"),
            Param("top_k", "int64_t"),
            Param("out", f"{dtype.cpp_type}*"),
            Param("out_stride", "int64_t"),
        ),
        group_size=threads,
    )
