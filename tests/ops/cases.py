"""Each op's test inputs for the suite-wide tests, registered by the op's own test file.

An op's test file (tests/ops/test_<op>.py) calls `register` with
- its bad inputs, an OpCase: valid arguments and, for each argument, the wrong values
  it must reject; tests/ops/test_bad_inputs.py runs every one through every entry point;
- its opcheck samples: valid calls of the custom ops it defines (``<op>`` and
  ``<op>_out``); tests/ops/test_library.py opchecks each;
- its run-once case, a call against its reference in each dtype at a size no
  manifest variant has; tests/ops/test_every_op_once.py runs it (on every runtime
  line, .ci/runtime-line). Every op's is registered here, by its family's test file.

So a new op joins all three with its test file alone. The readers call `load()`, which
imports every test file of tests/ops: whichever files pytest was given, the tables
are whole.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import sycl_kernels
import torch

from tests import references

# Each kind of wrong tensor: how to make it from a valid one, and the error it must raise.
TENSOR_MUTATIONS: dict[str, tuple[Callable[[torch.Tensor], object], type[Exception]]] = {
    "not_a_tensor": (lambda t: t.tolist(), TypeError),
    "meta_device": (lambda t: t.to("meta"), ValueError),
    "sparse": (lambda t: t.to_sparse(), ValueError),
    "int32": (lambda t: t.to(torch.int32), TypeError),
    "float16": (lambda t: t.to(torch.float16), TypeError),
    "float32": (lambda t: t.to(torch.float32), TypeError),
    "float64": (lambda t: t.to(torch.float64), TypeError),
    "bool": (lambda t: t.to(torch.bool), TypeError),
    "complex": (lambda t: t.to(torch.complex64), TypeError),
    "extra_dim": (lambda t: t.unsqueeze(0), ValueError),
    "missing_dim": (lambda t: t[0], ValueError),
    "zero_dim": (lambda t: t.reshape(-1)[0], ValueError),
    "last_dim_plus_one": (lambda t: torch.cat([t, t[..., :1]], -1), ValueError),
    "last_stride_2": (lambda t: torch.stack([t, t], -1)[..., 0], ValueError),
    "overlapping_rows": (lambda t: t[:1].expand(t.shape), ValueError),
    "spread_heads": (lambda t: torch.cat([t, t], -1)[..., : t.shape[-1]], ValueError),
    "index_too_large": (lambda t: torch.full_like(t, 10**6), IndexError),
    "index_negative": (lambda t: torch.full_like(t, -2), IndexError),
}

# Kinds every tensor argument rejects, and those of a float tensor.
COMMON = "not_a_tensor meta_device sparse"
FLOAT = f"{COMMON} int32 float64"
# Wrong values of a float argument, of a non-negative one, of a bool one.
NOT_A_NUMBER = [("1e-6", TypeError), (None, TypeError), (True, TypeError)]
NON_NEGATIVE = [*NOT_A_NUMBER, (-1.0, ValueError), (math.nan, ValueError)]
BOOL = [(None, TypeError), (1, TypeError)]

# Kinds shared by the ops of several test files: a norm's weight, heads (which may
# have any strides but the last: a padded head layout is valid), rope's tensors.
NORM_WEIGHT = f"{FLOAT} extra_dim zero_dim last_dim_plus_one last_stride_2"
HEADS = f"{FLOAT} zero_dim last_dim_plus_one last_stride_2 overlapping_rows"
KV_CACHE = f"{FLOAT} extra_dim missing_dim last_dim_plus_one last_stride_2 overlapping_rows"
INDEX = f"{COMMON} float32 extra_dim zero_dim last_dim_plus_one last_stride_2 index_too_large"
ROPE_TENSORS = {
    # Any strides, and a 0-d tensor broadcasts: one position for every token.
    "positions": f"{COMMON} float32 extra_dim last_dim_plus_one index_too_large index_negative",
    "q": f"{HEADS} missing_dim",
    "k": f"{HEADS} extra_dim missing_dim",
    "cos_sin_cache": f"{COMMON} float16 float64 extra_dim missing_dim last_stride_2",
    "v": f"{FLOAT} zero_dim extra_dim missing_dim last_dim_plus_one last_stride_2",
    "k_cache": KV_CACHE,
    "v_cache": KV_CACHE,
    "out_loc": f"{INDEX} int32",
}


def rope_args() -> dict[str, object]:
    """Valid apply_rope arguments, the KV store included (qknorm_rope's start from them)."""
    return {
        "positions": torch.arange(5),
        "q": torch.randn(5, 4, 64),
        "k": torch.randn(5, 2, 64),
        "cos_sin_cache": references.rope_cache(16, 64),
        "is_neox": True,
        "rotary_dim": 64,
        "v": torch.randn(5, 2, 64),
        "k_cache": torch.zeros(8, 2, 64),
        "v_cache": torch.zeros(8, 2, 64),
        "out_loc": torch.tensor([0, 3, -1, 7, 1]),
    }


@dataclass
class OpCase:
    name: str
    make_args: Callable[[], dict[str, object]]
    """Valid arguments, by name, made afresh for each call."""
    tensors: dict[str, str]
    """Argument -> the TENSOR_MUTATIONS kinds that must be rejected, space separated."""
    scalars: dict[str, list[tuple[object, type[Exception]]]] = field(default_factory=dict)
    """Argument -> (wrong value, the error it must raise)."""

    def call(self, args: dict[str, object]) -> object:
        return getattr(sycl_kernels, self.name)(**args)


OpcheckSamples = Callable[[], list[tuple[str, tuple]]]
"""() -> (custom op name, arguments in schema order) for each call to opcheck."""


@dataclass(frozen=True)
class OnceCase:
    run: Callable[[Callable[..., object], torch.dtype], None]
    """(the op, a dtype) -> calls the op once and checks it against its reference."""
    dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)


