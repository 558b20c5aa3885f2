"""sycl_kernels.specs.spec: one compiled kernel and the translation unit exporting it."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path, PurePosixPath

from .._dtypes import DTYPES, QUANT_DTYPES, DType

# gpu: 256 work-items of 16-byte vectors cover 4 KB of a row per pass, within the
# maximum work-group size of every Intel GPU (512 or 1024).
_MAX_ROW_GROUP_SIZE = 256
# cpu: half the OpenCL CPU device's maximum work-group size (8192); with at most 32
# unrolled steps a work-item, rows of up to 32 x 4096 elements are covered.
_MAX_CPU_GROUP_SIZE = 4096

# Kernel parameter C types -> the letter the host module's launcher converts by.
_SIGNATURE_LETTERS = {"int32_t": "i", "int64_t": "l", "float": "f", "double": "d"}
# What a pointer parameter may point to: the dtype tables' element types, plain
# integers and floats (index tensors), and the norms' absent weight
# (kernels/norm/rmsnorm.hpp: a null pointer never read).
_POINTEES = tuple(
    dict.fromkeys(
        (
            *(d.cpp_type for d in (*DTYPES, *QUANT_DTYPES)),
            "sycl_kernels::NoWeight",
            *(f"{s}int{bits}_t" for s in ("", "u") for bits in (8, 16, 32, 64)),
            "float",
            "double",
            "void",
        )
    )
)
_PARAM_TYPES = {
    **_SIGNATURE_LETTERS,
    **{f"{const}{t}*": "p" for const in ("", "const ") for t in _POINTEES},
}

# Every field of a spec ends up in generated C++ source or in a cache path, and spec
# files and bundles come from outside: each field has a grammar, checked at
# construction, so no entry point can hand the compiler or the cache anything else.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_QUALIFIED = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
_HEADER_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", re.ASCII)
# No newline, '#', quotes, backslash, '/', ';' or braces: an argument cannot start a
# directive, a comment, a string or a statement.
TEMPLATE_ARGUMENT = re.compile(r"[A-Za-z0-9_:.+\-*<>(), ]+", re.ASCII)


def _check(value: object, grammar: re.Pattern[str], field: str, expected: str) -> None:
    if not (isinstance(value, str) and grammar.fullmatch(value)):
        raise ValueError(f"{field} {value!r} is not {expected}")


def check_header(header: object, field: str = "header") -> None:
    """A header is a relative path below an include folder: never absolute, never '..'."""
    parts = PurePosixPath(header).parts if isinstance(header, str) else ()
    if not parts or not all(_HEADER_PART.fullmatch(part) for part in parts):
        raise ValueError(
            f"{field} {header!r} is not a relative path below the kernels folder "
            "(letters, digits, '_', '.', '-' and '/'; no '..', no leading '/' or '.')"
        )


@dataclass(frozen=True)
class Param:
    name: str
    ctype: str

    def __post_init__(self) -> None:
        _check(self.name, _IDENTIFIER, "parameter name", "an identifier")
        if self.ctype not in _PARAM_TYPES:
            raise ValueError(
                f"parameter {self.name!r} has type {self.ctype!r}; kernel parameters are "
                f"{', '.join(_SIGNATURE_LETTERS)} or a pointer to one of "
                f"{', '.join(_POINTEES)} (optionally const)"
            )

    @property
    def letter(self) -> str:
        return _PARAM_TYPES[self.ctype]


@dataclass(frozen=True)
class KernelSpec:
    """One extern "C" kernel: `name` calls `function<template_args...>(params...)` from `header`.

    `name` encodes every template argument (e.g. rmsnorm_bf16_h4096) and keys every cache.
    """

    name: str
    header: str
    function: str
    template_args: tuple[str, ...]
    params: tuple[Param, ...]
    group_size: int | None = None
    """Required work-group size, when the kernel is compiled for one; launches must use it."""
    sub_group_size: int | None = None
    """Required sub-group size, for a kernel whose work-items share values across one
    (16: every Intel GPU and the CPU device have it)."""

    def __post_init__(self) -> None:
        _check(self.name, _IDENTIFIER, "kernel name", "an identifier")
        check_header(self.header)
        _check(self.function, _QUALIFIED, "function", "a qualified identifier")
        for field, values, kind in (
            ("template_args", self.template_args, str),
            ("params", self.params, Param),
        ):
            if not (isinstance(values, tuple) and all(isinstance(v, kind) for v in values)):
                raise ValueError(f"{field} {values!r} is not a tuple of {kind.__name__}")
        for arg in self.template_args:
            _check(
                arg,
                TEMPLATE_ARGUMENT,
                "template argument",
                "made of letters, digits, spaces and _ : . + - * < > ( ) ,",
            )
        names = [p.name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"params name a parameter twice: {', '.join(names)}")
        if self.group_size is not None and (
            type(self.group_size) is not int or not 0 < self.group_size <= 1 << 16
        ):
            raise ValueError(f"group_size {self.group_size!r} is not a work-group size")
        if self.sub_group_size is not None and self.sub_group_size not in (8, 16, 32):
            raise ValueError(f"sub_group_size {self.sub_group_size!r} is not 8, 16 or 32")

    @property
    def signature(self) -> str:
        return "".join(p.letter for p in self.params)

    def translation_unit(self) -> str:
        """The source that exports this one kernel; AOT and JIT both compile exactly this."""
        params = ", ".join(f"{p.ctype} {p.name}" for p in self.params)
        args = ", ".join(p.name for p in self.params)
        template = f"<{', '.join(self.template_args)}>" if self.template_args else ""
        properties = ["nd_range_kernel<1>"]
        if self.group_size is not None:
            properties.append(f"work_group_size<{self.group_size}>")
        if self.sub_group_size is not None:
            properties.append(f"sub_group_size<{self.sub_group_size}>")
        return (
            f"// {self.name}: generated by sycl_kernels.specs.spec\n"
            f'#include "{self.header}"\n'
            "\n"
            'extern "C"\n'
            + "".join(
                f"SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::{p}))\n"
                for p in properties
            )
            + f"void {self.name}({params}) {{\n"
            f"  {self.function}{template}({args});\n"
            "}\n"
        )


_SPECS_FORMAT = {"format": "sycl-kernels specs", "version": 1}


# A spec list names at most a few thousand kernels of a few hundred bytes each.
MAX_SPECS_BYTES = 16 << 20
_SPEC_FIELDS = {f.name for f in fields(KernelSpec)}


def write_specs(path: str | os.PathLike, specs: Iterable[KernelSpec]) -> None:
    """Writes `specs` as JSON (for read_specs and `precompile --specs`), replacing the file
    whole: a reader never sees a half-written one."""
    from ..jit.cache import staged

    path = Path(path)
    document = {**_SPECS_FORMAT, "specs": [asdict(spec) for spec in specs]}
    with staged(path, f".{path.name}.") as f:
        f.write(json.dumps(document, indent=1).encode())


def _spec_from(record: object) -> KernelSpec:
    if not isinstance(record, dict) or set(record) - _SPEC_FIELDS:
        raise ValueError(f"a spec has the fields {', '.join(sorted(_SPEC_FIELDS))}")
    params = record.get("params")
    if not isinstance(params, list) or not all(isinstance(p, dict) for p in params):
        raise ValueError("params is not a list of {name, ctype}")
    args = record.get("template_args")
    return KernelSpec(
        **{
            **record,
            "template_args": tuple(args) if isinstance(args, list) else args,
            "params": tuple(Param(**param) for param in params),
        }
    )


def read_specs(path: str | os.PathLike) -> list[KernelSpec]:
    """The specs write_specs wrote to `path`; ValueError naming the file, and the spec
    and field at fault, if it holds anything else."""
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_SPECS_BYTES + 1)
        if len(text) > MAX_SPECS_BYTES:
            raise ValueError(f"larger than {MAX_SPECS_BYTES >> 20} MiB")
        document = json.loads(text)
        if not isinstance(document, dict) or not isinstance(document.get("specs"), list):
            raise ValueError("no list of specs")
        if {k: document.get(k) for k in _SPECS_FORMAT} != _SPECS_FORMAT:
            raise ValueError(f"not a {_SPECS_FORMAT['format']} file, version 1")
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{path}: not a kernel spec list ({e})") from None
    specs = []
    for index, record in enumerate(document["specs"]):
        try:
            specs.append(_spec_from(record))
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path}: not a kernel spec list (spec {index}: {e})") from None
    return specs


_ROW_DIMENSIONS = ("outer", "middle", "inner")


def leading_row_params(tensor: str) -> tuple[Param, ...]:
    """The strides of a tensor's three leading dimensions (kernels/common/rows.hpp)."""
    return tuple(Param(f"{tensor}_{dim}", "int64_t") for dim in _ROW_DIMENSIONS)


