"""sycl_kernels.__main__: `python -m sycl_kernels info|demo|bench|cache|precompile|new-op`."""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from . import _new_op, _runtime
from ._build_config import BUILD_CONFIG_FILE, read_build_config
from ._devices import default_device, devices
from ._dtypes import BY_NAME
from .bench.model import run as run_model_bench
from .bench.ops import ALL_OPS, DTYPE_NAMES, against_torch, max_error, op_family
from .bench.ops import run as run_bench
from .bench.registry import BENCH_OPS
from .jit import aot, stats
from .jit.batch import precompile
from .jit.bundle import export_bundle, import_bundle
from .jit.cache import disk_cache, shared_caches, writable_by_others
from .jit.native import native_cache, shared_native_caches
from .specs.model_variants import config_dtype, model_specs
from .specs.spec import TUNINGS, KernelSpec, read_specs
from .specs.variants import read_manifest
from .toolchain import compiler
from .toolchain.compiler import KernelCompileError
from .toolchain.sources import KERNELS_DIR


def _lines_summary(config: dict) -> str:
    lines = [
        f"libsycl.so.{line} (built against intel-sycl-rt {entry['sycl_runtime_version']})"
        for line, entry in sorted(config["lines"].items())
    ]
    alone = "; this build has one line only (the others were not fetched when it was built)"
    return ", ".join(lines) + (alone if len(lines) == 1 else "")


def cmd_info(_: argparse.Namespace) -> int:
    config = read_build_config()
    xpu = getattr(torch.version, "xpu", None)
    print(f"sycl_kernels {sys.modules['sycl_kernels'].__version__}")
    print(f"torch:            {torch.__version__} (torch.version.xpu: {xpu or 'none'})")
    print(f"runtime lines:    {_lines_summary(config)}")
    try:
        line = _runtime.active_line()
    except _runtime.RuntimeLineError as e:
        print(f"SYCL runtime:     {e}")
        return 1
    print(f"SYCL runtime:     intel-sycl-rt {line.version}, line libsycl.so.{line.major}")
    line_options = config["lines"][str(line.major)]["device_options"]
    print(
        f"device compiler:  {config['device_compiler']} "
        f"{' '.join([*config['device_options'], *line_options])}"
    )
    bundled = aot.manifest()
    image_bytes = sum(entry["bytes"] for entry in bundled.values())
    compiled_by = sorted({entry.get("compiled_by", "?") for entry in bundled.values()})
    print(
        f"AOT variants:     {len(bundled)} ({image_bytes / 1e6:.2f} MB of images in {aot.AOT_DIR}"
        + (f", compiled by {', '.join(compiled_by)})" if compiled_by else ")")
    )
    print(f"kernels:          {KERNELS_DIR}")
    print(f"build config:     {BUILD_CONFIG_FILE}")
    print(f"host module:      {_runtime.host_module().__file__}")
    print(f"native binaries:  {', '.join(_runtime.host_module().native_backends())}")
    print(f"compile tool:     {compiler.tool()}")
    cpu_problem = _runtime.cpu_device_problem()
    if cpu_problem:
        print(f"CPU device:       missing: {cpu_problem}")
    else:
        print(f"default device:   {default_device()}")
    print("SYCL devices:")
    for d in devices():
        print(
            f"  [{d.index}] {d.type:<5} {d.backend:<10} {d.name} (driver {d.driver_version}, "
            f"max work-group {d.max_work_group_size}, sub-groups {list(d.sub_group_sizes)})"
        )
    return 0


# Largest |ours - torch| / (1 + |torch|) the demo accepts: both sides round.
DEMO_TOLERANCE = {"fp32": 1e-3, "fp16": 2e-2, "bf16": 4e-2}


