"""Autograd: the out-of-place ops have the gradients of their formulas; the in-place
ops (and out=, and timestep_embedding) raise instead of returning a wrong gradient."""

from __future__ import annotations

import pytest
import sycl_kernels
import torch

from tests import references

DTYPE_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2}


def _reference_grads(form, inputs: list[torch.Tensor], grad: torch.Tensor) -> list[torch.Tensor]:
    """The gradients of the float64 reference at the same inputs."""
    leaves = [t.detach().double().requires_grad_() for t in inputs]
    return list(torch.autograd.grad(form(*leaves), leaves, grad.double()))


def _check_grads(op, form, inputs: list[torch.Tensor], dtype: torch.dtype) -> None:
    leaves = [t.to(dtype).requires_grad_() for t in inputs]
    result = op(*leaves)
    grad = torch.randn_like(result)
    got = torch.autograd.grad(result, leaves, grad)
    want = _reference_grads(form, [t.detach() for t in leaves], grad)
    tolerance = DTYPE_TOLERANCE[dtype]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == dtype
        torch.testing.assert_close(g.double(), w, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", list(DTYPE_TOLERANCE), ids=str)
@pytest.mark.parametrize("gemma", [False, True])
@pytest.mark.parametrize("shape", [(3, 64), (2, 3, 96)])
def test_rmsnorm_gradients_match_the_reference(shape, gemma: bool, dtype) -> None:
    op = sycl_kernels.gemma_rmsnorm if gemma else sycl_kernels.rmsnorm
    x, w = torch.randn(shape), torch.randn(shape[-1])
    _check_grads(
        lambda x, w: op(x, w, 1e-5),
        lambda x, w: references.rmsnorm(x, w, 1e-5, gemma),
        [x, w],
        dtype,
    )


@pytest.mark.parametrize("dtype", list(DTYPE_TOLERANCE), ids=str)
@pytest.mark.parametrize("op", ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"])
def test_act_and_mul_gradients_match_the_reference(op: str, dtype) -> None:
    _check_grads(
        getattr(sycl_kernels, op),
        lambda x: references.act_and_mul(op, x),
        [torch.randn(5, 2 * 48) * 3],
        dtype,
    )


def test_only_the_inputs_that_require_grad_get_one() -> None:
    x, w = torch.randn(4, 64, requires_grad=True), torch.randn(64)
    sycl_kernels.rmsnorm(x, w).sum().backward()
    assert x.grad is not None and w.grad is None


def test_gradients_flow_through_torch_ops_and_a_compiled_graph() -> None:
    x, w = torch.randn(4, 64), torch.randn(64)
    grads = []
    for call in (
        lambda x, w: torch.ops.sycl_kernels.rmsnorm(x, w, 1e-6),
        torch.compile(lambda x, w: sycl_kernels.rmsnorm(x, w), fullgraph=True, backend="aot_eager"),
    ):
        leaves = [x.clone().requires_grad_(), w.clone().requires_grad_()]
        call(*leaves).square().sum().backward()
        grads.append([t.grad for t in leaves])
    want = _reference_grads(
        lambda x, w: references.rmsnorm(x, w, 1e-6).square().sum(), [x, w], torch.tensor(1.0)
    )
    for got in grads:
        for g, ref in zip(got, want, strict=True):
            torch.testing.assert_close(g.double(), ref, rtol=1e-4, atol=1e-4)


def _in_place_calls():
    """(name, call(t)) for every op without a gradient, t [3, 32] requiring grad."""
    other = torch.randn(3, 32)
    ones = torch.ones(32)
    cache = references.rope_cache(8, 32)

    def heads(t: torch.Tensor) -> torch.Tensor:
        return t.view(3, 1, 32)

    ops = torch.ops.sycl_kernels
    return [
        ("fused_add_rmsnorm", lambda t: sycl_kernels.fused_add_rmsnorm(t, other.clone(), ones)),
        ("gemma_fused_add_rmsnorm", lambda t: ops.gemma_fused_add_rmsnorm(other, other, t[0])),
        ("qknorm", lambda t: sycl_kernels.qknorm(heads(t), heads(other), ones, ones)),
        (
            "apply_rope",
            lambda t: sycl_kernels.apply_rope(torch.arange(3), heads(t), heads(other), cache, True),
        ),
        (
            "qknorm_rope",
            lambda t: sycl_kernels.qknorm_rope(
                torch.arange(3), heads(other), heads(t), ones, ones, cache, False, gemma=True
            ),
        ),
        ("rmsnorm", lambda t: sycl_kernels.rmsnorm(t, ones, out=torch.empty(3, 32))),
        ("silu_and_mul", lambda t: ops.silu_and_mul_out(t, True, torch.empty(3, 16))),
        ("timestep_embedding", lambda t: sycl_kernels.timestep_embedding(t[:, 0], 16)),
    ]


@pytest.mark.parametrize(("name", "call"), _in_place_calls(), ids=[c[0] for c in _in_place_calls()])
def test_ops_without_a_gradient_raise_under_grad_and_run_without(name: str, call) -> None:
    t = torch.randn(3, 32, requires_grad=True)
    before = t.detach().clone()
    with pytest.raises(RuntimeError, match=rf"^{name}\(\): .* has no gradient"):
        call(t)
    assert torch.equal(t.detach(), before), "the refused call wrote its input"
    for mode in (torch.no_grad, torch.inference_mode):
        with mode():
            call(t)


def _written_in_place(path: str, saved: torch.Tensor, which: str) -> None:
    """Writes `saved` through one op that writes in place or into out=, by `path`."""
    x, w = torch.randn(3, 64), torch.randn(64)
    public = path == "public"
    if which == "rmsnorm out=":
        if public:
            sycl_kernels.rmsnorm(x, w, 1e-6, out=saved)
        else:
            torch.ops.sycl_kernels.rmsnorm_out(x, w, 1e-6, saved)
    elif which == "fused_add_rmsnorm residual":
        op = sycl_kernels.fused_add_rmsnorm if public else torch.ops.sycl_kernels.fused_add_rmsnorm
        op(x, saved, w, 1e-6)
    else:  # qknorm's k
        q, qk_w = torch.randn(3, 4, 16), torch.randn(16)
        op = sycl_kernels.qknorm if public else torch.ops.sycl_kernels.qknorm
        op(q, saved.view(3, 4, 16), qk_w, qk_w, 1e-6)


@pytest.mark.parametrize("path", ["public", "torch.ops"])
@pytest.mark.parametrize("which", ["rmsnorm out=", "fused_add_rmsnorm residual", "qknorm k"])
def test_a_tensor_saved_for_backward_then_written_is_refused(which: str, path: str) -> None:
    """The ops write through raw addresses, so they bump the written tensors' versions
    themselves, as torch's in-place ops do: autograd must not use the changed values."""
    a = torch.randn(3, 64, requires_grad=True)
    saved = torch.randn(3, 64)
    loss = (a * saved).sum()  # saves `saved` for a's gradient
    _written_in_place(path, saved, which)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
