"""sycl_kernels.__main__: `python -m sycl_kernels info|demo|bench|cache|precompile`."""

from __future__ import annotations

import argparse
import fnmatch
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

from . import _runtime
from ._bench import ACTIVATION_OPS, ALL_OPS, HEAD_OPS, NORM_OPS, Result, measure
from ._bench import run as run_bench
from ._bench_model import run as run_model_bench
from ._cases import activation_case, head_case, norm_case, timestep_case
from ._devices import default_device, devices
from ._dtypes import BY_NAME, DTYPES
from .jit import aot, compile_inputs, compiler, stats
from .jit.build import cached_or_compiled
from .jit.cache import disk_cache
from .jit.sources import BUILD_CONFIG_FILE, KERNELS_DIR, read_build_config
from .jit.variants import read_manifest

DEMO_SHAPES = ((1, 4096), (256, 4096), (4096, 4096), (256, 8192))
DEMO_DTYPES = tuple(d.torch_dtype for d in DTYPES)


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


def _print_table(title: str, rows: list[Result]) -> bool:
    header = (
        f"{'op':<20} {'dtype':<6} {'shape':>20} {'sycl ms':>9} {'torch ms':>9} "
        f"{'speedup':>8} {'max err':>9}"
    )
    print(f"\n{title}\n{header}\n{'-' * len(header)}")
    ok = True
    for r in rows:
        ok &= r.max_error <= DEMO_TOLERANCE[r.dtype]
        print(
            f"{r.op:<20} {r.dtype:<6} {r.shape:>20} {r.sycl_us / 1e3:>9.3f} "
            f"{r.torch_us / 1e3:>9.3f} {r.speedup:>7.1f}x {r.max_error:>9.2e}"
        )
    return ok


def cmd_demo(args: argparse.Namespace) -> int:
    device = default_device()
    print(f"sycl_kernels on {device} (SYCL device {_runtime.queue_for(device).device['name']})")
    print("max err: largest |ours - torch| / (1 + |torch|)")
    rms = [
        measure(
            "rmsnorm",
            dtype,
            f"{rows}x{hidden}",
            norm_case("rmsnorm", dtype, device, rows, hidden),
            device,
        )
        for dtype in DEMO_DTYPES
        for rows, hidden in DEMO_SHAPES
    ]
    ok = _print_table("rmsnorm vs torch.nn.functional.rms_norm", rms)
    bf16 = torch.bfloat16
    every = [
        *(
            measure(op, bf16, "256x4096", norm_case(op, bf16, device, 256, 4096), device)
            for op in NORM_OPS
        ),
        *(
            measure(
                op, bf16, "256x(32+8)x128", head_case(op, bf16, device, 256, 32, 8, 128), device
            )
            for op in HEAD_OPS
        ),
        *(
            measure(op, bf16, "256x2*11008", activation_case(op, bf16, device, 256, 11008), device)
            for op in ACTIVATION_OPS
        ),
        measure(
            "timestep_embedding", torch.float32, "256x256", timestep_case(device, 256, 256), device
        ),
    ]
    ok &= _print_table("every op vs its torch eager form (bf16; timestep_embedding fp32)", every)
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


def cmd_cache(args: argparse.Namespace) -> int:
    cache = disk_cache()
    if args.action == "path":
        print(cache.root)
    elif args.action == "clear":
        print(f"removed {cache.clear()} entries from {cache.root}")
    else:
        entries = cache.entries()
        for e in entries:
            print(f"{e.name:<40} {e.digest[:16]}  {e.size / 1e3:>8.1f} kB")
        total = sum(e.size for e in entries)
        print(f"{len(entries)} entries, {total / 1e6:.2f} MB in {cache.root}")
    return 0


def cmd_precompile(args: argparse.Namespace) -> int:
    manifests = args.manifest or [KERNELS_DIR / "variants.toml"]
    variants = [
        v
        for path in manifests
        for v in read_manifest(Path(path))
        if any(fnmatch.fnmatchcase(v.spec.name, pattern) for pattern in args.select)
    ]
    queue = _runtime.cpu_queue()
    summary = []
    for variant in tqdm(variants, desc="precompile", unit="variant", file=sys.stderr):
        inputs = compile_inputs(variant.spec)
        start = time.perf_counter()
        origin = (
            "aot" if aot.find_image(inputs) is not None else cached_or_compiled(inputs, queue)[1]
        )
        summary.append((variant.spec.name, origin, time.perf_counter() - start))
    for name, origin, seconds in summary:
        print(f"{name:<40} {origin:<9} {seconds:>7.2f} s")
    counts = {
        o: sum(1 for _, origin, _ in summary if origin == o) for o in ("aot", "disk", "compiled")
    }
    print(", ".join(f"{n} {o}" for o, n in counts.items()) + f" (cache: {disk_cache().root})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sycl_kernels", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    info = commands.add_parser("info", help="runtime version, devices, compiler and paths")
    info.set_defaults(run=cmd_info)
    demo = commands.add_parser("demo", help="every op vs torch: time and error at LLM shapes")
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
    cache.add_argument("action", choices=("ls", "clear", "path"))
    cache.set_defaults(run=cmd_cache)
    precompile = commands.add_parser(
        "precompile", help="compile the variants of manifests (kernels/variants.toml format)"
    )
    precompile.add_argument("manifest", nargs="*", help="TOML manifests (default: the package's)")
    precompile.add_argument("--select", nargs="+", default=["*"], help="variant name globs")
    precompile.set_defaults(run=cmd_precompile)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
