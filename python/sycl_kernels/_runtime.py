"""sycl_kernels._runtime: finds the SYCL runtime wheels, loads the host module, owns the queues.

A runtime line is one libsycl soname, libsycl.so.N (2025.3.x: 8, 2026.x: 9); the
package holds a host module and a compile tool per line it was built for, in
_sycl<N>/, and uses the line of the intel-sycl-rt installed beside it (the one
torch XPU pinned). libsycl.so.N is made loadable by preloading it (RTLD_GLOBAL)
from the file list of that distribution, not by an RPATH: the preload finds it
wherever pip put the wheel (venv, --user, --target), and when torch has already
loaded the same soname the preload is a no-op.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.machinery
import importlib.metadata as metadata
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

from ._build_config import read_build_config

if TYPE_CHECKING:
    import torch

PACKAGE_DIR = Path(__file__).resolve().parent
INSTALL_HINT = (
    "install the SYCL runtime your torch pins, or for the CPU alone: "
    "pip install 'intel-sycl-rt==2026.0.*' 'intel-cmplr-lib-ur==2026.0.*' "
    "'intel-opencl-rt==2026.0.*'"
)
# The intel-cmplr-lib-ur releases that ship the OpenCL adapter as a file of its own.
OPENCL_ADAPTER_HINT = "pip install 'intel-sycl-rt==2026.1.*' 'intel-cmplr-lib-ur==2026.1.*'"

_LIBSYCL = re.compile(r"libsycl\.so\.(\d+)$")


class RuntimeLineError(RuntimeError):
    """The installed SYCL runtime is missing, or of a line this build does not support."""


@dataclass(frozen=True)
class RuntimeLine:
    major: int
    """N of libsycl.so.N."""
    version: str
    """The installed intel-sycl-rt release."""
    libsycl: Path


def _dist_files(dist_name: str) -> list[Path]:
    try:
        files = metadata.distribution(dist_name).files or []
    except metadata.PackageNotFoundError:
        return []
    return [Path(str(f.locate())) for f in files]


def _dist_file(dist_name: str, file_name: str) -> Path | None:
    for path in _dist_files(dist_name):
        if path.name == file_name:
            path = path.resolve()
            return path if path.exists() else None
    return None


def _point_opencl_at_cpu_runtime() -> None:
    # The wheel's .icd file holds a placeholder path, so the OpenCL ICD loader
    # finds the CPU runtime only through this variable, read when libsycl starts.
    if "OCL_ICD_FILENAMES" in os.environ:
        return
    libintelocl = _dist_file("intel-opencl-rt", "libintelocl.so")
    if libintelocl is not None:
        os.environ["OCL_ICD_FILENAMES"] = str(libintelocl)


def built_lines() -> list[int]:
    """The runtime lines (libsycl majors) this installation has a host module for."""
    return sorted(
        int(folder.name.removeprefix("_sycl"))
        for folder in PACKAGE_DIR.glob("_sycl[0-9]*")
        if any(folder.glob("_C.*"))
    )


def _lines_text(lines: list[int]) -> str:
    versions = read_build_config()["lines"]
    return (
        ", ".join(
            f"libsycl.so.{n} (built against intel-sycl-rt "
            f"{versions.get(str(n), {}).get('sycl_runtime_version', '?')})"
            for n in lines
        )
        or "none"
    )


@functools.cache
def installed_line() -> RuntimeLine:
    """The runtime line installed beside the package; RuntimeLineError if there is none."""
    try:
        version = metadata.version("intel-sycl-rt")
    except metadata.PackageNotFoundError:
        raise RuntimeLineError(
            f"sycl_kernels: the SYCL runtime (intel-sycl-rt) is not installed; {INSTALL_HINT}"
        ) from None
    for path in _dist_files("intel-sycl-rt"):
        match = _LIBSYCL.match(path.name)
        if match and path.exists():
            return RuntimeLine(int(match.group(1)), version, path.resolve())
    raise RuntimeLineError(
        f"sycl_kernels: intel-sycl-rt {version} has no libsycl.so.N (a broken install?); "
        f"{INSTALL_HINT}"
    )


@functools.cache
def active_line() -> RuntimeLine:
    """installed_line(), checked to be one this build has a host module for."""
    line = installed_line()
    supported = built_lines()
    if line.major not in supported:
        raise RuntimeLineError(
            f"sycl_kernels: the installed SYCL runtime, intel-sycl-rt {line.version}, is "
            f"libsycl.so.{line.major}, a runtime line this build of sycl-kernels does not "
            f"support (it has {_lines_text(supported)}); install an intel-sycl-rt of a "
            "supported line, or build sycl-kernels from source beside this one"
        )
    return line


def line_dir() -> Path:
    """The folder of the active line's host module and compile tool."""
    return PACKAGE_DIR / f"_sycl{active_line().major}"


