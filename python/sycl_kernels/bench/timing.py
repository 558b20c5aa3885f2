"""sycl_kernels.bench.timing: median wall time of a callable, synchronizing its device."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def _synchronize(device: torch.device) -> None:
    if device.type == "xpu":
        torch.xpu.synchronize(device)


def median_seconds(
    fn: Callable[[], object], device: torch.device, *, warmup: int = 3, repeats: int = 20
) -> float:
    """Median over `repeats` timed calls of fn(), after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    _synchronize(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _synchronize(device)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def alternating_median_seconds(
    fns: tuple[Callable[[], object], ...],
    device: torch.device,
    *,
    warmup: int = 3,
    repeats: int = 20,
) -> list[float]:
    """median_seconds of each of fns, their calls taken in turn: a slow moment of a shared
    machine falls on all of them alike."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    _synchronize(device)
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, times in zip(fns, samples, strict=True):
            start = time.perf_counter()
            fn()
            _synchronize(device)
            times.append(time.perf_counter() - start)
    return [statistics.median(times) for times in samples]
