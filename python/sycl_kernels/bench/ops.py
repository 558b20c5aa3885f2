"""sycl_kernels.bench.ops: `python -m sycl_kernels bench`, every op against torch and the roofline.

Four measurements, each side by side in one run (the machine may be shared):
throughput of every op at LLM shapes against its torch eager form, as GB/s and as
a fraction of a SYCL copy kernel's bandwidth on the same device; the per-call
host cost of tiny calls (our op, torch's, and the host module's launches of the
same kernel); and the latency of getting a kernel (cold compile, disk, memory, AOT).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import pkgutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .. import _runtime, jit, ops
from .._dtypes import BY_NAME, DTYPES
from ..ops import norm as norm_ops
from ..specs.norm import rmsnorm_spec
from .registry import BENCH_OPS, Case
from .timing import alternating_median_seconds, median_seconds

# Each family's cases register themselves in their module of this package
# (bench/<family>.py): importing every module registers them all, a new op's with them.
for _module in pkgutil.iter_modules(sys.modules[__package__].__path__):
    importlib.import_module(f"{__package__}.{_module.name}")
ALL_OPS = tuple(BENCH_OPS)
DTYPE_NAMES = {d.torch_dtype: d.short_name for d in DTYPES}

# Enough calls for a stable median, few enough for slow torch shapes.
_TARGET_SECONDS = 0.25


@dataclass(frozen=True)
class Result:
    op: str
    dtype: str
    shape: str
    bytes_moved: int
    sycl_us: float
    torch_us: float
    copy_us: float
    """The SYCL copy kernel moving the same bytes, its calls alternating with ours."""
    sycl_beside_copy_us: float
    """Ours in those alternating calls: of_copy's denominator."""
    max_error: float
    """Largest |ours - torch| / (1 + |torch|) after one call of each."""

    @property
    def speedup(self) -> float:
        return self.torch_us / self.sycl_us

    @property
    def of_copy(self) -> float:
        """Ours against a copy of as many bytes: the fraction of the copy's bandwidth."""
        return self.copy_us / self.sycl_beside_copy_us

    @property
    def gbps(self) -> float:
        return self.bytes_moved / self.sycl_us / 1e3


def _repeats(fn: Callable[[], object], device: torch.device) -> int:
    start = time.perf_counter()
    fn()
    if device.type == "xpu":
        torch.xpu.synchronize(device)
    once = time.perf_counter() - start
    return int(min(50, max(3, _TARGET_SECONDS / max(once, 1e-6))))


def max_error(case: Case) -> float:
    """Largest |ours - torch| / (1 + |torch|) after one call of each."""
    ours, theirs = case.ours().double(), case.theirs().double()
    return ((ours - theirs).abs() / (1 + theirs.abs())).max().item()


def against_torch(case: Case, device: torch.device) -> tuple[float, float]:
    """Median seconds of a call of ours and of torch's, after a warm-up, their calls
    taken in turn (demo's timing: a slow moment of a shared machine falls on both)."""
    repeats = min(_repeats(case.ours, device), _repeats(case.theirs, device))
    ours, theirs = alternating_median_seconds((case.ours, case.theirs), device, repeats=repeats)
    return ours, theirs


def op_family(name: str) -> str | None:
    """The family of exported op `name`: its module's name in sycl_kernels.ops (norm,
    rope, ...); None for a bench entry that is not an exported op (a variant, as
    dynamic_quantize_g128)."""
    if name not in ops.__all__:
        return None
    return getattr(ops, name).__module__.rpartition(".")[2]


def measure(op: str, dtype: torch.dtype, shape: str, case: Case, device: torch.device) -> Result:
    error = max_error(case)
    # Against torch, each op's calls back to back, as a model calls them: a small
    # case's tensors stay in cache for both. Against the copy, the two call by call: a
    # shared machine's load moves by 2x within seconds, more than between two ops of
    # one case; the copy's buffers then evict a small case's, so ours is timed apart.
    sycl = median_seconds(case.ours, device, repeats=_repeats(case.ours, device))
    ref = median_seconds(case.theirs, device, repeats=_repeats(case.theirs, device))
    copy = copy_call(device, case.bytes_moved)
    beside_copy, copied = alternating_median_seconds(
        (case.ours, copy), device, repeats=_repeats(case.ours, device)
    )
    return Result(
        op,
        DTYPE_NAMES[dtype],
        shape,
        case.bytes_moved,
        sycl * 1e6,
        ref * 1e6,
        copied * 1e6,
        beside_copy * 1e6,
        error,
    )


