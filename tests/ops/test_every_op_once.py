"""Every public op, run once in each dtype it takes, against its float64 reference.

The ops are the package's own list: sycl_kernels.ops.__all__, and any other name
sycl_kernels exports that is a custom op (torch.ops.sycl_kernels.<name>). Their cases
are the ones below (the ops that predate the registration) and those the op test files
register (`once=` in tests/ops/cases.py, as `python -m sycl_kernels new-op` writes
it). An exported op without a case, or with two, fails
(test_every_exported_op_has_a_case, and its own test). A case is given the op to call,
looked up by the exported name, so it cannot check another op by mistake.

The sizes are ones kernels/variants.toml does not bundle: on an empty kernel cache
each (op, dtype) is JIT-compiled. .ci/runtime-line runs this file on every runtime
line, where it checks that each op's kernel compiles with that line's runtime wheels
alone and computes what its reference does. The grids of shapes, layouts, options
and dtypes are the op files' (tests/ops/test_<family>.py), which the main run covers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import sycl_kernels
import torch
from sycl_kernels import _dtypes as dtype_table

from tests import references
from tests.ops import cases

DTYPES = tuple(d.torch_dtype for d in dtype_table.DTYPES)
EPS = 1e-6
TOKENS = 5
# No manifest variant has these (rows: 64 .. 16384, heads: 64, 128, 256; activations
# from 2048; timestep_embedding 128 .. 1024), so the JIT compiles each kernel.
WIDTH = 200
HEAD_DIM = 96
MAX_POSITION = 4096


@dataclass(frozen=True)
class Case:
    run: Callable[[Callable[..., object], torch.dtype], None]
    """(the op, a dtype) -> calls the op once and checks it against its reference."""
    dtypes: tuple[torch.dtype, ...] = DTYPES


def _rows(dtype: torch.dtype, width: int = WIDTH) -> torch.Tensor:
    return torch.randn(TOKENS, width).to(dtype)


def _weight(dtype: torch.dtype, width: int = WIDTH) -> torch.Tensor:
    return (1 + 0.5 * torch.randn(width)).to(dtype)


def _norm(op: Callable, dtype: torch.dtype, *, gemma: bool) -> None:
    x, weight = _rows(dtype), _weight(dtype)
    got = op(x, weight, EPS)
    assert got.dtype == dtype
    references.assert_close(got, references.rmsnorm(x, weight, EPS, gemma))


def _fused_add_norm(op: Callable, dtype: torch.dtype, *, gemma: bool) -> None:
    x, residual, weight = _rows(dtype), _rows(dtype), _weight(dtype)
    want_x, want_residual = references.fused_add_rmsnorm(
        x, residual, weight, EPS, gemma, rounded_sum=True
    )
    op(x, residual, weight, EPS)  # in place; rounded_sum=True is the default
    references.assert_close(residual, want_residual)
    references.assert_close(x, want_x)


def _heads(dtype: torch.dtype, heads: int) -> torch.Tensor:
    return torch.randn(TOKENS, heads, HEAD_DIM).to(dtype)


def _qknorm(op: Callable, dtype: torch.dtype) -> None:
    q, k = _heads(dtype, 4), _heads(dtype, 2)
    q_weight, k_weight = _weight(dtype, HEAD_DIM), _weight(dtype, HEAD_DIM)
    want_q = references.rmsnorm(q, q_weight, EPS)
    want_k = references.rmsnorm(k, k_weight, EPS)
    op(q, k, q_weight, k_weight, EPS)
    references.assert_close(q, want_q)
    references.assert_close(k, want_k)


def _rotation() -> tuple[torch.Tensor, torch.Tensor]:
    positions = torch.randint(0, MAX_POSITION, (TOKENS,))
    return positions, references.rope_cache(MAX_POSITION, HEAD_DIM)


def _apply_rope(op: Callable, dtype: torch.dtype) -> None:
    q, k = _heads(dtype, 4), _heads(dtype, 2)
    positions, cache = _rotation()
    want_q = references.rope(positions, q, cache, True)
    want_k = references.rope(positions, k, cache, True)
    op(positions, q, k, cache, True)
    references.assert_close(q, want_q)
    references.assert_close(k, want_k)


def _qknorm_rope(op: Callable, dtype: torch.dtype) -> None:
    q, k = _heads(dtype, 4), _heads(dtype, 2)
    q_weight, k_weight = _weight(dtype, HEAD_DIM), _weight(dtype, HEAD_DIM)
    positions, cache = _rotation()
    want_q = references.rope(positions, references.rmsnorm(q, q_weight, EPS), cache, True)
    want_k = references.rope(positions, references.rmsnorm(k, k_weight, EPS), cache, True)
    op(positions, q, k, q_weight, k_weight, cache, True, EPS)
    references.assert_close(q, want_q)
    references.assert_close(k, want_k)


def _halves_and_mul(op: Callable, dtype: torch.dtype, *, reference: str) -> None:
    x = (3 * torch.randn(TOKENS, 2 * WIDTH)).to(dtype)
    got = op(x)
    assert got.dtype == dtype
    references.assert_close(got, references.act_and_mul(reference, x))


def _act_and_mul(op: Callable, dtype: torch.dtype) -> None:
    gate, up = (3 * torch.randn(TOKENS, WIDTH)).to(dtype), _rows(dtype)
    got = op(gate, up, "silu")
    assert got.dtype == dtype
    references.assert_close(got, references.act_and_mul("silu_and_mul", torch.cat([gate, up], -1)))


def _timestep_embedding(op: Callable, dtype: torch.dtype) -> None:
    t = (torch.rand(TOKENS) * 1000).to(dtype)
    got = op(t, WIDTH)
    assert got.dtype == torch.float32
    want = references.timestep_embedding(t.float(), WIDTH)
    torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-4)


CASES: dict[str, Case] = {
    "rmsnorm": Case(functools.partial(_norm, gemma=False)),
    "gemma_rmsnorm": Case(functools.partial(_norm, gemma=True)),
    "fused_add_rmsnorm": Case(functools.partial(_fused_add_norm, gemma=False)),
    "gemma_fused_add_rmsnorm": Case(functools.partial(_fused_add_norm, gemma=True)),
    "qknorm": Case(_qknorm),
    "apply_rope": Case(_apply_rope),
    "qknorm_rope": Case(_qknorm_rope),
    "silu_and_mul": Case(functools.partial(_halves_and_mul, reference="silu_and_mul")),
    "gelu_and_mul": Case(functools.partial(_halves_and_mul, reference="gelu_and_mul")),
    "gelu_tanh_and_mul": Case(functools.partial(_halves_and_mul, reference="gelu_tanh_and_mul")),
    "act_and_mul": Case(_act_and_mul),
    # One kernel (float32 math and output) for every timestep dtype.
    "timestep_embedding": Case(_timestep_embedding, dtypes=(torch.float32,)),
}


def _exported_ops() -> list[str]:
    names = set(sycl_kernels.ops.__all__)
    names |= {name for name in sycl_kernels.__all__ if hasattr(torch.ops.sycl_kernels, name)}
    return sorted(names)


EXPORTED = _exported_ops()
# The cases the op test files register.
REGISTERED: dict[str, cases.OnceCase] = cases.once_cases()
ALL_CASES: dict[str, Case | cases.OnceCase] = {**CASES, **REGISTERED}


def _op(name: str) -> Callable[..., object]:
    return getattr(sycl_kernels.ops, name, None) or getattr(sycl_kernels, name)


def test_every_exported_op_has_a_case() -> None:
    assert "rmsnorm" in EXPORTED, f"the exported ops were not found: {EXPORTED}"
    missing = [name for name in EXPORTED if name not in ALL_CASES]
    assert not missing, f"exported ops without a case here or registered: {missing}"
    twice = sorted(set(CASES) & set(REGISTERED))
    assert not twice, f"ops with a case here and a registered one: {twice}"
    unknown = [name for name in ALL_CASES if name not in EXPORTED]
    assert not unknown, f"cases of ops the package does not export: {unknown}"


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        (name, dtype)
        for name in EXPORTED
        for dtype in (ALL_CASES[name].dtypes if name in ALL_CASES else DTYPES[:1])
    ],
    ids=lambda value: str(value).removeprefix("torch."),
)
def test_op_matches_its_reference(name: str, dtype: torch.dtype) -> None:
    if name not in ALL_CASES:
        pytest.fail(f"{name} is exported but has no case here or registered")
    ALL_CASES[name].run(_op(name), dtype)
