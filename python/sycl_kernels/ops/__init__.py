"""sycl_kernels.ops: the public ops, one module per kernel family."""

from .norm import rmsnorm

__all__ = ["rmsnorm"]
