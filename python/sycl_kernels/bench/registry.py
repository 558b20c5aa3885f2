"""sycl_kernels.bench.registry: the ops `bench` and `demo` time, each registered with its cases.

Each family's cases live in their module of the bench package, bench/<family>.py (as
`python -m sycl_kernels new-op` writes a new op's), registered with register() or
@bench_rows; bench/ops.py imports every module of the package, so a new one joins
`bench` and `demo` without an edit to a shared file. The op modules stay checks and
binding: none imports bench.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Case:
    """An op and its torch eager form on the same tensors, and the bytes the op must move
    (each tensor read or written once); demo and bench time both and compare their
    results (each with its own tolerance)."""

    ours: Callable[[], torch.Tensor]
    theirs: Callable[[], torch.Tensor]
    bytes_moved: int


Build = Callable[[torch.dtype, torch.device], Case]
"""A case's inputs made in a dtype, on a device."""


@dataclass(frozen=True)
class BenchOp:
    name: str
    shapes: Callable[[int, bool], Iterable[tuple[str, Build]]]
    """(tokens, quick) -> each (shape label, build) bench times at that token count."""
    demo: tuple[str, Build] | None = None
    """demo's shape for the op, or None: demo times the first op of each family
    (sycl_kernels.ops.<family>) registered with one."""
    dtypes: tuple[torch.dtype, ...] | None = None
    """The dtypes it runs in; None: bench's (every float dtype; bf16 and fp32 quick)."""
    note: str | None = None
    """Printed under the throughput table when the op ran: what its torch column is."""

    @property
    def demo_dtype(self) -> torch.dtype:
        """bf16, the demo's dtype, or the first of the op's own."""
        if self.dtypes is None or torch.bfloat16 in self.dtypes:
            return torch.bfloat16
        return self.dtypes[0]


BENCH_OPS: dict[str, BenchOp] = {}
"""Every registered op, by name, in registration order."""


def register(entry: BenchOp) -> None:
    if entry.name in BENCH_OPS:
        raise ValueError(f"bench op {entry.name!r} is registered twice")
    BENCH_OPS[entry.name] = entry


def widths(quick: bool) -> tuple[int, ...]:
    """The hidden sizes the row ops are timed at."""
    return (4096,) if quick else (2048, 4096, 8192)


def nbytes(*tensors: torch.Tensor) -> int:
    """The bytes of the tensors, each counted once: a case's bytes_moved."""
    return sum(t.numel() * t.element_size() for t in tensors)


def seeded_randn(*shape: int, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    """randn from its own seed, the same on every device: both sides of a case get the
    same inputs, run after run."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)


RowsCase = Callable[[torch.dtype, torch.device, int, int], Case]
"""(dtype, device, tokens, width) -> the case on [tokens, width] inputs."""


def bench_rows(name: str) -> Callable[[RowsCase], RowsCase]:
    """Registers the decorated case of op `name` on [tokens, width] rows: timed at
    every token count and widths(quick), shapes labelled "<tokens>x<width>", and in
    demo at 256 x 4096."""

    def define(case: RowsCase) -> RowsCase:
        def build(tokens: int, width: int) -> Build:
            return lambda dtype, device: case(dtype, device, tokens, width)

        def shapes(tokens: int, quick: bool) -> Iterable[tuple[str, Build]]:
            return [(f"{tokens}x{width}", build(tokens, width)) for width in widths(quick)]

        register(BenchOp(name, shapes, demo=("256x4096", build(256, 4096))))
        return case

    return define
