"""Autograd: every op has the gradient of its formula, the in-place ones as torch's own
in-place ops (into views too); the calls without one (out=, timestep_embedding, the
KV store) run forward under grad mode and raise at backward instead of returning a
wrong gradient."""

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


def _ungradable_calls():
    """(name, call(t) -> what it wrote or returned) for every call without a gradient,
    t [3, 32] requiring grad."""
    other = torch.randn(3, 32)
    ones = torch.ones(32)
    cache = references.rope_cache(8, 32)

    def heads(t: torch.Tensor) -> torch.Tensor:
        return t.view(3, 1, 32)

    def written(run, tensor: torch.Tensor) -> torch.Tensor:
        run(tensor)
        return tensor

    def kv_store(q: torch.Tensor) -> None:
        slots = torch.zeros(4, 1, 32)
        sycl_kernels.apply_rope(
            torch.arange(3),
            q,
            heads(other.clone()),
            cache,
            True,
            v=heads(other.clone()),
            k_cache=slots,
            v_cache=slots.clone(),
            out_loc=torch.arange(3),
        )

    ops = torch.ops.sycl_kernels
    return [
        ("apply_rope", lambda t: written(kv_store, heads(t))),
        ("rmsnorm", lambda t: sycl_kernels.rmsnorm(t, ones, out=torch.empty(3, 32))),
        (
            "silu_and_mul",
            lambda t: written(lambda out: ops.silu_and_mul_out(t, True, out), torch.empty(3, 16)),
        ),
        ("timestep_embedding", lambda t: sycl_kernels.timestep_embedding(t[:, 0], 16)),
    ]


@pytest.mark.parametrize(
    ("name", "call"), _ungradable_calls(), ids=[c[0] for c in _ungradable_calls()]
)
def test_ops_without_a_gradient_run_forward_and_raise_at_backward(name: str, call) -> None:
    """As torch's own ops: the forward runs under grad mode (model code calls ops
    outside no_grad), and backward raises when it reaches what the op wrote."""
    leaf = torch.randn(3, 32, requires_grad=True)
    with torch.no_grad():
        want = call(leaf.detach().clone())
    result = call(leaf * 1)  # a non-leaf, as a model's activations are
    torch.testing.assert_close(result.detach(), want)
    with pytest.raises(
        RuntimeError, match=rf"^{name}\(\): backward reached {name}, .* no gradient"
    ):
        result.sum().backward()
    for mode in (torch.no_grad, torch.inference_mode):
        with mode():
            call(leaf)


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


def _in_place_grads(call, reference, inputs: list[torch.Tensor], dtype) -> None:
    """call(*non-leaf copies) writes in place and returns what it wrote; the gradients
    of a random projection of it, at the leaves, against the float64 reference's."""
    leaves = [t.to(dtype).requires_grad_() for t in inputs]
    written = call(*(leaf * 1 for leaf in leaves))
    projections = [torch.randn_like(w) for w in written]
    loss = sum((w.float() * p).sum() for w, p in zip(written, projections, strict=True))
    got = torch.autograd.grad(loss, leaves)
    wanted = [t.detach().double().requires_grad_() for t in leaves]
    want_loss = sum(
        (w * p.double()).sum() for w, p in zip(reference(*wanted), projections, strict=True)
    )
    want = torch.autograd.grad(want_loss, wanted)
    tolerance = 4 * DTYPE_TOLERANCE[dtype]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == dtype
        torch.testing.assert_close(g.double(), w, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", list(DTYPE_TOLERANCE), ids=str)
@pytest.mark.parametrize("gemma", [False, True])
def test_fused_add_rmsnorm_gradients_match_the_reference(gemma: bool, dtype) -> None:
    op = sycl_kernels.gemma_fused_add_rmsnorm if gemma else sycl_kernels.fused_add_rmsnorm

    def call(x, residual, weight):
        op(x, residual, weight, 1e-5, rounded_sum=False)
        return x, residual

    def reference(x, residual, weight):
        return references.fused_add_rmsnorm(x, residual, weight, 1e-5, gemma)

    _in_place_grads(
        call, reference, [torch.randn(4, 64), torch.randn(4, 64), torch.randn(64)], dtype
    )


@pytest.mark.parametrize("dtype", list(DTYPE_TOLERANCE), ids=str)
def test_qknorm_gradients_match_the_reference(dtype) -> None:
    def call(q, k, q_weight, k_weight):
        sycl_kernels.qknorm(q, k, q_weight, k_weight, 1e-6)
        return q, k

    def reference(q, k, q_weight, k_weight):
        return references.rmsnorm(q, q_weight, 1e-6), references.rmsnorm(k, k_weight, 1e-6)

    inputs = [torch.randn(3, 4, 32), torch.randn(3, 2, 32), torch.randn(32), torch.randn(32)]
    _in_place_grads(call, reference, inputs, dtype)


@pytest.mark.parametrize("dtype", list(DTYPE_TOLERANCE), ids=str)
@pytest.mark.parametrize("is_neox", [True, False])
@pytest.mark.parametrize("fused", [False, True], ids=["rope", "qknorm_rope"])
def test_rope_gradients_match_the_reference_through_views_of_one_qkv(
    fused: bool, is_neox: bool, dtype
) -> None:
    """q and k as views into one fused qkv tensor, as engines and models pass them."""
    positions = torch.tensor([3, 0, 5])
    heads, kv_heads, head_dim, rotary = 4, 2, 32, 16

    def split(qkv):
        q = qkv[:, : heads * head_dim].view(3, heads, head_dim)
        k = qkv[:, heads * head_dim :].view(3, kv_heads, head_dim)
        return q, k

    def call(qkv, cache, *weights):
        q, k = split(qkv)
        if weights:
            sycl_kernels.qknorm_rope(positions, q, k, *weights, cache, is_neox)
        else:
            sycl_kernels.apply_rope(positions, q, k, cache, is_neox)
        return (qkv,)

    def reference(qkv, cache, *weights):
        q, k = split(qkv)
        if weights:
            q, k = (references.rmsnorm(t, w, 1e-6) for t, w in zip((q, k), weights, strict=True))
        rotated = [references.rope(positions, t, cache, is_neox) for t in (q, k)]
        return (torch.cat([t.flatten(1) for t in rotated], dim=1),)

    inputs = [torch.randn(3, (heads + kv_heads) * head_dim), references.rope_cache(8, rotary)]
    if fused:
        inputs += [torch.randn(head_dim), torch.randn(head_dim)]
    _in_place_grads(call, reference, inputs, dtype)
