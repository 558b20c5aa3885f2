"""sycl_kernels._compare: each op and its torch eager form on the same tensors, timed in turn."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import ops
from ._timing import median_seconds


@dataclass(frozen=True)
class Comparison:
    op: str
    shape: str
    dtype: torch.dtype
    sycl_seconds: float
    torch_seconds: float
    max_error: float
    """Largest |ours - torch| / (1 + |torch|), both run once on the same inputs."""
    bytes_moved: int
    """Each tensor read or written once."""

    @property
    def speedup(self) -> float:
        return self.torch_seconds / self.sycl_seconds


@dataclass(frozen=True)
class Case:
    """One op at one shape: runs of ours and of torch's, and what each produces."""

    ours: Callable[[], torch.Tensor]
    theirs: Callable[[], torch.Tensor]
    bytes_moved: int


def _bytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, eps)


def rmsnorm_case(x: torch.Tensor, w: torch.Tensor) -> Case:
    out = torch.empty_like(x)
    return Case(
        lambda: ops.rmsnorm(x, w, 1e-6, out=out), lambda: _rms(x, w, 1e-6), _bytes(x, w, out)
    )


def _norm_cases(tokens: int, hidden: int, dtype: torch.dtype, device) -> dict[str, Case]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, hidden, generator=g).to(device=device, dtype=dtype)
    w = torch.randn(hidden, generator=g).to(device=device, dtype=dtype)
    residual = torch.randn(tokens, hidden, generator=g).to(device=device, dtype=dtype)
    xs, rs = x.clone(), residual.clone()
    xt, rt = x.clone(), residual.clone()

    def fused_ours() -> torch.Tensor:
        ops.fused_add_rmsnorm(xs, rs, w)
        return xs

    def fused_theirs() -> torch.Tensor:
        rt.add_(xt)
        xt.copy_(_rms(rt, w, 1e-6))
        return xt

    return {
        "rmsnorm": rmsnorm_case(x, w),
        "gemma_rmsnorm": Case(
            lambda: ops.gemma_rmsnorm(x, w), lambda: _rms(x, 1 + w, 1e-6), _bytes(x, w, x)
        ),
        "fused_add_rmsnorm": Case(fused_ours, fused_theirs, _bytes(x, residual, w, x, residual)),
    }


