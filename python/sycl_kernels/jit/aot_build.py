"""sycl_kernels.jit.aot_build: the wheel build's AOT steps, run by CMake (cmake/AotVariants.cmake).

    python cmake/aot_build.py plan --kernels-dir D --build-config F --out-dir O [--select GLOB ...]
    python cmake/aot_build.py manifest --out-dir O

`plan` renders each selected manifest variant's translation unit and compile request
(the same CompileInputs the JIT hashes) and the CMake list of variants; `manifest`
records the built images with their checksums for the runtime lookup.
Files are rewritten only when their content changes, so unchanged variants are not rebuilt.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
from pathlib import Path

from .aot import MANIFEST_NAME, SPIRV_TARGET
from .compiler import request_text
from .sources import compile_inputs, read_build_config
from .variants import read_manifest

PLAN_NAME = "plan.json"


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _cmake_path(path: Path) -> str:
    return path.as_posix().replace('"', '\\"')


def plan(kernels_dir: Path, build_config_file: Path, out_dir: Path, select: list[str]) -> int:
    config = read_build_config(build_config_file)
    line = config["aot_line"]
    kernels_dir = kernels_dir.resolve()
    variants = [
        v
        for v in read_manifest(kernels_dir / "variants.toml")
        if any(fnmatch.fnmatchcase(v.spec.name, pattern) for pattern in select)
    ]
    entries, cmake_lines = [], []
    for variant in variants:
        inputs = compile_inputs(
            variant.spec,
            kernels_dir=kernels_dir,
            build_config=config,
            line=line,
        )
        source_file = out_dir / "src" / f"{inputs.name}.cpp"
        _write_if_changed(source_file, inputs.source)
        request = request_text(
            f"{inputs.name} {inputs.portable_digest()}",
            source_file,
            [(name, kernels_dir / name) for name, _ in inputs.headers],
            inputs.all_options,
        )
        _write_if_changed(out_dir / "src" / f"{inputs.name}.request", request)
        headers = ";".join(_cmake_path(kernels_dir / name) for name, _ in inputs.headers)
        cmake_lines.append(f'sycl_kernels_add_variant({inputs.name} HEADERS "{headers}")')
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
    _write_if_changed(out_dir / "variants.cmake", "\n".join(cmake_lines) + "\n")
    _write_if_changed(out_dir / PLAN_NAME, json.dumps({"variants": entries}, indent=1) + "\n")
    print(f"sycl_kernels AOT: {len(entries)} variants selected by {' '.join(select)}")
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
