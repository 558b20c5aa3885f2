"""The ops of two builds side by side: a baseline package and this one, interleaved rounds.

    cp -a build/dev/stage /tmp/base-stage         # before the change
    ...                                           # change, rebuild or re-install
    python bench/probes/compare.py /tmp/base-stage [--rounds N] [--ops silu_and_mul ...]

Each build runs in a worker process of its own (its PYTHONPATH and kernel cache);
the workers take turns per round on the same tensors (the same seed), so load
from other processes falls on both alike. Reported per call: the worker's process
CPU time (the sum over the device's threads) and wall time, median over rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

DTYPES = ("bf16", "fp16", "fp32")
# op -> (x shape per token count, how the op is called)
SHAPES = {
    "silu_and_mul": lambda tokens: (tokens, 2 * 4096),
    "gelu_and_mul": lambda tokens: (tokens, 2 * 4096),
    "gelu_tanh_and_mul": lambda tokens: (tokens, 2 * 4096),
    "rmsnorm": lambda tokens: (tokens, 4096),
    "fused_add_rmsnorm": lambda tokens: (tokens, 4096),
    "qknorm": lambda tokens: (tokens, 40, 128),
    "apply_rope": lambda tokens: (tokens, 40, 128),
    "qknorm_rope": lambda tokens: (tokens, 40, 128),
}
ROUND_SECONDS = 0.05  # calls per round: enough for about this long


def _worker() -> None:
    """Reads "op dtype tokens calls" lines, answers "cpu_seconds wall_seconds" per call."""
    import sycl_kernels as sk
    import torch

    dtypes = dict(zip(DTYPES, (torch.bfloat16, torch.float16, torch.float32), strict=True))
    calls = {}
    for line in sys.stdin:
        op, dtype, tokens, count = line.split()
        key = (op, dtype, tokens)
        if key not in calls:
            torch.manual_seed(0)
            x = torch.randn(SHAPES[op](int(tokens))).to(dtypes[dtype])
            w = torch.randn(x.shape[-1]).to(x.dtype)
            if op == "rmsnorm":
                calls[key] = lambda x=x, w=w: sk.rmsnorm(x, w, 1e-6, out=x)
            elif op == "fused_add_rmsnorm":
                residual = torch.randn_like(x)
                calls[key] = lambda x=x, r=residual, w=w: sk.fused_add_rmsnorm(x, r, w, 1e-6)
            elif op == "qknorm":
                calls[key] = lambda q=x[:, :32], k=x[:, 32:], w=w: sk.qknorm(q, k, w, w, 1e-6)
            elif op in ("apply_rope", "qknorm_rope"):
                positions = torch.arange(int(tokens))
                cache = torch.randn(int(tokens), x.shape[-1])  # cos, sin: any values time alike
                q, k = x[:, :32], x[:, 32:]
                if op == "apply_rope":
                    calls[key] = lambda p=positions, q=q, k=k, c=cache: sk.apply_rope(
                        p, q, k, c, True
                    )
                else:
                    calls[key] = lambda p=positions, q=q, k=k, w=w, c=cache: sk.qknorm_rope(
                        p, q, k, w, w, c, True
                    )
            else:
                out = torch.empty(*x.shape[:-1], x.shape[-1] // 2, dtype=x.dtype)
                gated = getattr(sk, op)
                calls[key] = lambda gated=gated, x=x, out=out: gated(x, out=out)
            calls[key]()  # load the kernel before timing
        call = calls[key]
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        for _ in range(int(count)):
            call()
        wall = time.perf_counter() - start_wall
        cpu = time.process_time() - start_cpu
        print(cpu / int(count), wall / int(count), flush=True)


def _start(stage: Path, cache: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(stage), "SYCL_KERNELS_CACHE_DIR": cache}
    return subprocess.Popen(
        [sys.executable, __file__, "--worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def _ask(worker: subprocess.Popen, case: str, count: int) -> tuple[float, float]:
    worker.stdin.write(f"{case} {count}\n")
    worker.stdin.flush()
    cpu, wall = worker.stdout.readline().split()
    return float(cpu), float(wall)


def main() -> None:
    if sys.argv[1:] == ["--worker"]:
        _worker()
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("baseline", type=Path, help="a staged package tree (PYTHONPATH)")
    parser.add_argument("--current", type=Path, default=Path("build/dev/stage"))
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--ops", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--dtypes", nargs="+", default=["bf16", "fp16"], choices=DTYPES)
    parser.add_argument("--tokens", nargs="+", type=int, default=[4096, 16])
    args = parser.parse_args()
    cache = os.environ.get("SYCL_KERNELS_CACHE_DIR", "/tmp/sycl-kernels-compare")
    workers = {
        "baseline": _start(args.baseline.resolve(), cache + "-baseline"),
        "current": _start(args.current.resolve(), cache + "-current"),
    }
    cases = [f"{o} {d} {t}" for o in args.ops for d in args.dtypes for t in args.tokens]
    counts = {}
    for case in cases:  # calls per round, from one timed call of the baseline
        _ask(workers["current"], case, 1)
        counts[case] = max(1, int(ROUND_SECONDS / _ask(workers["baseline"], case, 1)[1]))
    times = {(c, w): [] for c in cases for w in workers}
    for r in range(args.rounds):
        for case in cases:
            order = list(workers) if r % 2 == 0 else list(workers)[::-1]
            for name in order:
                times[case, name].append(_ask(workers[name], case, counts[case]))
    for worker in workers.values():
        worker.stdin.close()
        worker.wait()
    print("| op | dtype | tokens | CPU ms base | CPU ms new | CPU new/base "
          "| wall ms base | wall ms new | wall new/base |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for case in cases:
        base = [statistics.median(v) * 1e3 for v in zip(*times[case, "baseline"], strict=True)]
        new = [statistics.median(v) * 1e3 for v in zip(*times[case, "current"], strict=True)]
        op, dtype, tokens = case.split()
        print(
            f"| {op} | {dtype} | {tokens} | {base[0]:.3f} | {new[0]:.3f} | {new[0] / base[0]:.2f} "
            f"| {base[1]:.3f} | {new[1]:.3f} | {new[1] / base[1]:.2f} |"
        )


if __name__ == "__main__":
    main()
