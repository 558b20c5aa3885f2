"""jit.precompile: kernels compiled in groups into the disk cache, each under its own key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sycl_kernels
import torch
from sycl_kernels import _runtime, jit
from sycl_kernels._dtypes import BY_NAME
from sycl_kernels.jit import KernelCompileError, KernelSpec, compile_image, compile_inputs
from sycl_kernels.jit.cache import disk_cache
from sycl_kernels.specs.activation import act_and_mul_spec
from sycl_kernels.specs.norm import rmsnorm_spec

from tests import references

# Sizes no manifest variant has, so nothing comes from the wheel.
_HIDDEN = (1003, 1011)


def _norm_specs(dtype: str = "fp32") -> list[KernelSpec]:
    return [rmsnorm_spec(BY_NAME[dtype], hidden, "cpu") for hidden in _HIDDEN]


def test_precompiled_kernels_load_without_compiling_and_compute(fresh_cache: Path) -> None:
    specs = [*_norm_specs(), act_and_mul_spec("silu", BY_NAME["bf16"], _HIDDEN[0], "cpu")]
    done = jit.precompile([*specs, specs[0]])
    assert [(d.name, d.origin) for d in done] == [(s.name, "compiled") for s in specs]
    assert [d.origin for d in jit.precompile(specs)] == ["disk"] * len(specs)

    compiles = jit.stats().compiles
    for hidden in _HIDDEN:
        x, weight = torch.randn(3, hidden), torch.randn(hidden)
        references.assert_close(
            sycl_kernels.rmsnorm(x, weight, 1e-6), references.rmsnorm(x, weight, 1e-6)
        )
    x = torch.randn(3, 2 * _HIDDEN[0]).bfloat16()
    references.assert_close(sycl_kernels.silu_and_mul(x), references.act_and_mul("silu_and_mul", x))
    assert jit.stats().compiles == compiles


def test_a_grouped_image_is_the_image_compiled_alone(fresh_cache: Path) -> None:
    specs = _norm_specs("bf16")
    jit.precompile(specs, workers=1)  # one worker: both in one compile
    queue = _runtime.cpu_queue()
    for spec in specs:
        inputs = compile_inputs(spec)
        assert disk_cache().load(inputs.name, inputs.digest()) == compile_image(inputs, queue)


def test_a_kernel_that_fails_is_named_and_the_rest_are_cached(fresh_cache: Path) -> None:
    good = _norm_specs()
    broken = KernelSpec(
        name="rmsnorm_that_does_not_exist",
        header=good[0].header,
        function="sycl_kernels::no_such_function",
        template_args=(),
        params=good[0].params,
    )
    with pytest.raises(KernelCompileError, match="1 kernels did not compile") as failure:
        jit.precompile([good[0], broken, good[1]], workers=1)
    assert "rmsnorm_that_does_not_exist" in str(failure.value)
    assert "no_such_function" in str(failure.value)
    assert [d.origin for d in jit.precompile(good)] == ["disk", "disk"]


def test_spec_lists_round_trip_and_a_bad_one_is_named(tmp_path: Path) -> None:
    specs = [*_norm_specs(), act_and_mul_spec("gelu", BY_NAME["fp16"], 64, "gpu")]
    path = tmp_path / "specs.json"
    jit.write_specs(path, specs)
    assert jit.read_specs(path) == specs
    assert [p.name for p in tmp_path.iterdir()] == ["specs.json"]

    path.write_text(json.dumps({"format": "sycl-kernels specs", "version": 2, "specs": []}))
    with pytest.raises(ValueError, match=r"specs\.json: not a kernel spec list"):
        jit.read_specs(path)
    path.write_text('{"format": "sycl-kernels specs", "version": 1, "specs": [{"name": 1}]}')
    with pytest.raises(ValueError, match=r"specs\.json: not a kernel spec list"):
        jit.read_specs(path)


def test_loaded_specs_lists_what_this_process_loaded() -> None:
    x, weight = torch.randn(2, _HIDDEN[1]), torch.randn(_HIDDEN[1])
    sycl_kernels.rmsnorm(x, weight, 1e-6)
    assert rmsnorm_spec(BY_NAME["fp32"], _HIDDEN[1], "cpu") in jit.loaded_specs()
