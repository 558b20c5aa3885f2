"""sycl_kernels.bench.activation: the activations against their torch forms (bench, demo).

The gated ones, act(gate) * up, on [tokens, 2 * dim] inputs (gpt-oss's swigluoai and
vLLM's fatrelu at their defaults); the elementwise gelus on [tokens, dim].
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import torch

from .. import ops
from .registry import BenchOp, Build, Case, nbytes, register, seeded_randn, widths

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
    x = seeded_randn(tokens, 2 * dim, dtype=dtype, device=device, seed=8)
    out = torch.empty(tokens, dim, dtype=dtype, device=device)
    if op in _TORCH_GATED:
        gated = _TORCH_GATED[op]
        return Case(lambda: getattr(ops, op)(x, out=out), lambda: gated(x), nbytes(x, out))
    act = _TORCH_ACTIVATIONS[op]
    return Case(
        lambda: getattr(ops, op)(x, out=out),
        lambda: act(x[:, :dim]) * x[:, dim:],
        nbytes(x, out),
    )


_TORCH_ELEMENTWISE = {
    "gelu_tanh": lambda a: torch.nn.functional.gelu(a, approximate="tanh"),
    "gelu_quick": lambda a: a * torch.sigmoid(1.702 * a),
}


def elementwise_activation_case(
    op: str, dtype: torch.dtype, device: torch.device, tokens: int, dim: int
) -> Case:
    x = seeded_randn(tokens, dim, dtype=dtype, device=device, seed=10)
    out = torch.empty_like(x)
    act = _TORCH_ELEMENTWISE[op]
    return Case(lambda: getattr(ops, op)(x, out=out), lambda: act(x), nbytes(x, out))


def _activation_shapes(op: str, tokens: int, quick: bool) -> Iterable[tuple[str, Build]]:
    for hidden in widths(quick):
        yield (
            f"{tokens}x2*{hidden}",
            lambda dtype, device, hidden=hidden: activation_case(op, dtype, device, tokens, hidden),
        )


register(
    BenchOp(
        "silu_and_mul",
        functools.partial(_activation_shapes, "silu_and_mul"),
        demo=(
            "256x2*11008",
            lambda dtype, device: activation_case("silu_and_mul", dtype, device, 256, 11008),
        ),
    )
)
for _op in ("gelu_and_mul", "gelu_tanh_and_mul", "fatrelu_and_mul", "swigluoai_and_mul"):
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
