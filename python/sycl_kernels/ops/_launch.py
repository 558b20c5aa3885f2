"""sycl_kernels.ops._launch: the one way an op launches its kernel."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from .. import _runtime
from ..jit import get_kernel
from ..jit.spec import KernelSpec

Launch = Callable[..., None]
"""An op's launch bound to one metadata (ops/_op.py): it takes the op's arguments,
reads their addresses and launches."""


def bind_kernel(spec: KernelSpec, like: torch.Tensor, groups: int) -> Launch:
    """A function running `spec`'s kernel as `groups` work-groups of the size it was
    compiled for, on the queue of like's device, with the kernel's arguments.

    CPU tensors have one queue, so the kernel is looked up here, once; an XPU's is
    the current stream's, looked up at each launch. Pointer arguments are data_ptr()
    addresses, taken unchecked: only the ops call this, after their checks (ops/_op.py
    runs them on every entry point).
    """
    global_size, local_size = groups * spec.group_size, spec.group_size
    if like.is_cpu:
        queue = _runtime.cpu_queue()
        kernel = get_kernel(spec, queue)
        return functools.partial(kernel._launch_addresses, queue, global_size, local_size)
    device = like.device

    def launch(*args: object) -> None:
        queue = _runtime.queue_for(device)
        get_kernel(spec, queue)._launch_addresses(queue, global_size, local_size, *args)

    return launch


def skip(*args: object) -> None:
    """The launch of a call with nothing to compute (no rows)."""


def address(t: torch.Tensor | None) -> int:
    """An optional tensor argument's address: 0 for None (the kernel then never reads it)."""
    return 0 if t is None else t.data_ptr()
