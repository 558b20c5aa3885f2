"""The JIT's compile and load path: specs, include trees, compile errors, the in-memory cache."""

from __future__ import annotations

import pytest
import torch
from sycl_kernels import _runtime
from sycl_kernels._build_config import read_build_config
from sycl_kernels._dtypes import BY_NAME
from sycl_kernels.jit import (
    KernelCompileError,
    KernelSpec,
    Param,
    compile_image,
    compile_inputs,
    get_kernel,
)
from sycl_kernels.specs.norm import rmsnorm_spec
from sycl_kernels.toolchain.sources import include_tree

from tests import references


def test_translation_unit_exports_one_named_kernel() -> None:
    spec = rmsnorm_spec(BY_NAME["bf16"], 4096, "cpu")
    assert spec.name == "rmsnorm_bf16_h4096_cpu"
    assert spec.signature == "plllpplllllf"
    source = spec.translation_unit()
    assert '#include "norm/rmsnorm.hpp"' in source
    assert "void rmsnorm_bf16_h4096_cpu(const sycl_kernels::bf16* x, int64_t x_outer" in source
    assert (
        "sycl_kernels::rmsnorm<sycl_kernels::bf16, sycl_kernels::bf16, 4096, 256, 2, false>"
        "(x, x_outer" in source
    )


def test_include_tree_follows_relative_includes() -> None:
    headers = include_tree(rmsnorm_spec(BY_NAME["fp32"], 64, "cpu").translation_unit())
    assert set(headers) == {
        "norm/rmsnorm.hpp",
        "common/device.hpp",
        "common/dtype.hpp",
        "common/loop.hpp",
        "common/reduce.hpp",
        "common/rows.hpp",
        "common/vec.hpp",
    }
    assert "struct bf16" in headers["common/dtype.hpp"]


def test_build_config_comes_from_cmake() -> None:
    config = read_build_config()
    assert config["device_compiler"] == "sycl_ext_oneapi_kernel_compiler"
    assert "-fno-fast-math" in config["device_options"]
    # The 2025.3 compiler needs it (no libsycl-crt.bc in its wheel); 2026 rejects it.
    line_options = {line: entry["device_options"] for line, entry in config["lines"].items()}
    assert line_options.get("8", ["-fno-sycl-device-lib=all"]) == ["-fno-sycl-device-lib=all"]
    assert line_options.get("9", []) == []
    assert config["aot_line"] in line_options


def test_the_jit_compiles_with_the_installed_lines_flags() -> None:
    config = read_build_config()
    line = str(_runtime.active_line().major)
    inputs = compile_inputs(rmsnorm_spec(BY_NAME["fp32"], 96, "cpu"))
    assert inputs.line_options == tuple(config["lines"][line]["device_options"])
    assert inputs.all_options == (*config["device_options"], *inputs.line_options)
    assert inputs.runtime_version == _runtime.active_line().version


def test_compiled_image_is_spirv() -> None:
    image = compile_image(
        compile_inputs(rmsnorm_spec(BY_NAME["fp32"], 96, "cpu")), _runtime.cpu_queue()
    )
    assert image[:4] == (0x07230203).to_bytes(4, "little")


def test_broken_kernel_raises_with_compiler_log() -> None:
    spec = KernelSpec(
        name="broken_kernel",
        header="norm/rmsnorm.hpp",
        function="sycl_kernels::no_such_function",
        template_args=("float",),
        params=(Param("x", "float*"),),
    )
    with pytest.raises(KernelCompileError) as info:
        get_kernel(spec, _runtime.cpu_queue())
    message = str(info.value)
    assert message.startswith("broken_kernel: device compilation failed")
    assert "no_such_function" in message and "error:" in message


def test_unknown_parameter_type_is_rejected() -> None:
    with pytest.raises(ValueError, match="parameter 'n' has type 'size_t'"):
        Param("n", "size_t")


def test_borrowed_queue_runs_a_kernel() -> None:
    # The XPU path wraps torch's sycl::queue* given as an int; here the pointer
    # is the package's own CPU queue, so the same lines run on this machine.
    owned = _runtime.cpu_queue()
    borrowed = _runtime.host_module().Queue.borrow(owned.address)
    assert borrowed.address == owned.address and not borrowed.blocking and owned.blocking
    x, weight = torch.randn(3, 256), torch.randn(256)
    out = torch.zeros_like(x)
    kernel = get_kernel(rmsnorm_spec(BY_NAME["fp32"], 256, "cpu"), borrowed)
    kernel.launch(borrowed, 3 * 256, 256, x, 0, 0, 256, weight, out, 0, 0, 256, 1, 3, 1e-6)
    borrowed.wait()
    torch.testing.assert_close(out.double(), references.rmsnorm(x, weight, 1e-6))


def test_queue_for_xpu_uses_the_current_stream_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    address = _runtime.cpu_queue().address

    class Stream:
        sycl_queue = address

    monkeypatch.setattr(torch.xpu, "current_stream", lambda device=None: Stream())
    queue = _runtime.queue_for(torch.device("xpu", 0))
    assert queue.address == address and not queue.blocking


def test_launch_checks_arguments() -> None:
    queue = _runtime.cpu_queue()
    kernel = get_kernel(rmsnorm_spec(BY_NAME["fp32"], 256, "cpu"), queue)
    x = torch.randn(1, 256)
    # rmsnorm's parameters: x, its 3 row strides, weight, out, its 3 row strides, the
    # two inner leading sizes, eps.
    strides, sizes = (0, 0, 256), (1, 1)
    with pytest.raises(TypeError, match="expected 12 arguments, got 11"):
        kernel.launch(queue, 256, 256, x, *strides, x, x, *strides, *sizes)
    with pytest.raises(TypeError, match="argument 1 must be an int"):
        kernel.launch(queue, 256, 256, x, 2.5, 0, 256, x, x, *strides, *sizes, 1e-6)
    with pytest.raises(TypeError, match=r"argument 0 must be a tensor \(DLPack\), got str"):
        kernel.launch(queue, 256, 256, "x", *strides, x, x, *strides, *sizes, 1e-6)
    # An address is never taken: only the ops' bound launch (_bind) reads data_ptr().
    with pytest.raises(TypeError, match=r"argument 4 must be a tensor \(DLPack\), got int"):
        kernel.launch(queue, 256, 256, x, *strides, x.data_ptr(), x, *strides, *sizes, 1e-6)
    with pytest.raises(ValueError, match="not a positive multiple of the work-group size"):
        kernel.launch(queue, 65, 64, x, *strides, x, x, *strides, *sizes, 1e-6)
    assert kernel.group_size == 256
    with pytest.raises(ValueError, match="compiled for work-groups of 256, launched with 32"):
        kernel.launch(queue, 256, 32, x, *strides, x, x, *strides, *sizes, 1e-6)
