"""sycl_kernels.jit.sources: kernel headers, their include tree, the exported flag set."""

from __future__ import annotations

import functools
import json
import posixpath
import re
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
KERNELS_DIR = PACKAGE_DIR / "kernels"
BUILD_CONFIG_FILE = PACKAGE_DIR / "_build_config.json"

_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


@functools.cache
def build_config() -> dict:
    """The flag set CMake exported at build time (cmake/DeviceFlags.cmake)."""
    try:
        return json.loads(BUILD_CONFIG_FILE.read_text())
    except FileNotFoundError:
        raise RuntimeError(
            f"sycl_kernels: {BUILD_CONFIG_FILE} is missing; the package was not built by "
            "CMake (install it with pip install .)"
        ) from None


@functools.cache
def _header_text(name: str) -> str:
    path = KERNELS_DIR / name
    try:
        return path.read_text()
    except FileNotFoundError:
        raise FileNotFoundError(f"kernel header {name!r} not found under {KERNELS_DIR}") from None


def include_tree(source: str) -> dict[str, str]:
    """Every package header `source` includes, directly or not: {name relative to kernels/: text}.

    Quoted includes resolve against the including file's folder, as the compiler does;
    angle-bracket includes (the SYCL runtime's own) are left to the compiler.
    """
    headers: dict[str, str] = {}
    pending = [("", source)]
    while pending:
        folder, text = pending.pop()
        for include in _QUOTED_INCLUDE.findall(text):
            name = posixpath.normpath(posixpath.join(folder, include))
            if name.startswith("../"):
                raise ValueError(f"include {include!r} leaves the kernels folder")
            if name not in headers:
                headers[name] = _header_text(name)
                pending.append((posixpath.dirname(name), headers[name]))
    return headers
