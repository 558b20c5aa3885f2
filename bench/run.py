"""bench/run.py: the full benchmark, its results kept in bench/results/ for docs/performance.md.

    python bench/run.py [--quick]

Runs `python -m sycl_kernels bench` (every op, every shape and dtype, or the quick
subset) and writes the markdown report, the JSON and the plot side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

from sycl_kernels.bench.ops import ALL_OPS, run

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    name = "quick" if args.quick else "full"
    RESULTS.mkdir(exist_ok=True)
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        status = run(ALL_OPS, args.quick, RESULTS / f"{name}.json", RESULTS / f"{name}.png")
    (RESULTS / f"{name}.md").write_text(report.getvalue())
    sys.stdout.write(report.getvalue())
    return status


if __name__ == "__main__":
    raise SystemExit(main())