def compiler_env() -> dict[str, str]:
    """This process's environment for a child that links libsycl (the compile tool)."""
    paths = [str(active_line().libsycl.parent), os.environ.get("LD_LIBRARY_PATH", "")]
    return {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(p for p in paths if p)}


_T = TypeVar("_T")
# One lock for both loads below: cpu_queue loads the host module.
_LOADING = threading.RLock()


def _loaded_once(load: Callable[[], _T]) -> Callable[[], _T]:
    """functools.cache for a load of no arguments, safe under threads: the first
    callers wait for one load. Eight threads making their first calls at once
    each ran the host module's load, and some got a module without its classes."""
    loaded: list[_T] = []

    @functools.wraps(load)
    def get() -> _T:
        if not loaded:
            with _LOADING:
                if not loaded:
                    loaded.append(load())
        return loaded[0]

    return get


@_loaded_once
def host_module() -> ModuleType:
    """The nanobind host module of the active line, loaded on first use (RuntimeLineError
    if the runtime is missing or of an unsupported line)."""
    line = active_line()
    paths = [
        path
        for suffix in importlib.machinery.EXTENSION_SUFFIXES
        for path in line_dir().glob(f"_C{suffix}")
    ]
    if not paths:
        raise RuntimeLineError(
            f"sycl_kernels: {line_dir()} holds no host module for this Python "
            f"({sys.implementation.cache_tag}); reinstall sycl-kernels"
        )
    try:
        ctypes.CDLL(str(line.libsycl), mode=ctypes.RTLD_GLOBAL)
        spec = importlib.util.spec_from_file_location(f"{__package__}._C", paths[0])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (OSError, ImportError) as e:
        raise RuntimeLineError(
            f"sycl_kernels: cannot load the host module of libsycl.so.{line.major} "
            f"(intel-sycl-rt {line.version}): {e}; {INSTALL_HINT}"
        ) from e
    sys.modules[spec.name] = module
    return module


def _cpu_device_missing_reason() -> str:
    version = metadata.version("intel-sycl-rt")
    libintelocl = _dist_file("intel-opencl-rt", "libintelocl.so")
    if libintelocl is None:
        return f"the OpenCL CPU runtime is not installed: pip install 'intel-opencl-rt=={version}'"
    icd = os.environ.get("OCL_ICD_FILENAMES", "")
    if str(libintelocl) not in icd.split(os.pathsep):
        return (
            f"OCL_ICD_FILENAMES={icd!r} does not name the OpenCL CPU runtime; "
            f"unset it or add {libintelocl}"
        )
    reason = f"no OpenCL platform appeared for {libintelocl}"
    if not any(p.name == "libur_adapter_opencl.so" for p in _dist_files("intel-cmplr-lib-ur")):
        reason += (
            f"; intel-cmplr-lib-ur {metadata.version('intel-cmplr-lib-ur')} ships no "
            f"libur_adapter_opencl.so (the OpenCL adapter); {OPENCL_ADAPTER_HINT}"
        )
    return reason


def cpu_device_problem() -> str | None:
    """None when the SYCL CPU device is there, else why it is not and how to get it."""
    if any(d["type"] == "cpu" for d in host_module().devices()):
        return None
    return _cpu_device_missing_reason()


@_loaded_once
def cpu_queue():
    """The package's in-order queue on the SYCL CPU device, used for CPU tensors."""
    devices = host_module().devices()
    for index, device in enumerate(devices):
        if device["type"] == "cpu":
            return host_module().Queue.create(index)
    seen = ", ".join(d["name"] for d in devices) or "none"
    raise RuntimeError(
        f"sycl_kernels: no SYCL CPU device (devices seen: {seen}); "
        f"{_cpu_device_missing_reason()}. XPU tensors are unaffected."
    )


@functools.cache
def _borrowed_queue(address: int):
    return host_module().Queue.borrow(address)


def queue_for(device: torch.device):
    """The queue for tensors on `device`: the CPU queue, or the current XPU stream's."""
    if device.type == "cpu":
        return cpu_queue()
    return _xpu_queue(device)


def tuning_of(t: torch.Tensor) -> str:
    """The kernel tuning for a tensor's device class (kernels/common/vec.hpp): cpu or gpu."""
    return "cpu" if t.is_cpu else "gpu"


def _xpu_queue(device: torch.device):
    import torch

    return _borrowed_queue(torch.xpu.current_stream(device).sycl_queue)


_point_opencl_at_cpu_runtime()