def demo_entries() -> dict[str, str]:
    """family -> the op demo times for it: the family's first registered bench op with a
    demo shape (bench/registry.py), families by name."""
    chosen: dict[str, str] = {}
    for entry in BENCH_OPS.values():
        family = op_family(entry.name)
        if entry.demo is not None and family is not None:
            chosen.setdefault(family, entry.name)
    return dict(sorted(chosen.items()))


def cmd_demo(args: argparse.Namespace) -> int:
    device = default_device()
    print(f"sycl_kernels on {device} (SYCL device {_runtime.queue_for(device).device['name']})")
    print(
        "An op of each family against its torch eager form: median time per call after a "
        "warm-up, the two called in turn; max err: largest |ours - torch| / (1 + |torch|).\n"
    )
    header = (
        f"{'family':<11} {'op':<22} {'dtype':<6} {'shape':>26} {'sycl ms':>9} "
        f"{'torch ms':>9} {'speedup':>8} {'max err':>9}"
    )
    print(f"{header}\n{'-' * len(header)}")
    ok = True
    for family, name in demo_entries().items():
        entry = BENCH_OPS[name]
        shape, build = entry.demo
        dtype = DTYPE_NAMES[entry.demo_dtype]
        case = build(entry.demo_dtype, device)
        error = max_error(case)
        ours, theirs = against_torch(case, device)
        ok &= error <= DEMO_TOLERANCE[dtype]
        print(
            f"{family:<11} {name:<22} {dtype:<6} {shape:>26} {ours * 1e3:>9.3f} "
            f"{theirs * 1e3:>9.3f} {theirs / ours:>7.1f}x {error:>9.2e}"
        )
    s = stats()
    print(
        f"\nkernels: {s.aot_loads} from the wheel's AOT images, {s.disk_hits} from the disk "
        f"cache, {s.compiles} compiled ({s.compile_seconds:.1f} s)"
    )
    if not ok:
        print("error above tolerance: results do not match torch", file=sys.stderr)
        return 1
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.model:
        return run_model_bench(
            args.model, args.dtypes, args.prefill, args.decode, args.batch, args.repeats, args.json
        )
    unknown = set(args.ops) - set(ALL_OPS)
    if unknown:
        raise SystemExit(f"unknown ops: {', '.join(sorted(unknown))} (known: {', '.join(ALL_OPS)})")
    return run_bench(tuple(args.ops), args.quick, args.json, args.plot)


def _cache_ls() -> None:
    """Every cache's device images, then native binaries, each with where it is and
    whether lookups use it (an earlier cache serves it, or the entry or its folder
    is not trusted: docs/jit.md#trust)."""
    private, native = disk_cache(), native_cache()
    folders = [
        ("", private, "private"),
        *(("", c, "shared") for c in shared_caches()),
        (" native binary", native, "private"),
        *((" native binary", c, "shared") for c in shared_native_caches()),
    ]
    served = set()  # (name, digest) of the entries an earlier cache holds
    for kind, cache, where in folders:
        folder_problem = cache.problem()
        entries = cache.entries()
        for e in entries:
            problem = folder_problem or writable_by_others(e.path.lstat())
            if problem:
                note = f" (not used: {problem})"
            else:
                note = " (unused: an earlier cache has it)" if (e.name, e.digest) in served else ""
                served.add((e.name, e.digest))
            print(f"{e.name:<40} {e.digest[:16]}  {e.size / 1e3:>8.1f} kB  {where}{kind}{note}")
        count = f"{len(entries)} {'native binaries' if kind else 'entries'}"
        total = sum(e.size for e in entries) / 1e6
        unused = f"; not used: {folder_problem}" if folder_problem else ""
        print(f"{count}, {total:.2f} MB in {cache.root} ({where}{unused})")


