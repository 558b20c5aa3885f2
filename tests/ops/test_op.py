"""ops/_op.py's eager path keeps each op's checked plan by its arguments' metadata:
a kept plan never lets a bad argument through, and the cache stays bounded."""

from __future__ import annotations

import pytest
import sycl_kernels
import torch
from sycl_kernels.ops import _op

from tests import references

ENTRY_POINTS = {
    "public": lambda x, w, eps: sycl_kernels.rmsnorm(x, w, eps, out=torch.empty_like(x)),
    "torch.ops": lambda x, w, eps: torch.ops.sycl_kernels.rmsnorm_out(
        x, w, eps, torch.empty_like(x)
    ),
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
    key = _op._metadata_key((x, parameter, 1e-6, None))
    assert key is not None and key != _op._metadata_key((x, w, 1e-6, None))


def test_the_cache_is_bounded_and_results_stay_right(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_op, "_PLAN_CACHE_SIZE", 2)
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
    assert _op._metadata_key((sparse, w, 1e-6, None)) != _op._metadata_key((strided, w, 1e-6, None))
    with pytest.raises(ValueError, match=r"x has layout torch\.sparse_coo"):
        sycl_kernels.rmsnorm(sparse, w, 1e-6)
