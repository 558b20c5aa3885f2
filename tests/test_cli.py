"""python -m sycl_kernels: demo, cache and precompile, run as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sycl_kernels

from tests.jit.test_model_variants import EXPECTED, GEMMA3, LLAMA, QWEN3


def _cli(*args: str, cache: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "sycl_kernels", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "SYCL_KERNELS_CACHE_DIR": str(cache)},
    )
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.needs_bundled("rmsnorm_fp16_h4096_cpu")
def test_precompile_then_cache_ls_and_clear(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    manifest = tmp_path / "mine.toml"
    manifest.write_text('[rmsnorm]\ndtype = ["fp16"]\ntuned_for = ["cpu"]\nhidden = [4096, 999]\n')

    first = _cli("precompile", str(manifest), cache=cache).stdout
    assert "rmsnorm_fp16_h4096_cpu                   aot" in first
    assert "rmsnorm_fp16_h999_cpu                    compiled" in first
    assert "1 aot, 0 disk, 1 compiled" in first

    again = _cli("precompile", str(manifest), "--select", "*_h999_*", cache=cache).stdout
    assert "0 aot, 1 disk, 0 compiled" in again

    listing = _cli("cache", "ls", cache=cache).stdout
    assert listing.startswith("rmsnorm_fp16_h999_cpu ") and "1 entries" in listing
    assert _cli("cache", "path", cache=cache).stdout.strip() == str(cache)
    assert "removed 1 entries" in _cli("cache", "clear", cache=cache).stdout
    assert "0 entries" in _cli("cache", "ls", cache=cache).stdout


def _printed_variants(stdout: str) -> set[str]:
    """The variant names of precompile's per-variant lines (name, origin)."""
    origins = ("aot", "disk", "compiled")
    return {
        line.split()[0]
        for line in stdout.splitlines()
        if line.split()[-1:] in [[o] for o in origins]
    }


def test_precompile_for_models_compiles_exactly_their_variants(tmp_path: Path) -> None:
    configs = []
    for config in (LLAMA, QWEN3, GEMMA3):
        configs.append(tmp_path / f"{config['model_type']}.json")
        configs[-1].write_text(json.dumps(config))
    cache = tmp_path / "cache"

    out = _cli("precompile", "--model", *map(str, configs), cache=cache).stdout
    assert _printed_variants(out) == {name for names in EXPECTED.values() for name in names}

    # Another dtype and tuning: only the selected names, compiled for the CPU device.
    out = _cli(
        "precompile",
        "--model",
        str(configs[0]),
        "--dtype",
        "fp16",
        "--device",
        "gpu",
        "--select",
        "rmsnorm_*",
        cache=cache,
    ).stdout
    assert _printed_variants(out) == {"rmsnorm_fp16_h96_gpu"}