def cmd_cache(args: argparse.Namespace) -> int:
    cache = disk_cache()
    if args.action == "path":
        print(cache.root)
        return 0
    if args.action == "clear":
        print(
            f"removed {cache.clear()} entries from {cache.root} "
            f"and {native_cache().clear()} native binaries"
        )
        return 0
    if args.action == "ls":
        _cache_ls()
        return 0
    if args.action == "export":
        try:
            report = export_bundle(cache, args.file, native=not args.without_native)
        except OSError as e:
            print(f"cache export: cannot write {args.file} ({e})", file=sys.stderr)
            return 1
        print(f"exported {len(report.done)} entries from {cache.root} to {args.file}")
    else:
        if not cache.usable():  # it warned why
            return 1
        report = import_bundle(cache, args.file)
        print(
            f"imported {len(report.done)} entries into {cache.root} "
            f"({len(report.present)} already there)"
        )
    for file, why in report.skipped:
        print(f"skipped {file}: {why}", file=sys.stderr)
    return 1 if report.skipped else 0


def _model_specs(args: argparse.Namespace) -> list[KernelSpec]:
    """The specs the models' configs call, in each --dtype (default: each config's own)."""
    specs = []
    for path in args.model:
        try:
            config = json.loads(Path(path).read_text())
            dtypes = [BY_NAME[d] for d in args.dtype] if args.dtype else [config_dtype(config)]
            specs += [s for dtype in dtypes for s in model_specs(config, dtype, args.device)]
        except (OSError, ValueError) as e:
            raise SystemExit(f"precompile --model {path}: {e}") from None
    return list({s.name: s for s in specs}.values())


def cmd_precompile(args: argparse.Namespace) -> int:
    if args.model:
        specs = _model_specs(args)
    elif args.specs:
        try:
            specs = [s for path in args.specs for s in read_specs(path)]
        except (OSError, ValueError) as e:
            raise SystemExit(f"precompile --specs: {e}") from None
    else:
        manifests = args.manifest or [KERNELS_DIR / "variants.toml"]
        try:
            specs = [v.spec for path in manifests for v in read_manifest(Path(path))]
        except (OSError, ValueError) as e:
            raise SystemExit(f"precompile: {e}") from None
    specs = [s for s in specs if any(fnmatch.fnmatchcase(s.name, p) for p in args.select)]
    start = time.perf_counter()
    with tqdm(desc="precompile", unit="kernel", file=sys.stderr) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        try:
            done = precompile(specs, _runtime.cpu_queue(), progress=progress)
        except (KernelCompileError, RuntimeError, ValueError) as e:
            print(f"precompile: {e}", file=sys.stderr)
            return 1
    seconds = time.perf_counter() - start
    for entry in done:
        print(f"{entry.name:<40} {entry.origin}")
    counts = {o: sum(1 for e in done if e.origin == o) for o in ("aot", "disk", "compiled")}
    print(
        ", ".join(f"{n} {o}" for o, n in counts.items())
        + f" in {seconds:.1f} s (cache: {disk_cache().root})"
    )
    return 0


