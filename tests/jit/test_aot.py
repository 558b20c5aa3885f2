"""AOT images: hash parity with the JIT, served without compiling, and a safe fallback."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from sycl_kernels import _runtime
from sycl_kernels._build_config import read_build_config
from sycl_kernels._dtypes import BY_NAME
from sycl_kernels.jit import aot, compile_inputs, loader
from sycl_kernels.specs.norm import rmsnorm_spec
from sycl_kernels.specs.spec import TUNINGS
from sycl_kernels.specs.variants import read_manifest, spec_for
from sycl_kernels.toolchain.sources import KERNELS_DIR

from tests import references

REPO_KERNELS = Path(__file__).resolve().parents[2] / "kernels"


@pytest.mark.wheel
def test_every_manifest_variant_is_bundled() -> None:
    listed = {v.spec.name for v in read_manifest(REPO_KERNELS / "variants.toml")}
    assert {f"rmsnorm_{d}_h4096_{t}" for d in BY_NAME for t in TUNINGS} <= listed
    assert set(aot.manifest()) == listed
    for entry in aot.manifest().values():
        assert (aot.AOT_DIR / entry["image"]).stat().st_size == entry["bytes"] > 0


@pytest.mark.wheel
def test_build_hash_equals_the_jit_hash_for_every_variant() -> None:
    for name, entry in aot.manifest().items():
        spec = spec_for(entry["op"], entry["params"])
        assert spec.name == name
        assert compile_inputs(spec).portable_digest() == entry["input_hash"], name


def test_hash_changes_with_one_flag() -> None:
    spec = rmsnorm_spec(BY_NAME["bf16"], 4096, "cpu")
    config = read_build_config()
    flagged = {**config, "device_options": [*config["device_options"], "-DSOMETHING=1"]}
    assert compile_inputs(spec).digest() != compile_inputs(spec, build_config=flagged).digest()
    assert (
        compile_inputs(spec).portable_digest()
        != compile_inputs(spec, build_config=flagged).portable_digest()
    )


def test_cache_key_holds_the_runtime_release_and_the_aot_key_does_not() -> None:
    spec = rmsnorm_spec(BY_NAME["bf16"], 4096, "cpu")
    installed = compile_inputs(spec)
    other = dataclasses.replace(installed, runtime_version="0.0")
    assert other.digest() != installed.digest()
    assert other.portable_digest() == installed.portable_digest()
    other_line = dataclasses.replace(installed, line_options=("-fsome-line-only-flag",))
    assert other_line.digest() != installed.digest()
    assert other_line.portable_digest() == installed.portable_digest()


def test_hash_follows_included_headers_only(tmp_path: Path) -> None:
    spec = rmsnorm_spec(BY_NAME["bf16"], 4096, "cpu")
    kernels = tmp_path / "kernels"
    shutil.copytree(KERNELS_DIR, kernels)
    original = compile_inputs(spec, kernels_dir=kernels).digest()
    assert original == compile_inputs(spec).digest(), "install paths must not enter the hash"

    (kernels / "common" / "unrelated.hpp").write_text("#pragma once\n")
    assert compile_inputs(spec, kernels_dir=kernels).digest() == original

    # reduce.hpp is reached only through rmsnorm.hpp's include tree.
    with (kernels / "common" / "reduce.hpp").open("a") as f:
        f.write("// edited\n")
    assert compile_inputs(spec, kernels_dir=kernels).digest() != original


@pytest.mark.wheel
def test_installed_wheel_serves_aot_without_compiling_and_jit_otherwise(fresh_cache: Path) -> None:
    # A fresh cache: with an earlier test's native binary of the kernel in the cache,
    # it would load that instead of the AOT image (jit/native.py).
    script = (
        "import json, torch, sycl_kernels\n"
        "from sycl_kernels.jit import stats\n"
        "sycl_kernels.rmsnorm(torch.randn(4, 4096), torch.randn(4096))\n"
        "aot = stats()\n"
        "sycl_kernels.rmsnorm(torch.randn(4, 4000), torch.randn(4000))\n"
        "jit = stats()\n"
        "print(json.dumps([sycl_kernels.__file__, vars(aot), vars(jit)]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd="/"
    )
    assert result.returncode == 0, result.stderr
    location, after_aot, after_jit = json.loads(result.stdout)
    assert "site-packages" in location, "the test must run against an installed wheel"
    assert (after_aot["compiles"], after_aot["aot_loads"]) == (0, 1)
    assert (after_jit["compiles"], after_jit["aot_loads"]) == (1, 1)


# The manifest keys that only size a kernel (the rest pick its code: dtype, tuning,
# style, layout, cache kind, ...).
_SIZE_KEYS = frozenset({"hidden", "dim", "head_dim", "rotary_dim"})


def _one_variant_per_family(manifest: dict[str, dict]) -> list[str]:
    """A variant of each op with each combination of the manifest keys but its sizes:
    every code path of every kernel template, without loading them all (each load
    builds a native binary, ~0.3 s: the 965 variants took more than the 600 s allowed
    on a loaded machine; this is about a fifth of them)."""
    chosen: dict[tuple, str] = {}
    for name, entry in manifest.items():
        code = sorted((k, v) for k, v in entry["params"].items() if k not in _SIZE_KEYS)
        chosen.setdefault((entry["op"], repr(code)), name)
    return sorted(chosen.values())


@pytest.mark.wheel
def test_manifest_variants_load_with_the_jit_off(fresh_cache: Path) -> None:
    """On whichever runtime line is installed: the images are SPIR-V, compiled by the
    build's line, and must load on every supported one without compiling: a variant of
    each code path (_one_variant_per_family; what a line changes is its loader and
    compiler, not the sizes). A backend that fails on one size shows in the build with
    -DSYCL_KERNELS_AOT_DEVICE_BUILD=ON (docs/kernel-development.md)."""
    names = _one_variant_per_family(aot.manifest())
    script = (
        "import json, sys, sycl_kernels\n"
        "from sycl_kernels import _runtime\n"
        "from sycl_kernels.jit import aot, loader\n"
        "from sycl_kernels.specs.variants import spec_for\n"
        "queue = _runtime.cpu_queue()\n"
        "manifest = aot.manifest()\n"
        "names = [loader.get_kernel(spec_for(manifest[n]['op'], manifest[n]['params']), queue)"
        ".name for n in json.loads(sys.argv[1])]\n"
        "print(json.dumps([names, vars(loader.stats())]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, json.dumps(names)],
        env={**os.environ, "SYCL_KERNELS_JIT": "0"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    loaded, stats = json.loads(result.stdout)
    assert loaded == names and len(names) > 150
    assert (stats["aot_loads"], stats["compiles"], stats["disk_hits"]) == (len(names), 0, 0)


@pytest.mark.wheel
def test_every_manifest_variant_counts_as_bundled() -> None:
    # What tests marked needs_bundled(...) are selected by (tests/conftest.py): in the
    # wheel none of them may be deselected.
    variants = read_manifest(KERNELS_DIR / "variants.toml")
    assert len(variants) > 600
    assert [v.spec.name for v in variants if not aot.is_bundled(compile_inputs(v.spec))] == []


@pytest.fixture
def aot_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_cache: Path) -> Path:
    """A private copy of the bundled images that the lookup reads instead."""
    copy = tmp_path / "aot"
    shutil.copytree(aot.AOT_DIR, copy)
    monkeypatch.setattr(aot, "AOT_DIR", copy)
    return copy


def _entry(copy: Path, name: str) -> dict:
    return aot.manifest(copy)[name]


def _load_and_check(name_hidden: int) -> None:
    """Loads rmsnorm_fp32_h<hidden>_cpu through the lookup and checks it computes rmsnorm."""
    spec = rmsnorm_spec(BY_NAME["fp32"], name_hidden, "cpu")
    queue = _runtime.cpu_queue()
    before = loader.stats().compiles
    (kernel,) = loader.load_kernels(
        compile_inputs(spec), queue, [(spec.name, spec.signature, spec.group_size)]
    )
    assert loader.stats().compiles == before + 1, "the JIT should have compiled instead"
    x, weight = torch.randn(2, name_hidden), torch.randn(name_hidden)
    out = torch.empty_like(x)
    rows = (0, 0, name_hidden)  # row strides (kernels/common/rows.hpp)
    group = spec.group_size
    kernel.launch(queue, 2 * group, group, x, *rows, weight, out, *rows, 1, 2, 1e-6)
    torch.testing.assert_close(
        out.double(), references.rmsnorm(x, weight, 1e-6), **references.tolerance(torch.float32)
    )


@pytest.mark.wheel
def test_corrupt_image_falls_back_to_the_jit(aot_copy: Path) -> None:
    image = aot_copy / _entry(aot_copy, "rmsnorm_fp32_h512_cpu")["image"]
    image.write_bytes(image.read_bytes()[:100])
    with pytest.warns(RuntimeWarning, match="corrupt"):
        _load_and_check(512)


@pytest.mark.wheel
def test_missing_image_falls_back_to_the_jit(aot_copy: Path) -> None:
    (aot_copy / _entry(aot_copy, "rmsnorm_fp32_h1024_cpu")["image"]).unlink()
    with pytest.warns(RuntimeWarning, match="unreadable"):
        _load_and_check(1024)


@pytest.mark.wheel
def test_image_that_fails_to_load_falls_back_to_the_jit(aot_copy: Path) -> None:
    # Right checksum, wrong content: valid SPIR-V magic, then garbage.
    garbage = (0x07230203).to_bytes(4, "little") + b"\xff" * 60
    manifest_file = aot_copy / aot.MANIFEST_NAME
    document = json.loads(manifest_file.read_text())
    for entry in document["variants"]:
        if entry["name"] == "rmsnorm_fp32_h1536_cpu":
            (aot_copy / entry["image"]).write_bytes(garbage)
            entry["sha256"] = hashlib.sha256(garbage).hexdigest()
    manifest_file.write_text(json.dumps(document))
    with pytest.warns(RuntimeWarning, match="did not load"):
        _load_and_check(1536)


@pytest.mark.wheel
def test_unreadable_manifest_is_ignored_with_a_warning(aot_copy: Path) -> None:
    (aot_copy / aot.MANIFEST_NAME).write_text("{not json")
    with pytest.warns(RuntimeWarning, match="ignoring unreadable"):
        assert aot.manifest(aot_copy) == {}


@pytest.mark.wheel
def test_mismatched_hash_is_skipped_quietly(aot_copy: Path) -> None:
    spec = rmsnorm_spec(BY_NAME["fp32"], 2048, "cpu")
    inputs = compile_inputs(spec)
    assert aot.find_image(inputs) is not None
    assert aot.find_image(dataclasses.replace(inputs, runtime_version="0.0")) is not None
    assert aot.find_image(dataclasses.replace(inputs, options=(*inputs.options, "-DX"))) is None


@pytest.mark.wheel
def test_info_reports_bundled_variants() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sycl_kernels", "info"], capture_output=True, text=True, timeout=120
    )
    count = len(read_manifest(REPO_KERNELS / "variants.toml"))
    assert f"AOT variants:     {count} (" in result.stdout, result.stdout
