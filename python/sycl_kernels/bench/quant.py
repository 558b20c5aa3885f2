"""sycl_kernels.bench.quant: the quantizing ops against their torch eager forms (bench, demo).

Each op writes fp8 (e4m3fn) into a preallocated output, as a serving engine calls it;
torch's form is the same math in eager ops: the scale from the absolute maximum, then
``x * (1 / scale)`` clamped and cast. The fused producers are also timed against the
unfused pair of this package's own ops (rmsnorm then dynamic_quantize; silu_and_mul
then dynamic_quantize), the work they replace.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

import torch

from .. import ops
from ..ops.quant import DEFAULT_SCALE_MIN
from .registry import BenchOp, Build, Case, register, widths

_FP8 = torch.float8_e4m3fn
_GROUP = 128


def _bytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _randn(*shape: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)


def _torch_quantize(v: torch.Tensor, group: int | None) -> torch.Tensor:
    """Dynamic fp8 quantization in torch eager ops, a scale per row or per group: the
    quantized values (the scales are computed, as the op's are)."""
    rows = v.float().unflatten(-1, (-1, group or v.shape[-1]))
    scales = (rows.abs().amax(-1, keepdim=True) / 448).clamp(min=DEFAULT_SCALE_MIN[_FP8])
    return (rows * scales.reciprocal()).clamp(-448, 448).to(_FP8).flatten(-2)


def _torch_static(v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return (v.float() * scale.reciprocal()).clamp(-448, 448).to(_FP8)


def _torch_rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x.float(), (x.shape[-1],), w.float(), 1e-6)


def _torch_silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    gate, up = x.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up


def quant_case(op: str, dtype: torch.dtype, device: torch.device, tokens: int, hidden: int) -> Case:
    """op on [tokens, hidden] outputs (silu's input twice as wide), fp8 out; both sides
    return the quantized values."""
    width = 2 * hidden if op.startswith("silu") else hidden
    x = _randn(tokens, width, dtype=dtype, device=device)
    w = _randn(hidden, dtype=dtype, device=device)
    q = torch.empty(tokens, hidden, dtype=_FP8, device=device)
    group = _GROUP if "_g128" in op else None
    scales = torch.empty(tokens, hidden // (group or hidden), dtype=torch.float32, device=device)
    scale = torch.full((1,), 0.02, device=device)
    moved = _bytes(x, q, scales)
    base = op.removesuffix("_unfused").removesuffix("_g128")
    ours: Callable[[], object]
    if base == "quantize":
        ours = functools.partial(ops.quantize, x, scale, out=q)
        return Case(ours, lambda: _torch_static(x, scale), _bytes(x, q))
    if base == "dynamic_quantize_per_tensor":
        s1 = scales[:1, :1].reshape(1)
        ours = lambda: ops.dynamic_quantize_per_tensor(x, out=q, scales=s1)[0]  # noqa: E731
        theirs = lambda: _torch_static(x, (x.float().abs().amax() / 448).reshape(1))  # noqa: E731
        return Case(ours, theirs, 2 * _bytes(x) + _bytes(q))
    kwargs = {"group_size": group, "out": q, "scales": scales}
    if base == "dynamic_quantize":
        ours = lambda: ops.dynamic_quantize(x, **kwargs)[0]  # noqa: E731
        return Case(ours, lambda: _torch_quantize(x, group), moved)
    if base == "rmsnorm_dynamic_quantize":
        ours = lambda: ops.rmsnorm_dynamic_quantize(x, w, 1e-6, **kwargs)[0]  # noqa: E731
        normed = torch.empty_like(x)
        if op.endswith("_unfused"):
            theirs = lambda: ops.dynamic_quantize(  # noqa: E731
                ops.rmsnorm(x, w, 1e-6, out=normed), **kwargs
            )[0]
        else:
            theirs = lambda: _torch_quantize(_torch_rms(x, w), group)  # noqa: E731
        return Case(ours, theirs, moved + _bytes(w))
    if base == "silu_and_mul_dynamic_quantize":
        ours = lambda: ops.silu_and_mul_dynamic_quantize(x, **kwargs)[0]  # noqa: E731
        activated = torch.empty(tokens, hidden, dtype=dtype, device=device)
        if op.endswith("_unfused"):
            theirs = lambda: ops.dynamic_quantize(  # noqa: E731
                ops.silu_and_mul(x, out=activated), **kwargs
            )[0]
        else:
            theirs = lambda: _torch_quantize(_torch_silu_and_mul(x), group)  # noqa: E731
        return Case(ours, theirs, moved)
    raise ValueError(f"no bench case {op!r}")


def _shapes(op: str, tokens: int, quick: bool) -> Iterable[tuple[str, Build]]:
    for hidden in widths(quick):
        yield (
            f"{tokens}x{hidden}",
            lambda dtype, device, hidden=hidden: quant_case(op, dtype, device, tokens, hidden),
        )


_NOTE = (
    "{op}: fp8 out; the torch column is {theirs}; max err compares the fp8 values (one "
    "fp8 step where a float32 sum taken in another order moves a value across a rounding "
    "boundary)."
)
_BENCHED = {
    "quantize": "x * (1 / scale) clamped and cast",
    "dynamic_quantize": "torch's absmax, scale and cast, a scale per row",
    "dynamic_quantize_g128": "the same with a scale per group of 128",
    "dynamic_quantize_per_tensor": "the tensor's absmax, then the cast",
    "rmsnorm_dynamic_quantize": "F.rms_norm then torch's per-row quantization",
    "rmsnorm_dynamic_quantize_g128": "F.rms_norm then torch's per-group quantization",
    "rmsnorm_dynamic_quantize_unfused": "sycl_kernels.rmsnorm then dynamic_quantize",
    "silu_and_mul_dynamic_quantize_g128": "torch's silu(gate) * up, then per-group quantization",
    "silu_and_mul_dynamic_quantize_g128_unfused": (
        "sycl_kernels.silu_and_mul then dynamic_quantize(group_size=128)"
    ),
}
# quant's demo row: a quantization whose torch form gives the same bits (the fused
# ones differ by an fp8 step where float32 sums are taken in another order).
_DEMO = "quantize"
for _op, _theirs in _BENCHED.items():
    register(
        BenchOp(
            _op,
            functools.partial(_shapes, _op),
            demo=(
                ("256x4096", functools.partial(quant_case, _op, tokens=256, hidden=4096))
                if _op == _DEMO
                else None
            ),
            note=_NOTE.format(op=_op, theirs=_theirs),
        )
    )
