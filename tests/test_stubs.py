"""The host module's checked-in type stubs are what nanobind's stubgen makes of the built module."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from sycl_kernels import _runtime

CHECKED_IN = Path(_runtime.__file__).resolve().parent / "_C.pyi"
REFRESH = "cmake --build --preset dev --target update_stubs"


def test_the_checked_in_stubs_are_the_built_modules() -> None:
    # A source build (CMakeLists.txt) writes the stubs beside the host module it can
    # import; a wheel ships the checked-in ones only.
    generated = _runtime.line_dir() / "_C.pyi"
    if not generated.exists():
        pytest.skip(f"no generated stubs beside the host module in {generated.parent}")
    diff = difflib.unified_diff(
        CHECKED_IN.read_text().splitlines(keepends=True),
        generated.read_text().splitlines(keepends=True),
        str(CHECKED_IN),
        str(generated),
    )
    changes = "".join(diff)
    if changes:
        pytest.fail(f"the host module's stubs are out of date; run `{REFRESH}`:\n{changes}")
