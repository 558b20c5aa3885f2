"""Isolated pieces of the ops' work (bench/probes/isolated.hpp), timed side by side.

    python bench/probes/run.py [--rounds N]

Reports, per probe, the process CPU time per launch (the sum over the device's
threads: on a shared machine it moves far less than wall time, which another
process's load inflates) and wall time, both the minimum over interleaved rounds.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from sycl_kernels import jit

ROWS, WIDTH, THREADS = 4096, 4096, 256
PROBES = (
    "copy_fp32", "copy_bf16", "scale_fp32", "scale_bf16", "mul_fp32", "mul_bf16",
    "mul_bf16_pairs", "silu_fp32", "silu_bf16", "gelu_fp32", "gelu_bf16", "gelu_tanh_fp32",
    "exp_fp32",
)  # fmt: skip


def _tensors(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    dtype = torch.float32 if name.endswith("fp32") else torch.bfloat16
    gated = not name.startswith(("copy", "scale", "exp"))
    x = torch.randn(ROWS, 2 * WIDTH if gated else WIDTH).to(dtype)
    out = torch.empty(ROWS, WIDTH, dtype=dtype)
    if name.endswith("pairs"):  # the same bytes, read as uint32 pairs of bf16
        return x.view(torch.int32), out.view(torch.int32)
    return x, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args().rounds
    # The PROBE macro declares the kernels, so their signatures are named here.
    module = jit.load(
        "probes",
        [Path(__file__).with_name("isolated.hpp")],
        signatures=dict.fromkeys(PROBES, "pp"),
    )
    data = {name: _tensors(name) for name in PROBES}
    cpu: dict[str, list[float]] = {name: [] for name in PROBES}
    wall: dict[str, list[float]] = {name: [] for name in PROBES}
    for name, (x, out) in data.items():
        module.launch(name, ROWS, THREADS, x, out)  # load before timing
    for _ in range(rounds):
        for name, (x, out) in data.items():
            start_cpu, start_wall = time.process_time(), time.perf_counter()
            module.launch(name, ROWS, THREADS, x, out)
            wall[name].append(time.perf_counter() - start_wall)
            cpu[name].append(time.process_time() - start_cpu)
    print("| probe | CPU ms | wall ms | bytes moved | GB/s (wall) |")
    print("|---|---|---|---|---|")
    for name, (x, out) in data.items():
        moved = x.numel() * x.element_size() + out.numel() * out.element_size()
        best = min(wall[name])
        print(
            f"| {name} | {min(cpu[name]) * 1e3:.1f} | {best * 1e3:.2f} | {moved / 1e6:.0f} MB "
            f"| {moved / best / 1e9:.1f} |"
        )


if __name__ == "__main__":
    main()
