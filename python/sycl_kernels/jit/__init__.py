"""sycl_kernels.jit: kernels from the wheel's AOT images, the disk cache, or compiled on first use.

The runtime half of the package's kernels: the loader (loader.py: compile inputs ->
image -> loaded kernel, through every cache), the disk caches (cache.py, native.py,
bundle.py), the wheel's AOT images (aot.py), precompile (batch.py) and `load()`
(module.py), a module of one's own SYCL kernels. The specs the kernels are named by
live in sycl_kernels.specs, the compile inputs and the compile tool's driver in
sycl_kernels.toolchain; the API's names from those (KernelSpec, compile_inputs, ...)
are re-exported here. Names are imported on first access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# name -> the module defining it, relative to this package.
_LAZY = {
    "CompileInputs": "..toolchain.sources",
    "compile_inputs": "..toolchain.sources",
    "KernelSpec": "..specs.spec",
    "Param": "..specs.spec",
    "read_specs": "..specs.spec",
    "write_specs": "..specs.spec",
    "Precompiled": ".batch",
    "precompile": ".batch",
    "KernelCompileError": "..toolchain.compiler",
    "JitDisabledError": ".loader",
    "Stats": ".loader",
    "compile_image": ".loader",
    "get_kernel": ".loader",
    "loaded_specs": ".loader",
    "stats": ".loader",
    "Module": ".module",
    "load": ".module",
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:
    from ..specs.spec import KernelSpec as KernelSpec
    from ..specs.spec import Param as Param
    from ..specs.spec import read_specs as read_specs
    from ..specs.spec import write_specs as write_specs
    from ..toolchain.compiler import KernelCompileError as KernelCompileError
    from ..toolchain.sources import CompileInputs as CompileInputs
    from ..toolchain.sources import compile_inputs as compile_inputs
    from .batch import Precompiled as Precompiled
    from .batch import precompile as precompile
    from .loader import JitDisabledError as JitDisabledError
    from .loader import Stats as Stats
    from .loader import compile_image as compile_image
    from .loader import get_kernel as get_kernel
    from .loader import loaded_specs as loaded_specs
    from .loader import stats as stats
    from .module import Module as Module
    from .module import load as load


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sycl_kernels.jit' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
