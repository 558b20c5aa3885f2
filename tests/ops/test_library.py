"""The ops as torch.library custom ops: opcheck, and torch.compile(fullgraph=True) vs eager.

Each op's test file registers its opcheck samples (tests/ops/cases.py).
"""

from __future__ import annotations

import pytest
import sycl_kernels
import torch

from tests import references
from tests.ops import cases

# Every op's samples, registered by its test file (tests/ops/cases.py).
OPCHECK_CASES = cases.opcheck_samples()


@pytest.mark.parametrize(("name", "args"), OPCHECK_CASES, ids=[c[0] for c in OPCHECK_CASES])
def test_opcheck(name: str, args: tuple) -> None:
    torch.library.opcheck(getattr(torch.ops.sycl_kernels, name).default, args)


def test_every_public_op_is_a_custom_op_of_its_name_and_opchecked() -> None:
    checked = {name for name, _ in OPCHECK_CASES}
    for name in sycl_kernels.ops.__all__:
        assert hasattr(torch.ops.sycl_kernels, name), name
        assert name in checked, name


def _layer(x, residual, norm_w, qkv_w, q_w, k_w, positions, cache, k_cache, v_cache, out_loc, up):
    """A decoder layer's worth of the ops, in the order a serving engine calls them."""
    sycl_kernels.fused_add_rmsnorm(x, residual, norm_w, 1e-6)
    qkv = x @ qkv_w
    tokens = x.shape[0]
    q = qkv[:, :256].view(tokens, 4, 64)
    k = qkv[:, 256:320].view(tokens, 1, 64)
    v = qkv[:, 320:].view(tokens, 1, 64)
    sycl_kernels.qknorm(q, k, q_w, k_w, 1e-6)
    sycl_kernels.apply_rope(
        positions, q, k, cache, True, v=v, k_cache=k_cache, v_cache=v_cache, out_loc=out_loc
    )
    h = sycl_kernels.gemma_rmsnorm(q.reshape(tokens, 256), torch.zeros(256), 1e-6)
    mlp = sycl_kernels.silu_and_mul(h @ up) + sycl_kernels.gelu_tanh_and_mul(h @ up)
    emb = sycl_kernels.timestep_embedding(positions, 64)
    return sycl_kernels.rmsnorm(mlp, torch.ones(128)) + emb.sum(), q.clone(), k.clone()


def _layer_inputs(tokens: int = 6):
    g = torch.Generator().manual_seed(1)
    return [
        torch.randn(tokens, 128, generator=g),
        torch.randn(tokens, 128, generator=g),
        torch.randn(128, generator=g),
        torch.randn(128, 384, generator=g) / 8,
        torch.randn(64, generator=g),
        torch.randn(64, generator=g),
        torch.arange(tokens) * 3,
        references.rope_cache(64, 64),
        torch.zeros(8, 1, 64),
        torch.zeros(8, 1, 64),
        torch.tensor([7, 1, 0, 3, 5, 2])[:tokens],
        torch.randn(256, 256, generator=g) / 16,
    ]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_layer_matches_eager(backend: str) -> None:
    eager_inputs, compiled_inputs = _layer_inputs(), _layer_inputs()
    want = _layer(*eager_inputs)
    torch._dynamo.reset()
    got = torch.compile(_layer, fullgraph=True, backend=backend)(*compiled_inputs)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    # The in-place effects (x, residual, KV caches) happen under compile as well.
    for a, b in zip(compiled_inputs, eager_inputs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_compiled_with_dynamic_shapes_matches_eager() -> None:
    """Symbolic token counts (serving engines compile so): the checks run on shapes
    that cannot be hashed, and one graph serves every count."""
    torch._dynamo.reset()
    compiled = torch.compile(_layer, fullgraph=True, dynamic=True, backend="aot_eager")
    for tokens in (6, 5, 3):
        eager_inputs, compiled_inputs = _layer_inputs(tokens), _layer_inputs(tokens)
        want = _layer(*eager_inputs)
        got = compiled(*compiled_inputs)
        for a, b in zip((*got, *compiled_inputs), (*want, *eager_inputs), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
