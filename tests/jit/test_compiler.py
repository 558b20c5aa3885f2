"""The device compiler runs as a process of its own: a crash, a hang or a missing tool
is a KernelCompileError in the caller, which goes on running."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from sycl_kernels import _runtime, jit
from sycl_kernels._dtypes import BY_NAME
from sycl_kernels.specs.norm import rmsnorm_spec
from sycl_kernels.toolchain import compiler

from tests import references

HIDDEN = 3041  # outside kernels/variants.toml


def _inputs(hidden: int = HIDDEN) -> jit.CompileInputs:
    return jit.compile_inputs(rmsnorm_spec(BY_NAME["fp32"], hidden, "cpu"))


def _fake_tool(tmp_path: Path, body: str) -> Path:
    tool = tmp_path / "sycl-kernels-compile"
    tool.write_text(f"#!/bin/sh\n{body}\n")
    tool.chmod(0o755)
    return tool


def test_a_compiler_crash_is_an_error_not_the_end(tmp_path: Path, monkeypatch) -> None:
    tool = _fake_tool(tmp_path, 'echo "backend: about to fail" >&2; kill -SEGV $$')
    monkeypatch.setattr(compiler, "tool", lambda: tool)
    with pytest.raises(jit.KernelCompileError) as info:
        compiler.compile_out_of_process(_inputs(), "cpu")
    message = str(info.value)
    assert f"rmsnorm_fp32_h{HIDDEN}_cpu: the device compiler crashed (SIGSEGV)" in message
    assert "backend: about to fail" in message


def test_a_hung_compiler_times_out(tmp_path: Path, monkeypatch) -> None:
    # Python, not sleep(1): the installed-wheel test's PATH holds only its venv.
    hung = _fake_tool(tmp_path, f"exec {sys.executable} -c 'import time; time.sleep(60)'")
    monkeypatch.setattr(compiler, "tool", lambda: hung)
    with pytest.raises(jit.KernelCompileError, match=r"did not finish in 0\.5 s"):
        compiler.compile_out_of_process(_inputs(), "cpu", timeout=0.5)


def test_a_missing_tool_is_named(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(compiler, "tool", lambda: tmp_path / "nothing-here")
    with pytest.raises(jit.KernelCompileError, match=r"cannot run .*nothing-here"):
        compiler.compile_out_of_process(_inputs(), "cpu")


def test_the_tool_is_installed_and_compiles(fresh_cache: Path) -> None:
    assert os.access(compiler.tool(), os.X_OK), compiler.tool()
    x, weight = torch.randn(2, HIDDEN), torch.randn(HIDDEN)
    kernel = jit.get_kernel(rmsnorm_spec(BY_NAME["fp32"], HIDDEN, "cpu"), _runtime.cpu_queue())
    out = torch.empty_like(x)
    group = kernel.group_size
    rows = (0, 0, HIDDEN)  # row strides (kernels/common/rows.hpp)
    kernel.launch(_runtime.cpu_queue(), 2 * group, group, x, *rows, weight, out, *rows, 1, 2, 1e-6)
    torch.testing.assert_close(
        out.double(), references.rmsnorm(x, weight, 1e-6), **references.tolerance(torch.float32)
    )
