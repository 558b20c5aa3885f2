"""The AOT build's steps (toolchain/aot_build.py): variants compiled in groups, one image each."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import torch
from sycl_kernels import _runtime
from sycl_kernels._build_config import BUILD_CONFIG_FILE
from sycl_kernels._dtypes import BY_NAME
from sycl_kernels.jit import compile_inputs
from sycl_kernels.specs.norm import rmsnorm_spec
from sycl_kernels.specs.variants import read_manifest
from sycl_kernels.toolchain import compiler
from sycl_kernels.toolchain.aot_build import manifest, plan
from sycl_kernels.toolchain.sources import KERNELS_DIR

from tests import references


def _plan(out_dir: Path, *select: str) -> dict[str, list[str]]:
    """Plans `select` into `out_dir`: {group: its variants}, read from variants.cmake."""
    assert plan(KERNELS_DIR, BUILD_CONFIG_FILE, out_dir, list(select)) == 0
    (out_dir / "images").mkdir(exist_ok=True)  # as the build system makes it
    line = re.compile(r"sycl_kernels_add_aot_group\((\w+) VARIANTS ([\w ]+) HEADERS .*")
    groups = {}
    for text in (out_dir / "variants.cmake").read_text().splitlines():
        name, variants = line.fullmatch(text).groups()
        groups[name] = variants.split()
    return groups


def test_plan_groups_variants_by_op_and_dtype(tmp_path: Path) -> None:
    variants = read_manifest(KERNELS_DIR / "variants.toml")
    groups = _plan(
        tmp_path,
        "rmsnorm_fp*_h4096_*",
        "rmsnorm_bf16_h4096_*",
        "gemma_rmsnorm_bf16_h2048_*",
        "timestep_*",
    )
    assert groups == {
        "rmsnorm_fp32": ["rmsnorm_fp32_h4096_cpu", "rmsnorm_fp32_h4096_gpu"],
        "rmsnorm_fp16": ["rmsnorm_fp16_h4096_cpu", "rmsnorm_fp16_h4096_gpu"],
        "rmsnorm_bf16": ["rmsnorm_bf16_h4096_cpu", "rmsnorm_bf16_h4096_gpu"],
        "gemma_rmsnorm_bf16": ["gemma_rmsnorm_bf16_h2048_cpu", "gemma_rmsnorm_bf16_h2048_gpu"],
        "timestep_embedding": [v.spec.name for v in variants if v.op == "timestep_embedding"],
    }
    specs = {v.spec.name: v.spec for v in variants}
    unit = (tmp_path / "src" / "rmsnorm_bf16.cpp").read_text()
    request = (tmp_path / "src" / "rmsnorm_bf16.request").read_text()
    for name in groups["rmsnorm_bf16"]:
        # The unit is its variants' own units, one after another, each image named for one.
        assert specs[name].translation_unit() in unit
        assert f"image\t{name}\t{tmp_path / 'images' / name}.spv\n" in request
    assert "norm/rmsnorm.hpp" in request and "activation/" not in request
    # Each variant keeps the key the JIT computes for it alone.
    for entry in json.loads((tmp_path / "plan.json").read_text())["variants"]:
        assert entry["input_hash"] == compile_inputs(specs[entry["name"]]).portable_digest()
        assert entry["image"] == f"{entry['name']}.spv"


def test_plan_rewrites_only_what_changed(tmp_path: Path) -> None:
    _plan(tmp_path, "rmsnorm_fp32_h4096_*", "silu_and_mul_bf16_d4096_*")
    files = sorted((tmp_path / "src").iterdir())
    stamps = {f: f.stat().st_mtime_ns for f in files}
    _plan(tmp_path, "rmsnorm_fp32_h4096_*", "silu_and_mul_bf16_d4096_*")
    assert {f: f.stat().st_mtime_ns for f in files} == stamps
    _plan(tmp_path, "rmsnorm_fp32_h4096_*", "silu_and_mul_bf16_d*_cpu")
    changed = [f.name for f in files if f.stat().st_mtime_ns != stamps[f]]
    assert changed == ["silu_and_mul_bf16.cpp", "silu_and_mul_bf16.request"]


def _compile_group(request: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(compiler.tool()), "--per-kernel", str(request), *flags],
        capture_output=True,
        text=True,
        timeout=300,
        env=_runtime.compiler_env(),
    )


# --device-build cpu: SYCL_KERNELS_AOT_DEVICE_BUILD=ON (cmake/AotVariants.cmake).
@pytest.mark.parametrize("flags", [(), ("--device-build", "cpu")], ids=["spirv", "device-build"])
def test_one_compile_gives_each_variant_its_own_image(tmp_path: Path, flags: tuple) -> None:
    names = ["rmsnorm_fp32_h256_cpu", "rmsnorm_fp32_h512_cpu"]
    _plan(tmp_path, *names)
    result = _compile_group(tmp_path / "src" / "rmsnorm_fp32.request", *flags)
    assert result.returncode == 0, result.stderr
    assert manifest(tmp_path) == 0
    entries = json.loads((tmp_path / "images" / "manifest.json").read_text())["variants"]
    assert [e["name"] for e in entries] == names
    host, queue = _runtime.host_module(), _runtime.cpu_queue()
    for hidden, other in ((256, names[1]), (512, names[0])):
        spec = rmsnorm_spec(BY_NAME["fp32"], hidden, "cpu")
        image = (tmp_path / "images" / f"{spec.name}.spv").read_bytes()
        bundle = host.Bundle(queue, image, "spirv")
        with pytest.raises(ValueError, match="no kernel named"):
            host.Kernel(bundle, other, spec.signature, spec.group_size)
        kernel = host.Kernel(bundle, spec.name, spec.signature, spec.group_size)
        x, weight = torch.randn(2, hidden), torch.randn(hidden)
        out = torch.empty_like(x)
        rows = (0, 0, hidden)  # row strides (kernels/common/rows.hpp)
        group = spec.group_size
        kernel.launch(queue, 2 * group, group, x, *rows, weight, out, *rows, 1, 2, 1e-6)
        torch.testing.assert_close(
            out.double(), references.rmsnorm(x, weight, 1e-6), **references.tolerance(torch.float32)
        )


def test_a_group_that_lacks_a_named_kernel_writes_no_image(tmp_path: Path) -> None:
    _plan(tmp_path, "rmsnorm_fp32_h256_cpu")
    request = tmp_path / "src" / "rmsnorm_fp32.request"
    missing = tmp_path / "images" / "rmsnorm_fp32_h9_cpu.spv"
    request.write_text(request.read_text() + f"image\trmsnorm_fp32_h9_cpu\t{missing}\n")
    result = _compile_group(request)
    assert result.returncode == 1
    assert "no kernel rmsnorm_fp32_h9_cpu in the source" in result.stderr
    assert list((tmp_path / "images").iterdir()) == []
