"""sycl_kernels.toolchain.sources: a kernel's compile inputs (source, headers, flags), hashed."""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import _runtime
from .._build_config import read_build_config
from ..specs.spec import KernelSpec

PACKAGE_DIR = Path(__file__).resolve().parent.parent
KERNELS_DIR = PACKAGE_DIR / "kernels"

# The format every image is produced in; part of the hash so a future native
# format never collides with it.
IMAGE_FORMAT = "spirv"

# SPIR-V is consumed by every SYCL device (OpenCL CPU, Level Zero GPU), so this
# target is not tied to the device that built it.
SPIRV_TARGET = "spir64"

# The bundled images' index, written by the AOT build (toolchain.aot_build) and read
# by the runtime (jit.aot).
MANIFEST_NAME = "manifest.json"

_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


_header_cache: dict[tuple[Path, int, int], str] = {}


def _read_header(path: Path) -> str:
    """The header's text, re-read when its size or modification time changes."""
    stat = path.stat()
    key = (path, stat.st_mtime_ns, stat.st_size)
    text = _header_cache.get(key)
    if text is None:
        text = _header_cache[key] = path.read_text()
    return text


def include_tree(source: str, roots: Sequence[Path] = (KERNELS_DIR,)) -> dict[str, str]:
    """Every header `source` includes, directly or not: {include name: text}.

    A quoted include resolves against the including header's folder, then against
    each of `roots` in order, as the compiler does with -I. Names are relative to
    the root a header was found under, so no install path enters the hash, and the
    runtime compiler sees them as virtual files at those names. Angle-bracket
    includes (the SYCL runtime's own) are left to the compiler.
    """
    headers: dict[str, str] = {}
    where: dict[str, Path] = {}
    pending: list[tuple[str, Path | None, str]] = [("", None, source)]
    while pending:
        folder, real_folder, text = pending.pop()
        for include in _QUOTED_INCLUDE.findall(text):
            if posixpath.isabs(include):
                raise ValueError(f"include {include!r} is an absolute path")
            candidates = [
                (posixpath.normpath(posixpath.join(folder, include)), real_folder / include)
                for real_folder in ([real_folder] if real_folder else [])
            ] + [(posixpath.normpath(include), root / include) for root in roots]
            found = next(((n, p) for n, p in candidates if p.is_file()), None)
            if found is None:
                raise FileNotFoundError(
                    f"included header {include!r} not found next to its includer or under "
                    f"{', '.join(map(str, roots))}"
                )
            name, path = found
            if name.startswith("../"):
                raise ValueError(f"include {include!r} reaches outside its include folder")
            path = path.resolve()
            if name in where:
                if where[name] != path:
                    raise ValueError(
                        f"two headers are both included as {name!r}: {where[name]} and {path}"
                    )
                continue
            where[name] = path
            headers[name] = _read_header(path)
            pending.append((posixpath.dirname(name), path.parent, headers[name]))
    return headers


@dataclass(frozen=True)
class CompileInputs:
    """Everything that decides a compiled image, and nothing else (no install paths)."""

    name: str
    source: str
    headers: tuple[tuple[str, str], ...]
    options: tuple[str, ...]
    """The flag set every runtime line compiles with."""
    line_options: tuple[str, ...]
    """What only this runtime line's compiler needs; no effect on the kernel."""
    device_compiler: str
    runtime_version: str
    image_format: str = IMAGE_FORMAT

    @property
    def all_options(self) -> tuple[str, ...]:
        return (*self.options, *self.line_options)

    def portable_digest(self) -> str:
        """Names the kernel an image holds, whichever runtime compiled it: the AOT key.

        A SPIR-V image is generic (docs/design.md), so one compiled by one runtime
        line serves every line whose loader accepts it; a loader that refuses one
        falls back to the JIT.
        """
        return _digest(
            {
                "source": self.source,
                "headers": [[n, hashlib.sha256(t.encode()).hexdigest()] for n, t in self.headers],
                "options": list(self.options),
                "device_compiler": self.device_compiler,
                "image_format": self.image_format,
            }
        )

    def digest(self) -> str:
        """Names an image compiled by this runtime release: the disk cache key."""
        return _digest(
            {
                "kernel": self.portable_digest(),
                "line_options": list(self.line_options),
                "runtime_version": self.runtime_version,
            }
        )


def _digest(document: dict) -> str:
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def compile_inputs(
    spec: KernelSpec,
    *,
    kernels_dir: Path = KERNELS_DIR,
    build_config: dict | None = None,
    line: str | None = None,
) -> CompileInputs:
    """The inputs of `spec`; the JIT uses the defaults, the AOT build its source tree's."""
    return source_inputs(
        spec.name,
        spec.translation_unit(),
        roots=(kernels_dir,),
        build_config=build_config,
        line=line,
    )


def source_inputs(
    name: str,
    source: str,
    *,
    roots: Sequence[Path] = (KERNELS_DIR,),
    extra_options: Sequence[str] = (),
    build_config: dict | None = None,
    line: str | None = None,
) -> CompileInputs:
    """The inputs of a translation unit: its include tree under `roots`, the exported
    flag set plus `extra_options`, for runtime `line` (libsycl major) at the version
    the build config records, or by default the installed runtime."""
    config = build_config if build_config is not None else read_build_config()
    if line is None:
        installed = _runtime.active_line()
        line, runtime_version = str(installed.major), installed.version
    else:
        runtime_version = config["lines"][line]["sycl_runtime_version"]
    return CompileInputs(
        name=name,
        source=source,
        headers=tuple(sorted(include_tree(source, roots).items())),
        options=(*config["device_options"], *extra_options),
        line_options=tuple(config["lines"][line]["device_options"]),
        device_compiler=config["device_compiler"],
        runtime_version=runtime_version,
    )
