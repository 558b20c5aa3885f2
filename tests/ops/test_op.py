"""ops/_op.py keeps each op's checked and bound launch by its arguments' metadata:
a kept launch never lets a bad argument through, reads each call's own tensors and
holds none of them, and the cache stays bounded."""

from __future__ import annotations

import gc
import weakref

import pytest
import sycl_kernels
import torch
from sycl_kernels.ops import _op, _schema

from tests import references


def _through_torch_ops(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    out = torch.empty_like(x)
    torch.ops.sycl_kernels.rmsnorm_out(x, w, eps, out)
    return out


ENTRY_POINTS = {
    "public": lambda x, w, eps: sycl_kernels.rmsnorm(x, w, eps, out=torch.empty_like(x)),
    "torch.ops": _through_torch_ops,
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_kept_plan_never_admits_an_argument_its_check_refuses(entry: str) -> None:
    call = ENTRY_POINTS[entry]
    x, w = torch.randn(3, 64), torch.randn(64)
    call(x, w, 1e-6)  # the plan of these arguments is now kept
    with pytest.raises(TypeError, match=r"weight has dtype torch\.float64"):
        call(x, w.double(), 1e-6)
    with pytest.raises(ValueError, match=r"weight has shape \(32,\)"):
        call(x, w[:32], 1e-6)
    with pytest.raises(ValueError, match="eps must be at least 0"):
        call(x, w, -1.0)
    with pytest.raises(ValueError, match="stride 2 in its last dimension"):
        call(torch.randn(3, 128)[:, ::2], w, 1e-6)


def test_a_kept_plan_for_true_is_not_the_plan_for_one() -> None:
    positions, cache = torch.arange(3), references.rope_cache(16, 64)
    q, k = torch.randn(3, 2, 64), torch.randn(3, 1, 64)
    sycl_kernels.apply_rope(positions, q, k, cache, True)
    with pytest.raises(TypeError, match="is_neox must be a bool, got int"):
        sycl_kernels.apply_rope(positions, q, k, cache, 1)


def test_a_tensor_subclass_is_checked_apart_from_a_plain_tensor() -> None:
    x, w = torch.randn(3, 64), torch.randn(64)
    sycl_kernels.rmsnorm(x, w, 1e-6)
    parameter = torch.nn.Parameter(w.clone(), requires_grad=False)
    torch.testing.assert_close(
        sycl_kernels.rmsnorm(x, parameter, 1e-6).double(),
        references.rmsnorm(x, w, 1e-6),
        **references.tolerance(torch.float32),
    )
    key = _schema.metadata_key((x, parameter, 1e-6, None))
    assert key is not None and key != _schema.metadata_key((x, w, 1e-6, None))


def test_the_cache_is_bounded_and_results_stay_right(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_op, "_LAUNCH_CACHE_SIZE", 2)
    w = torch.randn(64)
    for rows in (1, 2, 3, 4, 5, 2, 1):
        x = torch.randn(rows, 64)
        torch.testing.assert_close(
            sycl_kernels.rmsnorm(x, w, 1e-6).double(),
            references.rmsnorm(x, w, 1e-6),
            **references.tolerance(torch.float32),
        )


def test_a_sparse_tensor_is_not_taken_for_a_strided_one_of_its_strides() -> None:
    w = torch.randn(64)
    sparse = torch.randn(3, 64).to_sparse()  # reports strides (0, 0)
    strided = torch.zeros(64).as_strided((3, 64), sparse.stride())
    assert _schema.metadata_key((sparse, w, 1e-6, None)) != _schema.metadata_key(
        (strided, w, 1e-6, None)
    )
    with pytest.raises(ValueError, match=r"x has layout torch\.sparse_coo"):
        sycl_kernels.rmsnorm(sparse, w, 1e-6)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_a_kept_launch_reads_each_calls_own_tensors(entry: str) -> None:
    call = ENTRY_POINTS[entry]
    for _ in range(3):  # new tensors of one metadata each time: one kept launch
        x, w = torch.randn(5, 64), torch.randn(64)
        torch.testing.assert_close(
            call(x, w, 1e-6).double(),
            references.rmsnorm(x, w, 1e-6),
            **references.tolerance(torch.float32),
        )


def test_the_gate_order_and_the_out_tensor_are_part_of_the_kept_launch() -> None:
    x = torch.randn(4, 2 * 64)
    for gate_first in (True, False, True):
        gate, up = x.chunk(2, dim=-1) if gate_first else reversed(x.chunk(2, dim=-1))
        want = references.act_and_mul("silu_and_mul", torch.cat([gate, up], dim=-1))
        for out in (None, torch.empty(4, 64), torch.empty(4, 96)[:, :64]):
            got = sycl_kernels.silu_and_mul(x, out, gate_first=gate_first)
            assert out is None or got is out
            torch.testing.assert_close(got.double(), want, **references.tolerance(torch.float32))


def test_a_kept_launch_holds_no_tensor() -> None:
    x, w, cache = torch.randn(3, 64), torch.randn(64), references.rope_cache(16, 64)
    q, k, positions = torch.randn(3, 2, 64), torch.randn(3, 1, 64), torch.arange(3)
    held = [weakref.ref(t) for t in (x, w, cache, q, k, positions)]
    sycl_kernels.rmsnorm(x, w, 1e-6)
    sycl_kernels.fused_add_rmsnorm(x, x.clone(), w, 1e-6)
    sycl_kernels.apply_rope(positions, q, k, cache, True)
    sycl_kernels.qknorm_rope(positions, q, k, w, w, cache, True)
    del x, w, cache, q, k, positions
    gc.collect()
    assert all(ref() is None for ref in held)
