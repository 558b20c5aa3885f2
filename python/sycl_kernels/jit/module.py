"""sycl_kernels.jit.module: `load()`, modules of one's own SYCL free-function kernels.

    mod = sycl_kernels.jit.load("scale", ["scale.hpp"], defines={"DIM": 128})
    mod.launch("scale_fp16", num_groups, group_size, x, out, 2.5, x.numel())

Kernels are `extern "C"` free-function kernels; their parameter types are read from
the sources, or given as `signatures={"name": "ppfl"}` (p pointer, i int32,
l int64, f float, d double) for kernels a macro generates. They are compiled,
cached and loaded exactly like the package's own ops.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import _runtime
from ..specs.spec import TEMPLATE_ARGUMENT
from ..toolchain.sources import KERNELS_DIR, CompileInputs, source_inputs
from .loader import cached_or_compiled, load_kernels

_EXTERN_KERNEL = re.compile(
    r'extern\s+"C"\s*(?:SYCL_EXT_ONEAPI_FUNCTION_PROPERTY\s*\(\(.*?\)\)\s*)+'
    r"void\s+(\w+)\s*\(([^)]*)\)",
    re.DOTALL,
)
_SCALAR_LETTERS = {
    "float": "f",
    "double": "d",
    "int": "i",
    "int32_t": "i",
    "uint32_t": "i",
    "unsigned": "i",
    "unsignedint": "i",
    "int64_t": "l",
    "uint64_t": "l",
    "long": "l",
    "longlong": "l",
    "size_t": "l",
}
_DEFINE_NAME = re.compile(r"[A-Za-z_]\w*", re.ASCII)
# Names a cache entry: no path separator, no leading dot.
_MODULE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", re.ASCII)


def parse_signatures(text: str) -> dict[str, str]:
    """{kernel name: signature letters} of the extern "C" kernels written out in `text`."""
    found = {}
    for name, params in _EXTERN_KERNEL.findall(text):
        letters = []
        for param in filter(None, (p.strip() for p in params.split(","))):
            tokens = param.replace("*", " * ").split()
            if "*" in tokens:
                letters.append("p")
                continue
            # The last token names the parameter; the rest is its type.
            base = "".join(t for t in tokens[:-1] if t not in ("const", "volatile"))
            letter = _SCALAR_LETTERS.get(base.removeprefix("std::"))
            if letter is None:
                raise ValueError(
                    f"kernel {name!r}: parameter {param!r} has a type the launcher cannot "
                    "pass; use pointers, float, double or 32/64-bit integers"
                )
            letters.append(letter)
        found[name] = "".join(letters)
    return found


def _define_options(defines: Mapping[str, object]) -> list[str]:
    options = []
    for key, value in sorted(defines.items()):
        if not _DEFINE_NAME.fullmatch(key):
            raise ValueError(f"defines: {key!r} is not a macro name")
        if value is None or value is True:
            options.append(f"-D{key}")
        elif TEMPLATE_ARGUMENT.fullmatch(str(value)):
            options.append(f"-D{key}={value}")
        else:
            raise ValueError(
                f"defines: {key}={value!r}; a value is letters, digits, spaces and "
                "_ : . + - * < > ( ) , (no line break, '#', quote or '/')"
            )
    return options


class Module:
    """The kernels of one compiled translation unit, loaded per queue on first launch."""

    def __init__(self, inputs: CompileInputs, signatures: Mapping[str, str]) -> None:
        self.inputs = inputs
        self.signatures = dict(signatures)
        self._kernels: dict[tuple[str, int], object] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inputs.name

    def __repr__(self) -> str:
        return f"<sycl_kernels.jit.Module {self.name}: {', '.join(self.signatures)}>"

    def kernel(self, kernel_name: str, queue) -> object:
        """The loaded kernel on `queue`; .launch(queue, global size, local size, *args)."""
        loaded = self._kernels.get((kernel_name, queue.address))
        if loaded is not None:
            return loaded
        if kernel_name not in self.signatures:
            raise KeyError(
                f"{self.name} has no kernel {kernel_name!r}; it has {', '.join(self.signatures)} "
                "(a macro-generated kernel needs signatures={name: letters} in jit.load)"
            )
        with self._lock:
            names = list(self.signatures)
            kernels = load_kernels(self.inputs, queue, [(n, self.signatures[n], 0) for n in names])
            for n, k in zip(names, kernels, strict=True):
                self._kernels[(n, queue.address)] = k
        return self._kernels[(kernel_name, queue.address)]

    def launch(self, kernel_name: str, num_groups: int, group_size: int, *args: object) -> None:
        """Runs `kernel_name` on num_groups x group_size work-items with `args`.

        The queue is the one of the first tensor argument's device (the CPU queue,
        which waits, or the current XPU stream, which does not).
        """
        device = next((a.device for a in args if hasattr(a, "data_ptr")), None)
        if device is None:
            raise TypeError(f"{kernel_name}(): no tensor argument tells the device to run on")
        queue = _runtime.queue_for(device)
        self.kernel(kernel_name, queue).launch(queue, num_groups * group_size, group_size, *args)


_modules: dict[str, Module] = {}


def load(
    name: str,
    sources: Sequence[str | os.PathLike] = (),
    *,
    source: str = "",
    defines: Mapping[str, object] | None = None,
    include_dirs: Sequence[str | os.PathLike] = (),
    signatures: Mapping[str, str] | None = None,
) -> Module:
    """Compiles (or finds cached) a module of SYCL kernels and returns it.

    name: a label for logs, errors and cache files.
    sources: header or source files, included in this order; their folders are
        searched for includes first.
    source: SYCL source text appended after them.
    defines: macros, {"DIM": 128} -> -DDIM=128 (None or True: defined bare).
    include_dirs: more folders for quoted includes; the package's kernels/ folder
        (common/dtype.hpp, common/vec.hpp ...) is searched last.
    signatures: {kernel: letters} for kernels the sources do not spell out.
    """
    if not _MODULE_NAME.fullmatch(name):
        raise ValueError(
            f"jit.load(): name {name!r} must be letters, digits, '_', '.' or '-', "
            "not starting with '.' or '-'"
        )
    paths = [Path(s).resolve() for s in sources]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"jit.load(): source {path} does not exist")
    includes = "".join(f'#include "{p.name}"\n' for p in paths)
    roots = [*dict.fromkeys(p.parent for p in paths)]
    roots += [Path(d).resolve() for d in include_dirs] + [KERNELS_DIR]
    inputs = source_inputs(
        name, includes + source, roots=roots, extra_options=_define_options(defines or {})
    )
    module = _modules.get(inputs.digest())
    if module is not None:
        return module
    found = parse_signatures("\n".join([source, *(text for _, text in inputs.headers)]))
    found.update(signatures or {})
    if not found:
        raise ValueError(
            f'jit.load(): {name} defines no extern "C" nd_range kernel; '
            "name them in signatures={...} if a macro defines them"
        )
    module = Module(inputs, found)
    # Compile now, so errors surface here and not at the first launch.
    cached_or_compiled(inputs, _runtime.cpu_queue())
    _modules[inputs.digest()] = module
    return module
