"""sycl_kernels.bench.rope: the rotary ops against vLLM's torch form (bench, demo).

q and k viewed from one fused qkv tensor, in NeoX style and GPT-J's; head_case serves
qknorm too (norm.py). qknorm_rope is timed against qknorm then apply_rope.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable

import torch

from .. import ops
from .registry import BenchOp, Build, Case, nbytes, register, seeded_randn


def _rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-6)


def rope_cache(max_position: int, rotary_dim: int, device: torch.device) -> torch.Tensor:
    inv_freq = 1.0 / 10000 ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    angles = torch.arange(max_position, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return torch.cat([angles.cos(), angles.sin()], dim=-1).float().to(device)


def head_case(
    op: str,
    dtype: torch.dtype,
    device: torch.device,
    tokens: int,
    q_heads: int,
    kv_heads: int,
    head_dim: int,
    neox: bool = True,
) -> Case:
    """qknorm, apply_rope or qknorm_rope on q and k viewed from one fused qkv tensor;
    the rotations in NeoX style, or GPT-J's (neox=False).

    qknorm_rope is timed against qknorm then apply_rope (our unfused ops, not torch):
    what the fusion saves.
    """
    width = (q_heads + 2 * kv_heads) * head_dim
    qkv = seeded_randn(tokens, width, dtype=dtype, device=device, seed=4)
    split = (q_heads * head_dim, kv_heads * head_dim, kv_heads * head_dim)

    def views(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q, k, _ = t.split(split, dim=-1)
        return q.view(tokens, q_heads, head_dim), k.view(tokens, kv_heads, head_dim)

    ours_qkv, theirs_qkv = qkv.clone(), qkv.clone()
    q_ours, k_ours = views(ours_qkv)
    q_theirs, k_theirs = views(theirs_qkv)
    moved = 2 * nbytes(q_ours, k_ours)
    wq = seeded_randn(head_dim, dtype=dtype, device=device, seed=5)
    wk = seeded_randn(head_dim, dtype=dtype, device=device, seed=6)
    if op == "qknorm":

        def ours() -> torch.Tensor:
            ops.qknorm(q_ours, k_ours, wq, wk)
            return ours_qkv

        def theirs() -> torch.Tensor:
            q_theirs.copy_(_rms(q_theirs, wq))
            k_theirs.copy_(_rms(k_theirs, wk))
            return theirs_qkv

        return Case(ours, theirs, moved + nbytes(wq, wk))

    g = torch.Generator().manual_seed(7)
    positions = torch.randint(0, 8192, (tokens,), generator=g).to(device)
    cache = rope_cache(8192, head_dim, device)
    half = head_dim // 2
    moved += nbytes(positions) + tokens * head_dim * 4
    if op == "qknorm_rope":

        def ours() -> torch.Tensor:
            ops.qknorm_rope(positions, q_ours, k_ours, wq, wk, cache, neox)
            return ours_qkv

        def theirs() -> torch.Tensor:
            ops.qknorm(q_theirs, k_theirs, wq, wk)
            ops.apply_rope(positions, q_theirs, k_theirs, cache, neox)
            return theirs_qkv

        return Case(ours, theirs, moved + nbytes(wq, wk))

    def ours() -> torch.Tensor:
        ops.apply_rope(positions, q_ours, k_ours, cache, neox)
        return ours_qkv

    def theirs() -> torch.Tensor:
        # vLLM's rotary forward_native, in place on the same views.
        cos, sin = cache[positions].to(dtype).chunk(2, dim=-1)
        cos, sin = cos[:, None], sin[:, None]
        for t in (q_theirs, k_theirs):
            if neox:
                a, b = t[..., :half], t[..., half:]
                t.copy_(torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1))
            else:
                a, b = t[..., ::2], t[..., 1::2]
                t.copy_(torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2))
        return theirs_qkv

    return Case(ours, theirs, moved)


def head_shapes(op: str, tokens: int, quick: bool) -> Iterable[tuple[str, Build]]:
    heads = ((32, 8),) if quick else ((32, 8), (8, 8))
    # GPT-J's interleaved pairs take other memory accesses than NeoX's.
    styles = (True, False) if op == "apply_rope" else (True,)
    for (q, kv), neox in itertools.product(heads, styles):
        yield (
            f"{tokens}x({q}+{kv})x128{'' if neox else ' gptj'}",
            lambda dtype, device, q=q, kv=kv, neox=neox: head_case(
                op, dtype, device, tokens, q, kv, 128, neox
            ),
        )


register(
    BenchOp(
        "apply_rope",
        functools.partial(head_shapes, "apply_rope"),
        demo=(
            "256x(32+8)x128",
            lambda dtype, device: head_case("apply_rope", dtype, device, 256, 32, 8, 128),
        ),
    )
)
# Timed against the unfused ops it replaces (its "torch" column), not torch.
register(
    BenchOp(
        "qknorm_rope",
        functools.partial(head_shapes, "qknorm_rope"),
        note="qknorm_rope's torch column is sycl_kernels.qknorm then apply_rope (the "
        "unfused ops); its max err, the difference of one rounding and two.",
    )
)