def _head_cases(tokens: int, heads: int, kv_heads: int, head_dim: int, dtype, device):
    g = torch.Generator().manual_seed(1)
    width = (heads + 2 * kv_heads) * head_dim
    qkv = torch.randn(tokens, width, generator=g).to(device=device, dtype=dtype)
    split = (heads * head_dim, kv_heads * head_dim, kv_heads * head_dim)

    def views(t: torch.Tensor):
        q, k, _ = t.split(split, dim=-1)
        return q.view(tokens, heads, head_dim), k.view(tokens, kv_heads, head_dim)

    wq = torch.randn(head_dim, generator=g).to(device=device, dtype=dtype)
    wk = torch.randn(head_dim, generator=g).to(device=device, dtype=dtype)
    ours_qkv, theirs_qkv = qkv.clone(), qkv.clone()
    q_ours, k_ours = views(ours_qkv)
    q_theirs, k_theirs = views(theirs_qkv)

    def qknorm_ours() -> torch.Tensor:
        ours_qkv.copy_(qkv)
        ops.qknorm(q_ours, k_ours, wq, wk)
        return ours_qkv

    def qknorm_theirs() -> torch.Tensor:
        q, k = views(qkv)
        q_theirs.copy_(_rms(q, wq, 1e-6))
        k_theirs.copy_(_rms(k, wk, 1e-6))
        return theirs_qkv

    positions = torch.randint(0, 8192, (tokens,), generator=g).to(device)
    angles = torch.arange(8192, dtype=torch.float64)[:, None] / 10000 ** (
        torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    )
    cache = torch.cat([angles.cos(), angles.sin()], -1).float().to(device)

    def rope_ours() -> torch.Tensor:
        ours_qkv.copy_(qkv)
        ops.apply_rope(positions, q_ours, k_ours, cache, True)
        return ours_qkv

    def rope_theirs() -> torch.Tensor:
        # vLLM's rotary forward_native, NeoX style, on the same views.
        theirs_qkv.copy_(qkv)
        cos, sin = cache[positions].to(dtype).chunk(2, dim=-1)
        for t in (q_theirs, k_theirs):
            a, b = t[..., : head_dim // 2], t[..., head_dim // 2 :]
            rotated = torch.cat(
                [a * cos[:, None] - b * sin[:, None], b * cos[:, None] + a * sin[:, None]], -1
            )
            t.copy_(rotated)
        return theirs_qkv

    qk_bytes = 2 * _bytes(q_ours, k_ours)
    shape = f"{tokens} x {heads}+{kv_heads} x {head_dim}"
    return shape, {
        "qknorm": Case(qknorm_ours, qknorm_theirs, qk_bytes + _bytes(wq, wk)),
        "apply_rope": Case(
            rope_ours, rope_theirs, qk_bytes + _bytes(positions) + tokens * head_dim * 4
        ),
    }


def _activation_cases(tokens: int, dim: int, dtype, device) -> dict[str, Case]:
    g = torch.Generator().manual_seed(2)
    x = torch.randn(tokens, 2 * dim, generator=g).to(device=device, dtype=dtype)
    out = torch.empty(tokens, dim, dtype=dtype, device=device)
    a, b = x[:, :dim], x[:, dim:]
    torch_acts = {
        "silu_and_mul": lambda: torch.nn.functional.silu(a) * b,
        "gelu_and_mul": lambda: torch.nn.functional.gelu(a) * b,
        "gelu_tanh_and_mul": lambda: torch.nn.functional.gelu(a, approximate="tanh") * b,
    }
    return {
        op: Case((lambda op=op: getattr(ops, op)(x, out=out)), theirs, _bytes(x, out))
        for op, theirs in torch_acts.items()
    }


def _timestep_case(n: int, dim: int, device) -> Case:
    t = (torch.rand(n, generator=torch.Generator().manual_seed(3)) * 1000).to(device)

    def theirs() -> torch.Tensor:
        # diffusers' get_timestep_embedding (flip_sin_to_cos=False, shift 1, scale 1).
        half = dim // 2
        exponent = -math.log(10000) * torch.arange(half, dtype=torch.float32, device=device)
        emb = torch.exp(exponent / (half - 1.0))
        emb = t[:, None].float() * emb[None, :]
        return torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)

    return Case(lambda: ops.timestep_embedding(t, dim), theirs, _bytes(t) + n * dim * 4)


def measure(
    op: str, shape: str, dtype: torch.dtype, case: Case, device, repeats: int
) -> Comparison:
    ours_out, theirs_out = case.ours().double(), case.theirs().double()
    error = ((ours_out - theirs_out).abs() / (1 + theirs_out.abs())).max().item()
    # Interleaved per op, so both see the same machine load.
    ours = median_seconds(case.ours, device, repeats=repeats)
    theirs = median_seconds(case.theirs, device, repeats=repeats)
    return Comparison(op, shape, dtype, ours, theirs, error, case.bytes_moved)


def compare_rmsnorm(dtype: torch.dtype, rows: int, hidden: int, device, repeats: int) -> Comparison:
    g = torch.Generator().manual_seed(rows * hidden)
    x = torch.randn(rows, hidden, generator=g).to(device=device, dtype=dtype)
    w = torch.randn(hidden, generator=g).to(device=device, dtype=dtype)
    return measure("rmsnorm", f"{rows} x {hidden}", dtype, rmsnorm_case(x, w), device, repeats)


def compare_all_ops(
    dtype: torch.dtype,
    device,
    repeats: int,
    tokens: int = 256,
    hidden: int = 4096,
    heads: tuple[int, int, int] = (32, 8, 128),
    intermediate: int = 11008,
) -> list[Comparison]:
    """Every op at one LLM shape (and timestep_embedding at a DiT shape)."""
    results = [
        measure(op, f"{tokens} x {hidden}", dtype, case, device, repeats)
        for op, case in _norm_cases(tokens, hidden, dtype, device).items()
    ]
    shape, cases = _head_cases(tokens, *heads, dtype, device)
    results += [measure(op, shape, dtype, case, device, repeats) for op, case in cases.items()]
    results += [
        measure(op, f"{tokens} x 2*{intermediate}", dtype, case, device, repeats)
        for op, case in _activation_cases(tokens, intermediate, dtype, device).items()
    ]
    results.append(
        measure(
            "timestep_embedding",
            f"{tokens} x 256",
            torch.float32,
            _timestep_case(tokens, 256, device),
            device,
            repeats,
        )
    )
    return results
