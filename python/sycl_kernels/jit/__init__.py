"""sycl_kernels.jit: kernels from the wheel's AOT images, the disk cache, or compiled on first use.

`load()` builds a module of one's own SYCL kernels; the package's ops go through
the same compile inputs, caches and loader. Names are imported on first access,
so the wheel build (cmake/aot_build.py) can use the spec and variant modules
without the runtime's Python dependencies.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_LAZY = {
    "CompileInputs": "sources",
    "compile_inputs": "sources",
    "KernelSpec": "spec",
    "Param": "spec",
    "read_specs": "spec",
    "write_specs": "spec",
    "Precompiled": "batch",
    "precompile": "batch",
    "KernelCompileError": "compiler",
    "JitDisabledError": "build",
    "Stats": "build",
    "compile_image": "build",
    "get_kernel": "build",
    "loaded_specs": "build",
    "stats": "build",
    "Module": "module",
    "load": "module",
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:
    from .batch import Precompiled as Precompiled
    from .batch import precompile as precompile
    from .build import JitDisabledError as JitDisabledError
    from .build import Stats as Stats
    from .build import compile_image as compile_image
    from .build import get_kernel as get_kernel
    from .build import loaded_specs as loaded_specs
    from .build import stats as stats
    from .compiler import KernelCompileError as KernelCompileError
    from .module import Module as Module
    from .module import load as load
    from .sources import CompileInputs as CompileInputs
    from .sources import compile_inputs as compile_inputs
    from .spec import KernelSpec as KernelSpec
    from .spec import Param as Param
    from .spec import read_specs as read_specs
    from .spec import write_specs as write_specs


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sycl_kernels.jit' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
