"""Runtime bootstrap: devices, device selection, and a clear error when the runtime is missing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import sycl_kernels
import torch
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
    assert "intel-opencl-rt" in result.stdout


def test_info_command_lists_the_cpu_device() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sycl_kernels", "info"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "SYCL runtime:" in result.stdout and "cpu   opencl" in result.stdout
