"""sycl_kernels._build_config: what the build recorded of itself, read from _build_config.json.

CMake writes the file (cmake/DeviceFlags.cmake): the device compiler and its flag
set, and per runtime line the intel-sycl-rt release it was built against and that
line's own flags. Both the runtime bootstrap (_runtime, naming the lines) and the
JIT (toolchain/sources.py, hashing the flags) read it, so it sits below both; torch-free.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

BUILD_CONFIG_FILE = Path(__file__).resolve().parent / "_build_config.json"


@functools.cache
def read_build_config(path: Path = BUILD_CONFIG_FILE) -> dict:
    """The flag set and runtime lines CMake exported (cmake/DeviceFlags.cmake)."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RuntimeError(
            f"sycl_kernels: {path} is missing; the package was not built by CMake "
            "(install it with pip install .)"
        ) from None