def test_precompile_for_an_unknown_model_type_names_the_supported_ones(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "bert", "hidden_size": 96}))
    result = subprocess.run(
        [sys.executable, "-m", "sycl_kernels", "precompile", "--model", str(config)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode != 0
    assert "model_type 'bert' is not supported; supported: llama, mistral" in result.stderr


def test_demo_times_every_op_family(tmp_path: Path) -> None:
    out = _cli("demo", cache=tmp_path).stdout
    assert "sycl_kernels on cpu" in out and "speedup" in out
    # The families are the modules of sycl_kernels.ops that define its exported ops.
    families = {getattr(sycl_kernels.ops, name).__module__ for name in sycl_kernels.ops.__all__}
    rows = [
        (f"sycl_kernels.ops.{row[0]}", row[1])
        for row in (line.split() for line in out.splitlines())
        if row and f"sycl_kernels.ops.{row[0]}" in families
    ]
    assert sorted(family for family, _ in rows) == sorted(families), out
    for family, name in rows:
        assert getattr(sycl_kernels.ops, name).__module__ == family, name


# What a plain `pip install .` lacks: numpy, which torch warns about at its import.
_WITHOUT_NUMPY = """
import sys

class _NoNumpy:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "numpy":
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, _NoNumpy())
"""


def test_import_without_numpy_prints_no_warning(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(_WITHOUT_NUMPY)
    path = os.pathsep.join(filter(None, (str(tmp_path), os.environ.get("PYTHONPATH"))))
    script = "import sycl_kernels, sys; print('numpy' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
    assert "NumPy" not in result.stderr, result.stderr


@pytest.mark.needs_bundled(
    "rmsnorm_fp32_h4096_cpu",
    "fused_add_rmsnorm_fp32_h4096_cpu",
    "rope_fp32_d128_r128_neox_i64_cpu",
    "silu_and_mul_fp32_d11008_cpu",
)
def test_bench_quick_reports_every_part(tmp_path: Path) -> None:
    report = tmp_path / "bench.json"
    out = _cli(
        "bench",
        "--quick",
        "--ops",
        "rmsnorm",
        "timestep_embedding",
        "--json",
        str(report),
        cache=tmp_path / "cache",
    ).stdout
    assert "Roofline: SYCL copy kernel" in out and "## Host overhead" in out
    document = json.loads(report.read_text())
    assert document["copy_gbps"] > 0
    rows = document["throughput"]
    assert {r["op"] for r in rows} == {"rmsnorm", "timestep_embedding"}
    assert len(rows) == 2 * 2 + 2  # rmsnorm: 2 dtypes x 2 token counts; timestep: fp32 x 2
    assert all(r["sycl_us"] > 0 and r["torch_us"] > 0 and r["max_error"] < 5e-2 for r in rows)
    assert all(r["of_copy"] == pytest.approx(r["copy_us"] / r["sycl_beside_copy_us"]) for r in rows)
    overhead = document["host_overhead_us"]
    assert set(overhead) == {
        "sycl_kernels.rmsnorm(x, w, eps, out=out)",
        "torch.ops.sycl_kernels.rmsnorm_out (the dispatcher, as compiled graphs call it)",
        "torch rms_norm",
        "- checks",
        "- arguments: the record of a call (bound by name)",
        "- binding: spec, kernel, metadata arguments",
        "- of a repeated call, both: the bound launch found by its key",
        "- launch: marshalling, submit, wait",
        "  - of which marshalling and submit, without the wait",
        "Kernel.launch (tensors through DLPack, jit.load's path)",
    }
    assert all(us > 0 for us in overhead.values())
    assert set(document["kernel_latency_ms"]) == {
        "cold JIT compile (first call)",
        "disk cache, SPIR-V (first call)",
        "disk cache, native binary (first call)",
        "AOT image, SPIR-V (first call)",
        "AOT image, native binary (first call)",
        "Llama layer, 4 kernels, SPIR-V",
        "Llama layer, 4 kernels, native",
        "in-memory hit (per lookup)",
    }


def test_bench_rejects_unknown_ops(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sycl_kernels", "bench", "--ops", "softmax"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "unknown ops: softmax" in result.stderr


def test_bench_model_times_both_models(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 256,
                "intermediate_size": 2048,
                "num_hidden_layers": 1,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "head_dim": 64,
                "vocab_size": 128,
                "bos_token_id": 1,
                "eos_token_id": 2,
            }
        )
    )
    report = tmp_path / "model.json"
    args = ["--prefill", "8", "--decode", "2", "--repeats", "1", "--json", str(report)]
    out = _cli("bench", "--model", str(config), *args, cache=tmp_path / "cache").stdout
    assert "config.json fp32: 1 x act_and_mul silu, 3 x rmsnorm, 1 x apply_rope" in out
    for dtype in ("fp32", "bf16"):
        assert f"| config.json | {dtype} | transformers |" in out
        assert f"| config.json | {dtype} | patched |" in out
    rows = json.loads(report.read_text())["results"]
    assert [(r["dtype"], r["model"]) for r in rows] == [
        ("fp32", "transformers"),
        ("fp32", "patched"),
        ("bf16", "transformers"),
        ("bf16", "patched"),
    ]
    assert all(r["prefill_tokens_per_s"] > 0 and r["decode_tokens_per_s"] > 0 for r in rows)
    assert all(0 < r["decode_kernel_share"] < 1 for r in rows if r["model"] == "patched")
