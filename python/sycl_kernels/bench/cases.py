"""sycl_kernels.bench.cases: each op and its torch eager form on the same tensors (bench, demo).

The cases of the existing ops, and their registrations (bench/registry.py): the
shapes bench times each at, and demo's one.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable

import torch

from .. import ops
from .registry import BenchOp, Build, Case, bench_rows, register, widths

__all__ = [
    "Case",
    "activation_case",
    "elementwise_activation_case",
    "head_case",
    "norm_case",
    "rope_cache",
    "timestep_case",
]


def _bytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-6)


def _randn(*shape: int, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)


def norm_case(op: str, dtype: torch.dtype, device: torch.device, tokens: int, hidden: int) -> Case:
    x = _randn(tokens, hidden, dtype=dtype, device=device, seed=1)
    w = _randn(hidden, dtype=dtype, device=device, seed=2)
    out = torch.empty_like(x)
    if op == "rmsnorm":
        return Case(lambda: ops.rmsnorm(x, w, out=out), lambda: _rms(x, w), _bytes(x, w, out))
    if op == "gemma_rmsnorm":
        # Gemma's eager form: the norm scaled by (1 + weight).
        return Case(
            lambda: ops.gemma_rmsnorm(x, w, out=out), lambda: _rms(x, 1 + w), _bytes(x, w, out)
        )
    residual = _randn(tokens, hidden, dtype=dtype, device=device, seed=3)
    x_ours, r_ours, x_theirs, r_theirs = x.clone(), residual.clone(), x.clone(), residual.clone()

    def ours() -> torch.Tensor:
        ops.fused_add_rmsnorm(x_ours, r_ours, w)
        return x_ours

    def theirs() -> torch.Tensor:
        r_theirs.add_(x_theirs)
        x_theirs.copy_(_rms(r_theirs, w))
        return x_theirs

    return Case(ours, theirs, _bytes(x, residual, w, x, residual))


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
    qkv = _randn(tokens, width, dtype=dtype, device=device, seed=4)
    split = (q_heads * head_dim, kv_heads * head_dim, kv_heads * head_dim)

    def views(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q, k, _ = t.split(split, dim=-1)
        return q.view(tokens, q_heads, head_dim), k.view(tokens, kv_heads, head_dim)

    ours_qkv, theirs_qkv = qkv.clone(), qkv.clone()
    q_ours, k_ours = views(ours_qkv)
    q_theirs, k_theirs = views(theirs_qkv)
    moved = 2 * _bytes(q_ours, k_ours)
    wq = _randn(head_dim, dtype=dtype, device=device, seed=5)
    wk = _randn(head_dim, dtype=dtype, device=device, seed=6)
    if op == "qknorm":

        def ours() -> torch.Tensor:
            ops.qknorm(q_ours, k_ours, wq, wk)
            return ours_qkv

        def theirs() -> torch.Tensor:
            q_theirs.copy_(_rms(q_theirs, wq))
            k_theirs.copy_(_rms(k_theirs, wk))
            return theirs_qkv

        return Case(ours, theirs, moved + _bytes(wq, wk))

    g = torch.Generator().manual_seed(7)
    positions = torch.randint(0, 8192, (tokens,), generator=g).to(device)
    cache = rope_cache(8192, head_dim, device)
    half = head_dim // 2
    moved += _bytes(positions) + tokens * head_dim * 4
    if op == "qknorm_rope":

        def ours() -> torch.Tensor:
            ops.qknorm_rope(positions, q_ours, k_ours, wq, wk, cache, neox)
            return ours_qkv

        def theirs() -> torch.Tensor:
            ops.qknorm(q_theirs, k_theirs, wq, wk)
            ops.apply_rope(positions, q_theirs, k_theirs, cache, neox)
            return theirs_qkv

        return Case(ours, theirs, moved + _bytes(wq, wk))

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


_TORCH_ACTIVATIONS = {
    "silu_and_mul": torch.nn.functional.silu,
    "gelu_and_mul": torch.nn.functional.gelu,
    "gelu_tanh_and_mul": lambda a: torch.nn.functional.gelu(a, approximate="tanh"),
}


def _fatrelu(x: torch.Tensor) -> torch.Tensor:
    # vLLM's torch-native form, at the default threshold 0.
    gate, up = x.chunk(2, dim=-1)
    return torch.nn.functional.threshold(gate, 0.0, 0.0) * up


def _swigluoai(x: torch.Tensor) -> torch.Tensor:
    # gpt-oss's (and vLLM's torch-native) form, at the defaults alpha=1.702, limit=7.0.
    gate, up = x[:, ::2].clamp(max=7.0), x[:, 1::2].clamp(-7.0, 7.0)
    return (up + 1) * gate * torch.sigmoid(1.702 * gate)


# The gated activations with parameters: x -> their torch form.
_TORCH_GATED = {"fatrelu_and_mul": _fatrelu, "swigluoai_and_mul": _swigluoai}


def activation_case(
    op: str, dtype: torch.dtype, device: torch.device, tokens: int, dim: int
) -> Case:
    x = _randn(tokens, 2 * dim, dtype=dtype, device=device, seed=8)
    out = torch.empty(tokens, dim, dtype=dtype, device=device)
    if op in _TORCH_GATED:
        gated = _TORCH_GATED[op]
        return Case(lambda: getattr(ops, op)(x, out=out), lambda: gated(x), _bytes(x, out))
    act = _TORCH_ACTIVATIONS[op]
    return Case(
        lambda: getattr(ops, op)(x, out=out),
        lambda: act(x[:, :dim]) * x[:, dim:],
        _bytes(x, out),
    )


_TORCH_ELEMENTWISE = {
    "gelu_tanh": lambda a: torch.nn.functional.gelu(a, approximate="tanh"),
    "gelu_quick": lambda a: a * torch.sigmoid(1.702 * a),
}


def elementwise_activation_case(
    op: str, dtype: torch.dtype, device: torch.device, tokens: int, dim: int
) -> Case:
    x = _randn(tokens, dim, dtype=dtype, device=device, seed=10)
    out = torch.empty_like(x)
    act = _TORCH_ELEMENTWISE[op]
    return Case(lambda: getattr(ops, op)(x, out=out), lambda: act(x), _bytes(x, out))


def timestep_case(device: torch.device, n: int, dim: int) -> Case:
    t = (torch.rand(n, generator=torch.Generator().manual_seed(9)) * 1000).to(device)

    def theirs() -> torch.Tensor:
        # diffusers' get_timestep_embedding with its defaults.
        half = dim // 2
        exponent = -math.log(10000) * torch.arange(half, dtype=torch.float32, device=device)
        emb = torch.exp(exponent / (half - 1.0))
        emb = t[:, None].float() * emb[None, :]
        return torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)

    return Case(lambda: ops.timestep_embedding(t, dim), theirs, _bytes(t) + n * dim * 4)


# The registrations, in the order bench runs them.

for _op in ("rmsnorm", "gemma_rmsnorm", "fused_add_rmsnorm"):
    bench_rows(_op)(functools.partial(norm_case, _op))


def _head_shapes(op: str, tokens: int, quick: bool) -> Iterable[tuple[str, Build]]:
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


def _head_demo(op: str, dtype: torch.dtype, device: torch.device) -> Case:
    return head_case(op, dtype, device, 256, 32, 8, 128)


for _op in ("qknorm", "apply_rope"):
    register(
        BenchOp(
            _op,
            functools.partial(_head_shapes, _op),
            demo=("256x(32+8)x128", functools.partial(_head_demo, _op)),
        )
    )
# Timed against the unfused ops it replaces (its "torch" column), not torch.
register(
    BenchOp(
        "qknorm_rope",
        functools.partial(_head_shapes, "qknorm_rope"),
        note="qknorm_rope's torch column is sycl_kernels.qknorm then apply_rope (the "
        "unfused ops); its max err, the difference of one rounding and two.",
    )
)


def _activation_shapes(op: str, tokens: int, quick: bool) -> Iterable[tuple[str, Build]]:
    for hidden in widths(quick):
        yield (
            f"{tokens}x2*{hidden}",
            lambda dtype, device, hidden=hidden: activation_case(op, dtype, device, tokens, hidden),
        )


def _activation_demo(op: str, dtype: torch.dtype, device: torch.device) -> Case:
    return activation_case(op, dtype, device, 256, 11008)


for _op in ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"):
    register(
        BenchOp(
            _op,
            functools.partial(_activation_shapes, _op),
            demo=("256x2*11008", functools.partial(_activation_demo, _op)),
        )
    )
# Not in demo: vLLM's other activations (gpt-oss's swigluoai, fatrelu, the elementwise gelus).
for _op in ("fatrelu_and_mul", "swigluoai_and_mul"):
    register(BenchOp(_op, functools.partial(_activation_shapes, _op)))


def _elementwise_shapes(op: str, tokens: int, quick: bool) -> Iterable[tuple[str, Build]]:
    for width in widths(quick):
        yield (
            f"{tokens}x{width}",
            lambda dtype, device, width=width: elementwise_activation_case(
                op, dtype, device, tokens, width
            ),
        )


for _op in ("gelu_tanh", "gelu_quick"):
    register(BenchOp(_op, functools.partial(_elementwise_shapes, _op)))
register(
    BenchOp(
        "timestep_embedding",
        lambda tokens, quick: [(f"{tokens}x256", lambda _, d: timestep_case(d, tokens, 256))],
        demo=("256x256", lambda _, device: timestep_case(device, 256, 256)),
        dtypes=(torch.float32,),
    )
)
