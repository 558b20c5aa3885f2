"""The layouts and forms callers pass (vLLM, SGLang, Hugging Face), against float64 references:
strided N-D norm inputs, float32 and absent weights, both fused-add sums, Gemma QK-norm,
RoPE on 2-D, 3-D and 4-D (NHD and HND) views with broadcast positions, no key, partial
rotary and a cache in the model dtype, and gated activations with either half activated.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sycl_kernels
import torch
from sycl_kernels import _dtypes as dtype_table

from tests import references

DTYPES = [d.torch_dtype for d in dtype_table.DTYPES]
HALF_DTYPES = [torch.float16, torch.bfloat16]


@pytest.fixture(params=["cpu", "gpu"])
def tuning(request: pytest.FixtureRequest, tuning_override: Callable[[str], None]) -> str:
    """Either tuning of the kernels, run on the CPU device: XPU tensors get "gpu" (vector
    accesses, with a scalar path for misaligned rows), which no Intel GPU here runs."""
    tuning_override(request.param)
    return request.param


def _close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    torch.testing.assert_close(got.double(), want, **references.tolerance(dtype))


def _transposed(batch: int, heads: int, seq: int, dim: int, dtype: torch.dtype) -> torch.Tensor:
    """A [batch, heads, seq, dim] view of a [batch, seq, heads, dim] tensor, as HF's q."""
    return torch.randn(batch, seq, heads, dim).to(dtype).transpose(1, 2)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("gemma", [False, True])
@pytest.mark.usefixtures("tuning")
def test_rmsnorm_of_a_transposed_view_without_copy(dtype: torch.dtype, gemma: bool) -> None:
    x = _transposed(2, 4, 3, 256, dtype)
    weight = torch.randn(256).to(dtype)
    op = sycl_kernels.gemma_rmsnorm if gemma else sycl_kernels.rmsnorm
    got = op(x, weight)
    assert got.is_contiguous() and got.shape == x.shape
    _close(got, references.rmsnorm(x, weight, 1e-6, gemma), dtype)
    out = torch.zeros(2, 3, 4, 256, dtype=dtype).transpose(1, 2)
    assert op(x, weight, 1e-6, out=out) is out
    _close(out, references.rmsnorm(x, weight, 1e-6, gemma), dtype)


