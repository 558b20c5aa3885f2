"""sycl_kernels.ops._launch: the one way an op launches its kernel."""

from __future__ import annotations

import torch

from ..jit import get_kernel
from ..jit.spec import KernelSpec


def launch_groups(spec: KernelSpec, queue, groups: int, *args: object) -> None:
    """Runs `spec`'s kernel on `queue` as `groups` work-groups of the size it was compiled for.

    Pointer arguments are data_ptr() addresses, taken unchecked: only the ops call
    this, after their checks (ops/_op.py runs them on every entry point).
    """
    get_kernel(spec, queue)._launch_addresses(
        queue, groups * spec.group_size, spec.group_size, *args
    )


def address(t: torch.Tensor | None) -> int:
    """An optional tensor argument's address: 0 for None (the kernel then never reads it)."""
    return 0 if t is None else t.data_ptr()