_BAD_INPUTS: dict[str, OpCase] = {}
_OPCHECK: list[OpcheckSamples] = []
_ONCE: dict[str, OnceCase] = {}


def register(
    *bad_inputs: OpCase,
    opcheck: OpcheckSamples | None = None,
    once: dict[str, OnceCase] | None = None,
) -> None:
    """Adds an op's bad inputs (an OpCase per public op), opcheck samples and run-once
    cases (by public op name)."""
    for name in once or {}:
        if name in _ONCE:
            raise ValueError(f"{name}: a run-once case registered twice")
    _ONCE.update(once or {})
    for case in bad_inputs:
        unknown = {k for kinds in case.tensors.values() for k in kinds.split()}
        unknown -= set(TENSOR_MUTATIONS)
        if unknown:
            raise ValueError(f"{case.name}: no tensor mutations {sorted(unknown)}")
        if case.name in _BAD_INPUTS:
            raise ValueError(f"{case.name}: bad inputs registered twice")
        _BAD_INPUTS[case.name] = case
    if opcheck is not None:
        _OPCHECK.append(opcheck)


def load() -> None:
    """Imports every test file of this folder, so that each has registered its op's
    inputs. A file being imported (the reader's own) is returned half-done by import:
    the readers register nothing."""
    package = __name__.rpartition(".")[0]
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        importlib.import_module(f"{package}.{path.stem}")


def bad_input_cases() -> list[OpCase]:
    """Every registered OpCase, by op name."""
    load()
    return [_BAD_INPUTS[name] for name in sorted(_BAD_INPUTS)]


def bad_input_case(name: str) -> OpCase:
    load()
    return _BAD_INPUTS[name]


def opcheck_samples() -> list[tuple[str, tuple]]:
    """Every registered opcheck sample, by custom op name (each op's in its order)."""
    load()
    samples = [sample for make in _OPCHECK for sample in make()]
    return sorted(samples, key=lambda sample: sample[0])


def once_cases() -> dict[str, OnceCase]:
    """Every registered run-once case, by op name."""
    load()
    return dict(_ONCE)