def leading_row_values(tensor: str, strides: tuple[int, ...]) -> dict[str, int]:
    """The values of leading_row_params(tensor), by name."""
    return {f"{tensor}_{dim}": s for dim, s in zip(_ROW_DIMENSIONS, strides, strict=True)}


# The device classes kernels are tuned for (kernels/common/vec.hpp); _runtime.tuning_of
# picks one per tensor.
TUNINGS = ("cpu", "gpu")


def vec_width(dtype: DType, tuned_for: str, *, cpu_pairs: bool = False) -> int:
    """Elements a work-item moves per access (kernels/common/vec.hpp says why).

    gpu: one 16-byte vector. cpu: one element, or with cpu_pairs one 32-bit SIMD
    lane (a pair of 2-byte elements), which made the gated activations faster
    (specs/norm.py norm_vec_width gives the bf16 row norms pairs too).
    """
    if tuned_for == "gpu":
        return 16 // dtype.size
    return 4 // dtype.size if cpu_pairs else 1


def row_group_size(
    dtype: DType, row_length: int, tuned_for: str, *, min_cpu_threads: int = 256
) -> int:
    """Work-items for a kernel that gives one work-group to each row of `row_length`.

    gpu: one per 16-byte vector, rounded up to a power of two, at most 256.
    cpu: a power of two, at least min_cpu_threads (or the row length) and enough
    that each work-item's fully unrolled loop has at most 32 steps; longer loops
    bloat the code (measured 10x slower at 128 steps). When the row is not a
    multiple of it, a half or quarter that divides the row is taken instead: the
    partial last step made the OpenCL CPU backend crash on some sizes (1152
    half/bf16 Gemma RMSNorm with 256 work-items).
    """
    if tuned_for == "cpu":
        floor = min(min_cpu_threads, _pow2_at_least(row_length))
        enough = max(_pow2_at_least(row_length // 32), floor)
        threads = min(_MAX_CPU_GROUP_SIZE, enough)
        for smaller in (threads // 2, threads // 4):
            if row_length % threads and smaller >= 64 and row_length % smaller == 0:
                return smaller if row_length // smaller <= 32 else threads
        return threads
    vectors = max(1, row_length * dtype.size // 16)
    return min(_MAX_ROW_GROUP_SIZE, _pow2_at_least(vectors))


def _pow2_at_least(n: int) -> int:
    return 1 << (max(1, n) - 1).bit_length()