def throughput_plan(
    selected: tuple[str, ...], quick: bool
) -> Iterator[tuple[str, torch.dtype, str, Callable[[torch.device], Case]]]:
    tokens = (16, 4096) if quick else (1, 16, 256, 4096)
    dtypes = (
        (torch.bfloat16, torch.float32) if quick else (torch.float16, torch.bfloat16, torch.float32)
    )
    for op in selected:
        entry = BENCH_OPS[op]
        for dtype in entry.dtypes or dtypes:
            for t in tokens:
                for shape, build in entry.shapes(t, quick):
                    yield op, dtype, shape, functools.partial(build, dtype)


COPY_SOURCE = """
#include "common/device.hpp"
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void copy_fp32(const float* in, float* out, int64_t n) {
  const int64_t i = sycl_kernels::this_nd_item().get_global_id(0);
  if (i < n) out[i] = in[i];
}
"""


def copy_call(device: torch.device, bytes_moved: int) -> Callable[[], None]:
    """A launch of the SYCL copy kernel that reads and writes bytes_moved in all."""
    n = max(1, bytes_moved // 8)
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    module = jit.load("bench_copy", source=COPY_SOURCE)
    groups = (n + 255) // 256
    launch = functools.partial(module.launch, "copy_fp32", groups, 256, src, dst, n)
    launch()
    if not torch.equal(src, dst):
        raise RuntimeError("the copy kernel did not copy")
    return launch


def copy_bandwidth(device: torch.device, megabytes: int) -> tuple[float, float]:
    """(SYCL copy kernel GB/s, torch copy_ GB/s), read + write counted, side by side."""
    moved = 2 * megabytes * (1 << 20)
    sycl = median_seconds(copy_call(device, moved), device, repeats=10)
    src = torch.randn(moved // 8, device=device)
    dst = torch.empty_like(src)
    ref = median_seconds(lambda: dst.copy_(src), device, repeats=10)
    return moved / sycl / 1e9, moved / ref / 1e9


def host_overhead(repeats: int) -> dict[str, float]:
    """Microseconds per call of a 1 x 64 fp32 rmsnorm: the whole call by path, then its parts.

    The dispatcher's path (torch.ops) runs the same checks and launch behind torch's
    custom-op machinery. The parts are what a call of new metadata does in order:
    the checks (ops/_op.py's `check`, metadata only), the binding (spec, loaded
    kernel, the launch's metadata arguments) and the host module's launch (argument
    marshalling, submit, and the wait for the CPU device). A repeated call finds its
    bound launch by its arguments' metadata instead of the first two. Of the launch,
    the submit alone is timed on a non-blocking alias of the same queue
    (Queue.borrow), waited once a batch, so the rest is the wait.
    """
    x, w = torch.randn(1, 64), torch.randn(64)
    out = torch.empty_like(x)
    queue = _runtime.cpu_queue()
    fp32 = BY_NAME["fp32"]
    spec = rmsnorm_spec(fp32, 64, "cpu")
    kernel = jit.get_kernel(spec, queue)
    group = spec.group_size
    no_wait = _runtime.host_module().Queue.borrow(queue.address)
    rows = (0, 0, 64)  # row strides (kernels/common/rows.hpp)
    eps = 1e-6
    plan = norm_ops.rmsnorm.check(x, w, eps, out)
    record = norm_ops.rmsnorm.schema.bind((x, w, eps), {"out": out})

    def launch_on(q) -> Callable[[], None]:
        """The bound launch the ops make after their checks, on queue q."""
        bound = kernel._bind(q, group, group, [(0, 0), *rows, (1, 0), (3, 0), *rows, 1, 1, eps])
        return lambda: bound(x, w, eps, out)

    paths = {
        "sycl_kernels.rmsnorm(x, w, eps, out=out)": lambda: ops.rmsnorm(x, w, eps, out=out),
        "torch.ops.sycl_kernels.rmsnorm_out (the dispatcher, as compiled graphs call it)": (
            lambda: torch.ops.sycl_kernels.rmsnorm_out(x, w, eps, out)
        ),
        "torch rms_norm": lambda: torch.nn.functional.rms_norm(x, (64,), w, eps),
        "- checks": lambda: norm_ops.rmsnorm.check(x, w, eps, out),
        "- arguments: the record of a call (bound by name)": (
            lambda: norm_ops.rmsnorm.schema.bind((x, w, eps), {"out": out})
        ),
        "- binding: spec, kernel, metadata arguments": (
            lambda: norm_ops.rmsnorm.bind(plan, record).launcher(type(record))
        ),
        "- of a repeated call, both: the bound launch found by its key": (
            lambda: norm_ops.rmsnorm.bound_launch(record)
        ),
        "- launch: marshalling, submit, wait": launch_on(queue),
        "  - of which marshalling and submit, without the wait": launch_on(no_wait),
        "Kernel.launch (tensors through DLPack, jit.load's path)": lambda: kernel.launch(
            queue, group, group, x, *rows, w, out, *rows, 1, 1, eps
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(7):
        for name, fn in paths.items():
            start = time.perf_counter()
            for _ in range(repeats):
                fn()
            queue.wait()
            samples[name].append((time.perf_counter() - start) / repeats * 1e6)
    # The minimum: host cost is what a call takes when nothing else preempts it.
    return {name: min(v) for name, v in samples.items()}


# Both scripts collect garbage before the timer: a full collection of torch's heap
# (about 80 ms here) is due after import, and whichever allocation comes next pays
# it, the first call's lookup included (5-8 ms without it).
_FIRST_CALL = """
import gc, json, sys, time, torch, sycl_kernels
from sycl_kernels import _runtime
_runtime.cpu_queue()
x, w = torch.randn(8, {hidden}), torch.randn({hidden})
gc.collect()
start = time.perf_counter()
sycl_kernels.rmsnorm(x, w)
first = time.perf_counter() - start
print(json.dumps({{"seconds": first, **vars(sycl_kernels.jit.stats())}}))
"""

# The kernels of a Llama-7B layer (fp32, bundled): norm, fused add, rotary, MLP activation.
_LLAMA_LAYER_FIRST_CALLS = """
import gc, json, time, torch, sycl_kernels
from sycl_kernels import _runtime
_runtime.cpu_queue()
x, r, w = torch.randn(8, 4096), torch.randn(8, 4096), torch.randn(4096)
q, k = torch.randn(8, 32, 128), torch.randn(8, 8, 128)
cache, positions = torch.randn(64, 128), torch.arange(8)
gate_up = torch.randn(8, 2 * 11008)
gc.collect()
start = time.perf_counter()
sycl_kernels.rmsnorm(x, w)
sycl_kernels.fused_add_rmsnorm(x, r, w)
sycl_kernels.apply_rope(positions, q, k, cache, True)
sycl_kernels.silu_and_mul(gate_up)
first = time.perf_counter() - start
print(json.dumps({"seconds": first, **vars(sycl_kernels.jit.stats())}))
"""


def compile_latency(runs: int) -> dict[str, float]:
    """Milliseconds to the first result in a fresh process, by where the kernels come from:
    compiled, or a cached or bundled SPIR-V image, or its cached native binary."""

    def first_call(script: str, cache: str, native: bool = True) -> dict:
        result = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={
                **os.environ,
                "SYCL_KERNELS_CACHE_DIR": cache,
                "SYCL_KERNELS_NATIVE_CACHE": "1" if native else "0",
            },
        )
        return json.loads(result.stdout)

    def expect(result: dict, **counts: int) -> float:
        if any(result[key] != count for key, count in counts.items()):
            raise RuntimeError(f"unexpected kernel sources: {result}, expected {counts}")
        return result["seconds"]

    times: dict[str, list[float]] = {}

    def add(label: str, seconds: float) -> None:
        times.setdefault(label, []).append(seconds)

    for run in range(runs):
        with tempfile.TemporaryDirectory() as cache:
            hidden = _FIRST_CALL.format(hidden=4000 + 2 * run)  # not bundled, not cached
            add("cold JIT compile (first call)", expect(first_call(hidden, cache), compiles=1))
            spirv = first_call(hidden, cache, native=False)
            add("disk cache, SPIR-V (first call)", expect(spirv, disk_hits=1, native_loads=0))
            add(
                "disk cache, native binary (first call)",
                expect(first_call(hidden, cache), native_loads=1),
            )
            bundled = _FIRST_CALL.format(hidden=4096)
            add("AOT image, SPIR-V (first call)", expect(first_call(bundled, cache), aot_loads=1))
            add(
                "AOT image, native binary (first call)",
                expect(first_call(bundled, cache), native_loads=1),
            )
            layer = _LLAMA_LAYER_FIRST_CALLS
            add(
                "Llama layer, 4 kernels, SPIR-V",
                expect(first_call(layer, cache, False), aot_loads=4),
            )
            first_call(layer, cache)  # keeps the native binaries the layer lacks
            add("Llama layer, 4 kernels, native", expect(first_call(layer, cache), native_loads=4))
    queue = _runtime.cpu_queue()
    spec = rmsnorm_spec(BY_NAME["fp32"], 4096, "cpu")
    jit.get_kernel(spec, queue)
    n = 100_000
    start = time.perf_counter()
    for _ in range(n):
        jit.get_kernel(spec, queue)
    hit = (time.perf_counter() - start) / n
    return {
        **{label: statistics.median(seconds) * 1e3 for label, seconds in times.items()},
        "in-memory hit (per lookup)": hit * 1e3,
    }


def _table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def throughput_table(results: list[Result]) -> str:
    rows = [
        [
            r.op,
            r.dtype,
            r.shape,
            f"{r.sycl_us:.1f}",
            f"{r.torch_us:.1f}",
            f"{r.speedup:.2f}x",
            f"{r.gbps:.1f}",
            f"{r.of_copy:.0%}",
            f"{r.max_error:.1e}",
        ]
        for r in results
    ]
    headers = [
        "op",
        "dtype",
        "shape",
        "sycl us",
        "torch us",
        "speedup",
        "GB/s",
        "of copy",
        "max err",
    ]
    return _table(headers, rows)


def plot(results: list[Result], copy_gbps: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    op_names = list(dict.fromkeys(r.op for r in results))
    columns = min(3, len(op_names))
    rows = (len(op_names) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.6 * rows), squeeze=False)
    for ax, op in zip(axes.flat, op_names, strict=False):
        for dtype in dict.fromkeys(r.dtype for r in results if r.op == op):
            points = sorted(
                (r.bytes_moved, r.gbps, r.bytes_moved / r.torch_us / 1e3)
                for r in results
                if r.op == op and r.dtype == dtype
            )
            sizes = [p[0] for p in points]
            line = ax.plot(sizes, [p[1] for p in points], marker="o", label=f"sycl {dtype}")[0]
            ax.plot(
                sizes,
                [p[2] for p in points],
                marker="x",
                linestyle="--",
                color=line.get_color(),
                alpha=0.6,
                label=f"torch {dtype}",
            )
        ax.axhline(copy_gbps, color="black", linewidth=1, label="SYCL copy")
        ax.set_xscale("log")
        ax.set_title(op)
        ax.set_xlabel("bytes moved")
        ax.set_ylabel("GB/s")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(op_names) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(
    selected: tuple[str, ...], quick: bool, json_path: Path | None, plot_path: Path | None
) -> int:
    device = torch.device("cpu")
    name = _runtime.cpu_queue().device["name"]
    print(f"# sycl_kernels bench on the SYCL CPU device ({name}), {'quick' if quick else 'full'}\n")
    copy_gbps, torch_copy_gbps = copy_bandwidth(device, 64 if quick else 256)
    print(
        f"Roofline: SYCL copy kernel {copy_gbps:.1f} GB/s "
        f"(torch copy_ {torch_copy_gbps:.1f} GB/s)\n"
    )
    results = []
    plan = list(throughput_plan(selected, quick))
    for index, (op, dtype, shape, build) in enumerate(plan, 1):
        print(
            f"\r{index}/{len(plan)} {op} {DTYPE_NAMES[dtype]} {shape}".ljust(60),
            end="",
            file=sys.stderr,
            flush=True,
        )
        results.append(measure(op, dtype, shape, build(device), device))
    print(file=sys.stderr)
    print("## Throughput (median per call; bytes: each tensor read or written once)\n")
    print(throughput_table(results))
    print(
        "\nof copy: the SYCL copy kernel's time for as many bytes over ours, the two "
        "called in turn (the roofline above is one larger copy, timed once)."
    )
    for op in dict.fromkeys(r.op for r in results):
        if BENCH_OPS[op].note:
            print(f"\n{BENCH_OPS[op].note}")
    overhead = host_overhead(200 if quick else 2000)
    print("\n## Host overhead: 1 x 64 fp32 rmsnorm, microseconds per call\n")
    print(_table(["path", "us/call"], [[k, f"{v:.1f}"] for k, v in overhead.items()]))
    latency = compile_latency(1 if quick else 3)
    print("\n## Getting kernels (rmsnorm fp32; a Llama layer's four), milliseconds\n")
    print(_table(["source", "ms"], [[k, f"{v:.4g}"] for k, v in latency.items()]))
    if json_path is not None:
        document = {
            "device": name,
            "quick": quick,
            "copy_gbps": copy_gbps,
            "torch_copy_gbps": torch_copy_gbps,
            "throughput": [
                {**asdict(r), "speedup": r.speedup, "gbps": r.gbps, "of_copy": r.of_copy}
                for r in results
            ],
            "host_overhead_us": overhead,
            "kernel_latency_ms": latency,
        }
        json_path.write_text(json.dumps(document, indent=1) + "\n")
    if plot_path is not None:
        plot(results, copy_gbps, plot_path)
    return 0
