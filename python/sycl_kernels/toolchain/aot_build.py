"""sycl_kernels.toolchain.aot_build: the wheel build's AOT steps, run by cmake/AotVariants.cmake.

    python cmake/aot_build.py plan --kernels-dir D --build-config F --out-dir O [--select GLOB ...]
    python cmake/aot_build.py manifest --out-dir O

`plan` computes each selected manifest variant's CompileInputs (the ones the JIT
hashes), puts the variants in compile groups (aot_group), and renders each group's
translation unit (its variants' units, one after another), its compile request and
the CMake list of groups; `manifest` records the built images, one per variant, with
their checksums for the runtime lookup. Files are rewritten only when their content
changes, so unchanged groups are not rebuilt.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
from pathlib import Path

from .._build_config import read_build_config
from ..specs.variants import Variant, read_manifest
from .compiler import request_text
from .sources import MANIFEST_NAME, SPIRV_TARGET, CompileInputs, compile_inputs, source_inputs

PLAN_NAME = "plan.json"


def aot_group(variant: Variant) -> str:
    """The group `variant` is compiled in: one per manifest op and dtype.

    One compile per group because starting the compiler costs ~0.7 s and compiling
    one more kernel into SPIR-V ~0.04 s. Each variant still gets an image of its own
    (sycl-kernels-compile --per-kernel): loading an image builds every kernel in it
    for the device, 0.05 to 2 s a kernel on the CPU device, so a bigger image would
    make a process's first call wait for kernels it never calls. Per op, the groups
    include only their op's headers, so a changed header recompiles only the ops
    that include it; per dtype, they stay small enough to keep the cores busy.
    """
    dtype = dict(variant.params).get("dtype")
    return f"{variant.op}_{dtype}" if dtype else variant.op


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _cmake_path(path: Path) -> str:
    return path.as_posix().replace('"', '\\"')


def _write_group(
    name: str, members: list[CompileInputs], kernels_dir: Path, config: dict, out_dir: Path
) -> str:
    """Writes a group's translation unit and request; returns its line of variants.cmake."""
    unit = source_inputs(
        name,
        "".join(inputs.source for inputs in members),
        roots=(kernels_dir,),
        build_config=config,
        line=config["aot_line"],
    )
    source_file = out_dir / "src" / f"{name}.cpp"
    _write_if_changed(source_file, unit.source)
    # What the images are compiled from, runtime release included: when it changes,
    # the request does, and the group is compiled again.
    inputs_digest = hashlib.sha256("".join(m.digest() for m in members).encode()).hexdigest()
    request = request_text(
        f"{name}: {len(members)} kernels, inputs {inputs_digest}",
        source_file,
        [(header, kernels_dir / header) for header, _ in unit.headers],
        unit.all_options,
        [(m.name, out_dir / "images" / f"{m.name}.spv") for m in members],
    )
    _write_if_changed(out_dir / "src" / f"{name}.request", request)
    variants = " ".join(m.name for m in members)
    headers = ";".join(_cmake_path(kernels_dir / header) for header, _ in unit.headers)
    return f'sycl_kernels_add_aot_group({name} VARIANTS {variants} HEADERS "{headers}")'


def plan(kernels_dir: Path, build_config_file: Path, out_dir: Path, select: list[str]) -> int:
    config = read_build_config(build_config_file)
    kernels_dir = kernels_dir.resolve()
    variants = [
        v
        for v in read_manifest(kernels_dir / "variants.toml")
        if any(fnmatch.fnmatchcase(v.spec.name, pattern) for pattern in select)
    ]
    entries, groups = [], {}
    for variant in variants:
        inputs = compile_inputs(
            variant.spec,
            kernels_dir=kernels_dir,
            build_config=config,
            line=config["aot_line"],
        )
        groups.setdefault(aot_group(variant), []).append(inputs)
        entries.append(
            {
                "name": inputs.name,
                "op": variant.op,
                "params": dict(variant.params),
                "image": f"{inputs.name}.spv",
                "format": inputs.image_format,
                "target": SPIRV_TARGET,
                "input_hash": inputs.portable_digest(),
                "compiled_by": f"intel-sycl-rt {inputs.runtime_version}",
            }
        )
    cmake_lines = [
        _write_group(name, members, kernels_dir, config, out_dir)
        for name, members in groups.items()
    ]
    _write_if_changed(out_dir / "variants.cmake", "\n".join(cmake_lines) + "\n")
    _write_if_changed(out_dir / PLAN_NAME, json.dumps({"variants": entries}, indent=1) + "\n")
    print(
        f"sycl_kernels AOT: {len(entries)} variants selected by {' '.join(select)}, "
        f"in {len(groups)} compile groups"
    )
    return 0


def manifest(out_dir: Path) -> int:
    entries = json.loads((out_dir / PLAN_NAME).read_text())["variants"]
    for entry in entries:
        image = (out_dir / "images" / entry["image"]).read_bytes()
        entry["sha256"] = hashlib.sha256(image).hexdigest()
        entry["bytes"] = len(image)
    _write_if_changed(
        out_dir / "images" / MANIFEST_NAME, json.dumps({"variants": entries}, indent=1) + "\n"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cmake/aot_build.py")
    commands = parser.add_subparsers(dest="command", required=True)
    plan_parser = commands.add_parser("plan")
    plan_parser.add_argument("--kernels-dir", type=Path, required=True)
    plan_parser.add_argument("--build-config", type=Path, required=True)
    plan_parser.add_argument("--out-dir", type=Path, required=True)
    plan_parser.add_argument("--select", nargs="+", default=["*"])
    manifest_parser = commands.add_parser("manifest")
    manifest_parser.add_argument("--out-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "plan":
        return plan(args.kernels_dir, args.build_config, args.out_dir, args.select)
    return manifest(args.out_dir)


if __name__ == "__main__":
    raise SystemExit(main())
