"""bench/bench_rmsnorm.py: rmsnorm vs torch.nn.functional.rms_norm, interleaved in one run.

    python bench/bench_rmsnorm.py [--repeats N]

Prints per shape and dtype the median time of each, their ratio and the achieved
GB/s (x read once, weight read once, out written once).
"""

from __future__ import annotations

import argparse

import sycl_kernels
import torch
from sycl_kernels._compare import compare_rmsnorm

SHAPES = ((1, 64), (1, 4096), (16, 4096), (256, 4096), (4096, 4096), (256, 8192))
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    device = sycl_kernels.default_device()
    print(f"{'dtype':<9} {'shape':>12} {'sycl us':>9} {'torch us':>9} {'speedup':>8} {'GB/s':>7}")
    for dtype in DTYPES:
        for rows, hidden in SHAPES:
            c = compare_rmsnorm(dtype, rows, hidden, device, args.repeats)
            print(
                f"{str(dtype).removeprefix('torch.'):<9} {f'{rows}x{hidden}':>12} "
                f"{c.sycl_seconds * 1e6:>9.1f} {c.torch_seconds * 1e6:>9.1f} "
                f"{c.speedup:>7.2f}x {c.bytes_moved / c.sycl_seconds / 1e9:>7.1f}"
            )


if __name__ == "__main__":
    main()