def cmd_new_op(args: argparse.Namespace) -> int:
    return _new_op.main(args.name, args.root)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sycl_kernels", description=__doc__)
    parser.add_argument(
        "--version",
        action="version",
        version=f"sycl_kernels {sys.modules['sycl_kernels'].__version__}",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    info = commands.add_parser("info", help="runtime version, devices, compiler and paths")
    info.set_defaults(run=cmd_info)
    demo = commands.add_parser("demo", help="an op of each family vs torch: time and error")
    demo.set_defaults(run=cmd_demo)
    bench = commands.add_parser(
        "bench",
        help="ops: throughput, roofline, host overhead, compile latency; "
        "--model: a Hugging Face model end to end",
    )
    bench.add_argument("--ops", nargs="+", default=list(ALL_OPS), help="ops to measure")
    bench.add_argument("--quick", action="store_true", help="fewer shapes and dtypes (< 3 min)")
    bench.add_argument("--json", type=Path, help="write the results as JSON here")
    bench.add_argument("--plot", type=Path, help="write a PNG plot of GB/s vs size here")
    model = bench.add_argument_group(
        "end to end", "--model: a Hugging Face model, patched vs not (needs transformers)"
    )
    model.add_argument(
        "--model", nargs="+", type=Path, metavar="CONFIG.json", help="random weights from these"
    )
    model.add_argument("--prefill", type=int, default=512, help="prompt tokens (default 512)")
    model.add_argument("--decode", type=int, default=16, help="decode steps (default 16)")
    model.add_argument("--batch", type=int, default=1, help="sequences (default 1)")
    model.add_argument(
        "--dtypes", nargs="+", choices=list(BY_NAME), default=["fp32", "bf16"], help="model dtypes"
    )
    model.add_argument("--repeats", type=int, default=3, help="timed runs per model (median)")
    bench.set_defaults(run=cmd_bench)
    cache = commands.add_parser("cache", help="the disk cache of compiled kernels")
    cache.set_defaults(run=cmd_cache)
    cache_actions = cache.add_subparsers(dest="action", required=True)
    cache_actions.add_parser("path", help="print the private cache folder")
    cache_actions.add_parser("ls", help="list the entries of every cache and where each is")
    cache_actions.add_parser("clear", help="delete the private cache's entries")
    export = cache_actions.add_parser("export", help="write the private cache into a bundle")
    export.add_argument("file", type=Path, metavar="FILE", help="the bundle (a .tar.gz)")
    export.add_argument(
        "--without-native",
        action="store_true",
        help="device images only, not the native binaries (which serve one device and driver)",
    )
    imports = cache_actions.add_parser(
        "import", help="publish a bundle's verified entries into the private cache"
    )
    imports.add_argument("file", type=Path, metavar="FILE", help="a bundle from cache export")
    precompile = commands.add_parser(
        "precompile",
        help="compile the variants of manifests (kernels/variants.toml format), "
        "or those a Hugging Face model calls once patched (--model)",
    )
    precompile.add_argument("manifest", nargs="*", help="TOML manifests (default: the package's)")
    precompile.add_argument("--select", nargs="+", default=["*"], help="variant name globs")
    precompile.add_argument(
        "--specs",
        nargs="+",
        type=Path,
        metavar="FILE.json",
        help="kernel spec lists a process wrote (jit.write_specs(path, jit.loaded_specs()))",
    )
    for_model = precompile.add_argument_group(
        "for a model", "--model: the variants integrations.transformers.patch(model) calls"
    )
    for_model.add_argument(
        "--model", nargs="+", type=Path, metavar="CONFIG.json", help="Hugging Face configs"
    )
    for_model.add_argument(
        "--dtype",
        nargs="+",
        choices=list(BY_NAME),
        help="model dtypes (default: each config's dtype, else bf16)",
    )
    for_model.add_argument(
        "--device",
        choices=TUNINGS,
        default="cpu",
        help="the device class the variants are tuned for (default cpu); "
        "compiled for the CPU device either way",
    )
    precompile.set_defaults(run=cmd_precompile)
    new_op = commands.add_parser(
        "new-op",
        help="start a new op in a checkout: a working element-wise op named NAME "
        "(kernel, spec, op, tests, manifest rows; docs/kernel-development.md)",
    )
    new_op.add_argument("name", metavar="NAME", help="the op's name, e.g. scale")
    new_op.add_argument(
        "--root",
        type=Path,
        help="the checkout to write into (default: the one the package is imported from)",
    )
    new_op.set_defaults(run=cmd_new_op)
    args = parser.parse_args(argv)
    sources = ("model", "manifest", "specs")
    if args.command == "precompile" and sum(bool(getattr(args, a)) for a in sources) > 1:
        parser.error("precompile: give manifests, --model or --specs, one of them")
    if args.command == "precompile" and not args.model and (args.dtype or args.device != "cpu"):
        parser.error("precompile: --dtype and --device apply to --model only")
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