def test_more_than_three_unmergeable_leading_dims_are_refused() -> None:
    x = torch.randn(2, 3, 2, 3, 64).permute(0, 2, 1, 3, 4)[:, :, :, ::2]
    with pytest.raises(ValueError, match=r"rmsnorm\(\): x .* cannot be merged"):
        sycl_kernels.rmsnorm(x, torch.ones(64))


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
@pytest.mark.usefixtures("tuning")
def test_float32_weight_on_half_rows(dtype: torch.dtype) -> None:
    x, weight = torch.randn(5, 1000).to(dtype), torch.randn(1000)
    _close(sycl_kernels.rmsnorm(x, weight), references.rmsnorm(x, weight, 1e-6), dtype)
    _close(sycl_kernels.gemma_rmsnorm(x, weight), references.rmsnorm(x, weight, 1e-6, True), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.usefixtures("tuning")
def test_no_weight_means_no_scale(dtype: torch.dtype) -> None:
    # Rows one element off alignment: the gpu tuning's scalar path.
    x = torch.randn(5, 513).to(dtype)[:, 1:]
    _close(sycl_kernels.rmsnorm(x, None), references.rmsnorm(x, None, 1e-6), dtype)
    residual = torch.randn(5, 513).to(dtype)[:, 1:]
    want_x, want_residual = references.fused_add_rmsnorm(x, residual, None, 1e-6)
    sycl_kernels.fused_add_rmsnorm(x, residual, None)
    _close(x, want_x, dtype)
    _close(residual, want_residual, dtype)


@pytest.mark.parametrize("rounded_sum", [True, False])
@pytest.mark.usefixtures("tuning")
def test_fused_add_normalizes_the_sum_it_is_told(rounded_sum: bool) -> None:
    # bf16 rows where rounding the sum moves the result: the two choices differ, and
    # each matches its own reference to within one rounding of the output.
    torch.manual_seed(0)
    x = torch.randn(64, 256).bfloat16()
    residual = (torch.randn(64, 256) * 100).bfloat16()
    weight = torch.randn(256).bfloat16()
    want_x, want_residual = references.fused_add_rmsnorm(
        x, residual, weight, 1e-6, rounded_sum=rounded_sum
    )
    other_x, _ = references.fused_add_rmsnorm(
        x, residual, weight, 1e-6, rounded_sum=not rounded_sum
    )
    sycl_kernels.fused_add_rmsnorm(x, residual, weight, rounded_sum=rounded_sum)
    assert torch.equal(residual, want_residual.bfloat16())
    # Float32 math may round a few elements the other way than the float64 reference;
    # the other sum's reference differs in many more.
    mine = (x != want_x.bfloat16()).sum()
    theirs = (x != other_x.bfloat16()).sum()
    assert mine < theirs / 4, (mine, theirs)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.usefixtures("tuning")
def test_fused_add_on_strided_rows(dtype: torch.dtype) -> None:
    x = _transposed(2, 3, 4, 128, dtype)
    residual = torch.randn(2, 3, 4, 129).to(dtype)[..., 1:]  # misaligned rows
    weight = torch.randn(128).to(dtype)
    want_x, want_residual = references.fused_add_rmsnorm(x, residual, weight, 1e-6, gemma=True)
    sycl_kernels.gemma_fused_add_rmsnorm(x, residual, weight, rounded_sum=False)
    _close(residual, want_residual, dtype)
    _close(x, want_x, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.usefixtures("tuning")
def test_gemma_qknorm_on_padded_and_transposed_heads(dtype: torch.dtype) -> None:
    # vLLM's head-padded q (head stride > head_dim) and HF's transposed k.
    padded = torch.randn(6, 4, 160).to(dtype)
    q = padded[..., :128]
    k = _transposed(2, 2, 3, 128, dtype)
    q_weight, k_weight = torch.randn(128).to(dtype), torch.randn(128).to(dtype)
    want_q = references.rmsnorm(q, q_weight, 1e-6, gemma=True)
    want_k = references.rmsnorm(k, k_weight, 1e-6, gemma=True)
    tail = padded[..., 128:].clone()
    sycl_kernels.qknorm(q, k, q_weight, k_weight, gemma=True)
    _close(q, want_q, dtype)
    _close(k, want_k, dtype)
    assert torch.equal(padded[..., 128:], tail)


def _rope_reference(
    positions: torch.Tensor, x: torch.Tensor, cache: torch.Tensor, is_neox: bool
) -> torch.Tensor:
    """x [batch, seq, heads, head_dim] with positions [batch, seq], through the 3-D reference."""
    batch, seq, heads, head_dim = x.shape
    flat = references.rope(positions.reshape(-1), x.reshape(-1, heads, head_dim), cache, is_neox)
    return flat.view(batch, seq, heads, head_dim)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("is_neox", [True, False])
@pytest.mark.parametrize("cache_in_dtype", [False, True])
def test_rope_on_hf_layout_with_one_position_row(
    dtype: torch.dtype, is_neox: bool, cache_in_dtype: bool
) -> None:
    batch, seq, head_dim = 2, 5, 128
    q = _transposed(batch, 8, seq, head_dim, dtype)
    k = _transposed(batch, 2, seq, head_dim, dtype)
    cache = references.rope_cache(64, head_dim)
    cache = cache.to(dtype) if cache_in_dtype else cache
    positions = torch.tensor([[3, 9, 10, 11, 40]])  # [1, seq], shared by the batch
    full = positions.expand(batch, seq)
    want_q = _rope_reference(full, q.transpose(1, 2), cache, is_neox).transpose(1, 2)
    want_k = _rope_reference(full, k.transpose(1, 2), cache, is_neox).transpose(1, 2)
    sycl_kernels.apply_rope(positions, q, k, cache, is_neox, layout="HND")
    _close(q, want_q, dtype)
    _close(k, want_k, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("positions_dtype", [torch.int32, torch.int64], ids=str)
def test_rope_on_2d_rows_without_key_and_partial_rotary(
    dtype: torch.dtype, positions_dtype: torch.dtype
) -> None:
    # vLLM/SGLang: [tokens, heads * head_size], key None; GPT-NeoX-style partial rotary.
    tokens, heads, head_size, rotary_dim = 7, 4, 128, 32
    q = torch.randn(tokens, heads * head_size).to(dtype)
    positions = torch.randint(0, 64, (tokens,), dtype=positions_dtype)
    cache = references.rope_cache(64, rotary_dim)
    want = references.rope(positions, q.view(tokens, heads, head_size), cache, True)
    sycl_kernels.apply_rope(positions, q, None, cache, True, head_size=head_size)
    _close(q.view(tokens, heads, head_size), want, dtype)


def test_rope_on_nhd_4d_and_padded_heads() -> None:
    batch, seq, head_dim = 3, 4, 64
    storage = torch.randn(batch, seq, 6, 80)
    q, k = storage[:, :, :4, :head_dim], storage[:, :, 4:, :head_dim]
    untouched = storage[..., head_dim:].clone()
    positions = torch.randint(0, 32, (batch, seq))
    cache = references.rope_cache(32, head_dim)
    want_q, want_k = (_rope_reference(positions, t, cache, False) for t in (q, k))
    sycl_kernels.apply_rope(positions, q, k, cache, False)
    _close(q, want_q, torch.float32)
    _close(k, want_k, torch.float32)
    assert torch.equal(storage[..., head_dim:], untouched)


@pytest.mark.parametrize("op", ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"])
@pytest.mark.parametrize("gate_first", [True, False])
@pytest.mark.usefixtures("tuning")
def test_gated_activation_on_either_half(op: str, gate_first: bool) -> None:
    x = torch.randn(2, 3, 2 * 512)
    first, second = x.chunk(2, -1)
    ordered = x if gate_first else torch.cat([second, first], -1)
    got = getattr(sycl_kernels, op)(x, gate_first=gate_first)
    _close(got, references.act_and_mul(op, ordered), torch.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("activation", ["silu", "gelu", "gelu_tanh"])
@pytest.mark.usefixtures("tuning")
def test_act_and_mul_of_two_tensors(dtype: torch.dtype, activation: str) -> None:
    gate = torch.randn(3, 4, 2048).to(dtype)
    up = torch.randn(3, 8, 2048).to(dtype)[:, ::2]
    want = references.act_and_mul(f"{activation}_and_mul", torch.cat([gate, up], -1))
    _close(sycl_kernels.act_and_mul(gate, up, activation), want, dtype)
    out = torch.empty(3, 4, 2048, dtype=dtype)
    assert sycl_kernels.act_and_mul(gate, up, activation, out) is out
    _close(out, want, dtype)
