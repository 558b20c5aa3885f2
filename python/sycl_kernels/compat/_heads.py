"""sycl_kernels.compat._heads: an engine's rotary query/key as the head views apply_rope takes."""

from __future__ import annotations

import torch


def split_heads(
    op: str, name: str, x: torch.Tensor | None, token_dims: int, head_size: int
) -> torch.Tensor | None:
    """x [*tokens, heads * head_size] or [*tokens, heads, head_size] as a [*tokens, heads,
    head_size] view (None stays None); token_dims is the number of token dimensions."""
    if x is None:
        return None
    if x.dim() == token_dims + 2 and x.shape[-1] == head_size:
        return x
    if x.dim() == token_dims + 1 and x.shape[-1] % head_size == 0:
        return x.unflatten(-1, (-1, head_size))
    tokens = ", ".join(["*"] * token_dims)
    raise ValueError(
        f"{op}(): {name} has shape {tuple(x.shape)}; expected [{tokens}, heads * {head_size}] "
        f"or [{tokens}, heads, {head_size}] (head_size={head_size})"
    )
