"""Runtime bootstrap: devices, device selection, and a clear error when the runtime is missing."""

from __future__ import annotations

import importlib.metadata as metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sycl_kernels
import torch
from packaging.requirements import Requirement
from sycl_kernels import _runtime
from sycl_kernels._build_config import read_build_config
from sycl_kernels._config import config


def test_cpu_sycl_device_is_found() -> None:
    cpu = [d for d in sycl_kernels.devices() if d.type == "cpu"]
    assert cpu, "the OpenCL CPU runtime should provide a SYCL CPU device"
    assert cpu[0].backend == "opencl" and cpu[0].system_allocations
    assert os.environ["OCL_ICD_FILENAMES"].endswith("libintelocl.so")


@pytest.mark.parametrize(("value", "expected"), [("cpu", "cpu"), ("auto", "cpu"), ("", "cpu")])
def test_device_choice(monkeypatch: pytest.MonkeyPatch, value: str, expected: str) -> None:
    monkeypatch.setenv("SYCL_KERNELS_DEVICE", value)
    config.cache_clear()
    try:
        assert sycl_kernels.default_device() == torch.device(expected)
    finally:
        config.cache_clear()


@pytest.mark.parametrize(
    ("value", "message"),
    [("tpu", "SYCL_KERNELS_DEVICE='tpu' is not one of"), ("gpu", "torch sees no XPU device")],
)
def test_device_choice_errors(monkeypatch: pytest.MonkeyPatch, value: str, message: str) -> None:
    monkeypatch.setenv("SYCL_KERNELS_DEVICE", value)
    config.cache_clear()
    try:
        with pytest.raises((ValueError, RuntimeError), match=message):
            sycl_kernels.default_device()
    finally:
        config.cache_clear()


def test_import_works_without_a_device_and_the_op_says_why() -> None:
    script = (
        "import torch, sycl_kernels\n"
        "try:\n"
        "    sycl_kernels.rmsnorm(torch.ones(2, 8), torch.ones(8))\n"
        "except RuntimeError as e:\n"
        "    print('RuntimeError:', e)\n"
    )
    env = {**os.environ, "OCL_ICD_FILENAMES": "/nonexistent/libintelocl.so"}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "RuntimeError: sycl_kernels: no SYCL CPU device" in result.stdout
    assert "OCL_ICD_FILENAMES='/nonexistent/libintelocl.so' does not name" in result.stdout


def test_info_command_lists_the_cpu_device_and_the_lines() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sycl_kernels", "info"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    line = _runtime.active_line()
    assert (
        f"SYCL runtime:     intel-sycl-rt {line.version}, line libsycl.so.{line.major}"
        in result.stdout
    )
    assert f"torch:            {torch.__version__}" in result.stdout
    for built in _runtime.built_lines():
        assert f"libsycl.so.{built} (built against intel-sycl-rt " in result.stdout
    assert "cpu   opencl" in result.stdout
    native = next(row for row in result.stdout.splitlines() if row.startswith("native binaries:"))
    assert "opencl" in native.split(":", 1)[1].split(", ")[0]


def test_the_installed_line_is_one_the_build_has() -> None:
    line = _runtime.installed_line()
    assert line.version == metadata.version("intel-sycl-rt")
    assert line.libsycl.name == f"libsycl.so.{line.major}"
    assert line.major in _runtime.built_lines()
    assert sorted(int(n) for n in read_build_config()["lines"]) == _runtime.built_lines()
    assert Path(_runtime.host_module().__file__).parent.name == f"_sycl{line.major}"


def test_an_unsupported_runtime_line_is_a_clear_error_not_a_loader_error() -> None:
    script = (
        "from pathlib import Path\n"
        "import torch, sycl_kernels\n"
        "from sycl_kernels import _runtime\n"
        "_runtime.installed_line = lambda: _runtime.RuntimeLine(\n"
        "    99, '2099.1.0', Path('/nowhere/libsycl.so.99'))\n"
        "try:\n"
        "    sycl_kernels.rmsnorm(torch.ones(2, 8), torch.ones(8))\n"
        "except sycl_kernels.RuntimeLineError as e:\n"
        "    print('RuntimeLineError:', e)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert (
        "RuntimeLineError: sycl_kernels: the installed SYCL runtime, intel-sycl-rt 2099.1.0, "
        "is libsycl.so.99, a runtime line this build of sycl-kernels does not support"
    ) in result.stdout
    for built in _runtime.built_lines():
        assert f"libsycl.so.{built} (built against intel-sycl-rt " in result.stdout


def test_a_missing_cpu_runtime_is_named_with_its_release(monkeypatch) -> None:
    monkeypatch.setattr(_runtime, "_dist_file", lambda dist, name: None)
    reason = _runtime._cpu_device_missing_reason()
    assert reason == (
        "the OpenCL CPU runtime is not installed: "
        f"pip install 'intel-opencl-rt=={metadata.version('intel-sycl-rt')}'"
    )


def test_a_missing_opencl_adapter_is_named(monkeypatch) -> None:
    real_files = _runtime._dist_files
    monkeypatch.setattr(
        _runtime,
        "_dist_files",
        lambda dist: [] if dist == "intel-cmplr-lib-ur" else real_files(dist),
    )
    reason = _runtime._cpu_device_missing_reason()
    assert "ships no libur_adapter_opencl.so (the OpenCL adapter)" in reason
    assert _runtime.OPENCL_ADAPTER_HINT in reason


@pytest.mark.wheel
def test_requirements_admit_every_line_the_build_has() -> None:
    requirements = {
        r.name: r.specifier
        for r in map(Requirement, metadata.requires("sycl-kernels") or [])
        if r.name.startswith("intel-")
    }
    built = read_build_config()["lines"]
    for name in ("intel-sycl-rt", "intel-cmplr-lib-ur", "intel-opencl-rt"):
        for line, entry in built.items():
            assert entry["sycl_runtime_version"] in requirements[name], (name, line)
        assert metadata.version(name) in requirements[name], name


def test_version_is_single_sourced() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sycl_kernels", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"sycl_kernels {sycl_kernels.__version__}"


@pytest.mark.wheel
def test_installed_distribution_carries_the_version_and_the_license() -> None:
    dist = metadata.distribution("sycl-kernels")
    assert dist.version == sycl_kernels.__version__
    assert dist.metadata["License-Expression"] == "Apache-2.0"
    license_text = dist.read_text("licenses/LICENSE")
    assert license_text is not None
    assert "Apache License" in license_text
