"""sycl_kernels._runtime: finds the SYCL runtime wheels, loads the host module, owns the queues.

libsycl.so.8 is made loadable by preloading it (RTLD_GLOBAL) from the file list
of the installed intel-sycl-rt distribution, not by an RPATH: the preload finds
it wherever pip put the wheel (venv, --user, --target), and when torch has
already loaded the same soname the preload is a no-op.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata as metadata
import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

INSTALL_HINT = (
    "pip install 'intel-sycl-rt==2025.3.*' 'intel-cmplr-lib-ur==2025.3.*' "
    "'intel-opencl-rt==2025.3.*'"
)


def _dist_file(dist_name: str, file_name: str) -> Path | None:
    try:
        files = metadata.distribution(dist_name).files or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == file_name:
            path = Path(str(f.locate())).resolve()
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


@functools.cache
def _libsycl() -> Path:
    libsycl = _dist_file("intel-sycl-rt", "libsycl.so.8")
    if libsycl is None:
        raise RuntimeError(
            f"sycl_kernels: the SYCL runtime (libsycl.so.8) is not installed; {INSTALL_HINT}"
        )
    return libsycl


def compiler_env() -> dict[str, str]:
    """This process's environment for a child that links libsycl (the compile tool)."""
    paths = [str(_libsycl().parent), os.environ.get("LD_LIBRARY_PATH", "")]
    return {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(p for p in paths if p)}


@functools.cache
def host_module() -> ModuleType:
    """The nanobind host module, loaded on first use; RuntimeError if the runtime is missing."""
    libsycl = _libsycl()
    try:
        ctypes.CDLL(str(libsycl), mode=ctypes.RTLD_GLOBAL)
        from . import _C
    except OSError as e:
        raise RuntimeError(f"sycl_kernels: cannot load {libsycl}: {e}; {INSTALL_HINT}") from e
    return _C


@functools.cache
def cpu_queue():
    """The package's in-order queue on the SYCL CPU device, used for CPU tensors."""
    devices = host_module().devices()
    for index, device in enumerate(devices):
        if device["type"] == "cpu":
            return host_module().Queue.create(index)
    seen = ", ".join(d["name"] for d in devices) or "none"
    raise RuntimeError(
        "sycl_kernels: no SYCL CPU device (devices seen: "
        f"{seen}); the OpenCL CPU runtime provides it: {INSTALL_HINT}. "
        f"OCL_ICD_FILENAMES={os.environ.get('OCL_ICD_FILENAMES', '<unset>')}"
    )


@functools.cache
def _borrowed_queue(address: int):
    return host_module().Queue.borrow(address)


def queue_for(device: torch.device):
    """The queue for tensors on `device`: the CPU queue, or the current XPU stream's."""
    if device.type == "cpu":
        return cpu_queue()
    return _xpu_queue(device)


def queue_of(t: torch.Tensor):
    """queue_for(t.device), without building t.device for a CPU tensor (the hot path)."""
    return cpu_queue() if t.is_cpu else _xpu_queue(t.device)


def tuning_of(t: torch.Tensor) -> str:
    """The kernel tuning for a tensor's device class (kernels/common/vec.hpp): cpu or gpu."""
    return "cpu" if t.is_cpu else "gpu"


def _xpu_queue(device: torch.device):
    import torch

    return _borrowed_queue(torch.xpu.current_stream(device).sycl_queue)


_point_opencl_at_cpu_runtime()
