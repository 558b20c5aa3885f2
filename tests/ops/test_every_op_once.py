"""Every public op, run once in each dtype it takes, against its float64 reference.

The ops are the package's own list: sycl_kernels.ops.__all__, and any other name
sycl_kernels exports that is a custom op (torch.ops.sycl_kernels.<name>). Each op's
case is registered by its family's test file, tests/ops/test_<family>.py
(`cases.register(once=...)` in tests/ops/cases.py, as `python -m sycl_kernels new-op`
writes it). An exported op without a case fails (test_every_exported_op_has_a_case,
and its own test); one registered twice fails at registration. A case is given the op
to call, looked up by the exported name, so it cannot check another op by mistake.

The cases take sizes kernels/variants.toml does not bundle: on an empty kernel cache
each (op, dtype) is JIT-compiled. .ci/runtime-line runs this file on every runtime
line, where it checks that each op's kernel compiles with that line's runtime wheels
alone and computes what its reference does. The grids of shapes, layouts, options
and dtypes are the op files' (tests/ops/test_<family>.py), which the main run covers.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sycl_kernels
import torch
from sycl_kernels import _dtypes as dtype_table

from tests.ops import cases

DTYPES = tuple(d.torch_dtype for d in dtype_table.DTYPES)


def _exported_ops() -> list[str]:
    names = set(sycl_kernels.ops.__all__)
    names |= {name for name in sycl_kernels.__all__ if hasattr(torch.ops.sycl_kernels, name)}
    return sorted(names)


EXPORTED = _exported_ops()
# The cases the op test files register.
CASES: dict[str, cases.OnceCase] = cases.once_cases()


def _op(name: str) -> Callable[..., object]:
    return getattr(sycl_kernels.ops, name, None) or getattr(sycl_kernels, name)


def test_every_exported_op_has_a_case() -> None:
    assert "rmsnorm" in EXPORTED, f"the exported ops were not found: {EXPORTED}"
    missing = [name for name in EXPORTED if name not in CASES]
    assert not missing, f"exported ops without a registered case: {missing}"
    unknown = [name for name in CASES if name not in EXPORTED]
    assert not unknown, f"cases of ops the package does not export: {unknown}"


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        (name, dtype)
        for name in EXPORTED
        for dtype in (CASES[name].dtypes if name in CASES else DTYPES[:1])
    ],
    ids=lambda value: str(value).removeprefix("torch."),
)
def test_op_matches_its_reference(name: str, dtype: torch.dtype) -> None:
    if name not in CASES:
        pytest.fail(f"{name} is exported but has no registered case")
    CASES[name].run(_op(name), dtype)
