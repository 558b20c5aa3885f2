"""100k calls of a small op leave resident memory, Python objects and live host-module
objects (queues, bundles, kernels) where they were."""

from __future__ import annotations

import gc

import psutil
import sycl_kernels
import torch
from sycl_kernels import _runtime

from tests import references

CALLS = 100_000
WARMUP = 5_000
# Resident memory may move by allocator pages; a leak of 64 bytes a call is 6.4 MB.
MAX_RSS_GROWTH = 6 * 2**20


def _snapshot() -> tuple[int, int, dict[str, int]]:
    gc.collect()
    rss = psutil.Process().memory_info().rss
    return rss, len(gc.get_objects()), dict(_runtime.host_module().live_objects())


def test_a_hundred_thousand_calls_leak_nothing() -> None:
    x, weight = torch.randn(1, 64), torch.randn(64)
    residual = torch.randn(1, 64)
    want = references.rmsnorm(x, weight, 1e-6)

    def calls(n: int) -> None:
        for i in range(n):
            if i % 2:
                out = sycl_kernels.rmsnorm(x, weight, 1e-6)
            else:
                out = torch.ops.sycl_kernels.rmsnorm(x, weight, 1e-6)
            sycl_kernels.silu_and_mul(residual)

        torch.testing.assert_close(out.double(), want, **references.tolerance(torch.float32))

    calls(WARMUP)
    rss_before, objects_before, live_before = _snapshot()
    calls(CALLS)
    rss_after, objects_after, live_after = _snapshot()
    growth = rss_after - rss_before
    print(
        f"\n{CALLS} x (rmsnorm + silu_and_mul): RSS {rss_before / 2**20:.1f} -> "
        f"{rss_after / 2**20:.1f} MiB ({growth / 2**10:+.0f} KiB), Python objects "
        f"{objects_before} -> {objects_after}, host objects {live_before} -> {live_after}"
    )
    assert live_after == live_before
    assert objects_after - objects_before < 100
    assert growth < MAX_RSS_GROWTH
