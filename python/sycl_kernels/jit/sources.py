"""sycl_kernels.jit.sources: what a kernel is compiled from (source, headers, flags), hashed."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata as metadata
import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from .spec import KernelSpec

PACKAGE_DIR = Path(__file__).resolve().parent.parent
KERNELS_DIR = PACKAGE_DIR / "kernels"
BUILD_CONFIG_FILE = PACKAGE_DIR / "_build_config.json"

# The format every image is produced in; part of the hash so a future native
# format never collides with it.
IMAGE_FORMAT = "spirv"

_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


@functools.cache
def read_build_config(path: Path = BUILD_CONFIG_FILE) -> dict:
    """The flag set CMake exported (cmake/DeviceFlags.cmake)."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RuntimeError(
            f"sycl_kernels: {path} is missing; the package was not built by CMake "
            "(install it with pip install .)"
        ) from None


@functools.cache
def installed_runtime_version() -> str:
    return metadata.version("intel-sycl-rt")


_header_cache: dict[tuple[Path, int, int], str] = {}


def _header_text(kernels_dir: Path, name: str) -> str:
    """The header's text, re-read when its size or modification time changes."""
    path = kernels_dir / name
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"kernel header {name!r} not found under {kernels_dir}") from None
    key = (path, stat.st_mtime_ns, stat.st_size)
    text = _header_cache.get(key)
    if text is None:
        text = _header_cache[key] = path.read_text()
    return text


def include_tree(source: str, kernels_dir: Path = KERNELS_DIR) -> dict[str, str]:
    """Every header under `kernels_dir` that `source` includes, directly or not: {name: text}.

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
                headers[name] = _header_text(kernels_dir, name)
                pending.append((posixpath.dirname(name), headers[name]))
    return headers


@dataclass(frozen=True)
class CompileInputs:
    """Everything that decides a compiled image, and nothing else (no install paths)."""

    name: str
    source: str
    headers: tuple[tuple[str, str], ...]
    options: tuple[str, ...]
    device_compiler: str
    runtime_version: str
    image_format: str = IMAGE_FORMAT

    def digest(self) -> str:
        document = {
            "source": self.source,
            "headers": [[n, hashlib.sha256(t.encode()).hexdigest()] for n, t in self.headers],
            "options": list(self.options),
            "device_compiler": self.device_compiler,
            "runtime_version": self.runtime_version,
            "image_format": self.image_format,
        }
        return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def compile_inputs(
    spec: KernelSpec,
    *,
    kernels_dir: Path = KERNELS_DIR,
    build_config: dict | None = None,
    runtime_version: str | None = None,
) -> CompileInputs:
    """The inputs of `spec`; the JIT uses the defaults, the AOT build its source tree's."""
    config = build_config if build_config is not None else read_build_config()
    source = spec.translation_unit()
    return CompileInputs(
        name=spec.name,
        source=source,
        headers=tuple(sorted(include_tree(source, kernels_dir).items())),
        options=tuple(config["device_options"]),
        device_compiler=config["device_compiler"],
        runtime_version=runtime_version or installed_runtime_version(),
    )
