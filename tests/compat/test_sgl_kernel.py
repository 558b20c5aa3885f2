"""sycl_kernels.compat.sgl_kernel against float64 references written from sgl_kernel's
(flashinfer's, sgl-kernel-xpu's) definitions, and its call contract (returns, in place).

Sizes are manifest ones (kernels/variants.toml) and shared with test_vllm.py, so the
two files compile few variants.
"""

from __future__ import annotations

import math

import pytest
import torch
from sycl_kernels.compat import sgl_kernel

from tests.references import assert_close, rope_cache

HIDDEN = 2048  # norms
DIM = 2048  # gated activations: input [..., 2 * DIM]
HEAD_SIZE = 128
MAX_POSITION = 4096
EPS = 1e-6
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


# References: sgl_kernel computes in float32 and rounds once; these compute in float64.


def _rmsnorm(x: torch.Tensor, weight: torch.Tensor, gemma: bool = False) -> torch.Tensor:
    x64 = x.double()
    scale = weight.double() + 1 if gemma else weight.double()
    return x64 * torch.rsqrt(x64.square().mean(-1, keepdim=True) + EPS) * scale


def _act_and_mul(name: str, x: torch.Tensor) -> torch.Tensor:
    gate, up = x.double().chunk(2, dim=-1)
    if name == "silu_and_mul":
        act = gate * torch.sigmoid(gate)
    elif name == "gelu_and_mul":
        act = 0.5 * gate * torch.special.erfc(-gate / math.sqrt(2))
    else:
        inner = math.sqrt(2 / math.pi) * (gate + 0.044715 * gate**3)
        act = gate * torch.sigmoid(2 * inner)  # 0.5 * (1 + tanh(z)) = sigmoid(2z)
    return act * up


def _rope(
    positions: torch.Tensor, x: torch.Tensor, cache: torch.Tensor, is_neox: bool
) -> torch.Tensor:
    """x [tokens, heads, head_size]: its first cache.shape[1] elements per head rotated."""
    rot = cache.shape[1]
    cos, sin = cache.double()[positions.long()].unsqueeze(1).chunk(2, dim=-1)
    x64 = x.double().clone()
    if is_neox:
        a, b = x64[..., : rot // 2], x64[..., rot // 2 : rot]
    else:
        a, b = x64[..., 0:rot:2], x64[..., 1:rot:2]
    a_new, b_new = a * cos - b * sin, b * cos + a * sin
    a.copy_(a_new)
    b.copy_(b_new)
    return x64


# Norms


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rmsnorm_returns_new_tensor_or_out(dtype: torch.dtype) -> None:
    x = torch.randn(2, 3, HIDDEN).to(dtype)
    weight = (1 + 0.5 * torch.randn(HIDDEN)).to(dtype)
    got = sgl_kernel.rmsnorm(x, weight)
    assert got.shape == x.shape and got.dtype == dtype
    assert_close(got, _rmsnorm(x, weight))
    out = torch.empty_like(x)
    assert sgl_kernel.rmsnorm(x, weight, EPS, out) is out
    assert torch.equal(out, got)


def test_rmsnorm_float32_weight_on_bfloat16_input() -> None:
    x = torch.randn(5, HIDDEN).to(torch.bfloat16)
    weight = 1 + 0.5 * torch.randn(HIDDEN)
    got = sgl_kernel.rmsnorm(x, weight, EPS)
    assert got.dtype == torch.bfloat16
    assert_close(got, _rmsnorm(x, weight))


def test_gemma_rmsnorm() -> None:
    x = torch.randn(5, HIDDEN).to(torch.bfloat16)
    weight = (0.5 * torch.randn(HIDDEN)).to(torch.bfloat16)
    assert_close(sgl_kernel.gemma_rmsnorm(x, weight), _rmsnorm(x, weight, gemma=True))
    out = torch.empty_like(x)
    assert sgl_kernel.gemma_rmsnorm(x, weight, EPS, out, enable_pdl=False) is out
    assert_close(out, _rmsnorm(x, weight, gemma=True))


@pytest.mark.parametrize(
    ("gemma", "dtype"),
    [(False, torch.float32), (False, torch.bfloat16), (True, torch.bfloat16)],
    ids=["fp32", "bf16", "gemma-bf16"],
)
def test_fused_add_rmsnorm_in_place(gemma: bool, dtype: torch.dtype) -> None:
    x = torch.randn(5, HIDDEN).to(dtype)
    residual = torch.randn(5, HIDDEN).to(dtype)
    weight = (1 + 0.5 * torch.randn(HIDDEN)).to(dtype)
    total = x.double() + residual.double()
    fn = sgl_kernel.gemma_fused_add_rmsnorm if gemma else sgl_kernel.fused_add_rmsnorm
    x_ptr, residual_ptr = x.data_ptr(), residual.data_ptr()
    assert fn(x, residual, weight, EPS) is None
    assert (x.data_ptr(), residual.data_ptr()) == (x_ptr, residual_ptr)
    assert torch.equal(residual, total.to(dtype))
    assert_close(x, _rmsnorm(total, weight, gemma))


def test_fused_add_rmsnorm_normalizes_the_float32_sum() -> None:
    # bf16: the sum rounded to bf16 and the exact sum give different outputs on many
    # elements; sgl_kernel (flashinfer) normalizes the exact (float32) one.
    x = torch.randn(8, HIDDEN).to(torch.bfloat16)
    residual = torch.randn(8, HIDDEN).to(torch.bfloat16)
    weight = (1 + 0.5 * torch.randn(HIDDEN)).to(torch.bfloat16)
    total = x.double() + residual.double()
    float_sum = _rmsnorm(total, weight).to(torch.bfloat16)
    rounded_sum = _rmsnorm(total.to(torch.bfloat16), weight).to(torch.bfloat16)
    assert (float_sum != rounded_sum).float().mean() > 0.05, "the two readings must differ"
    sgl_kernel.fused_add_rmsnorm(x, residual, weight)
    assert (x != float_sum).float().mean() < 1e-3
    assert (x != rounded_sum).float().mean() > 0.05


def test_fused_inplace_qknorm() -> None:
    # q and k as views of one qkv row, as attention layers produce them.
    qkv = torch.randn(5, 8 * HEAD_SIZE).to(torch.bfloat16)
    q = qkv[:, : 4 * HEAD_SIZE].view(5, 4, HEAD_SIZE)
    k = qkv[:, 4 * HEAD_SIZE : 6 * HEAD_SIZE].view(5, 2, HEAD_SIZE)
    v_before = qkv[:, 6 * HEAD_SIZE :].clone()
    q_weight, k_weight = (1 + 0.5 * torch.randn(2, HEAD_SIZE)).to(torch.bfloat16)
    want_q, want_k = _rmsnorm(q, q_weight), _rmsnorm(k, k_weight)
    assert sgl_kernel.fused_inplace_qknorm(q, k, q_weight, k_weight) is None
    assert_close(q, want_q)
    assert_close(k, want_k)
    assert torch.equal(qkv[:, 6 * HEAD_SIZE :], v_before)


# Gated activations


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("silu_and_mul", torch.float32),
        ("silu_and_mul", torch.float16),
        ("silu_and_mul", torch.bfloat16),
        ("gelu_and_mul", torch.bfloat16),
        ("gelu_tanh_and_mul", torch.bfloat16),
    ],
    ids=lambda v: str(v).removeprefix("torch."),
)
def test_act_and_mul_returns_new_tensor_or_out(name: str, dtype: torch.dtype) -> None:
    fn = getattr(sgl_kernel, name)
    x = (2 * torch.randn(3, 4, 2 * DIM)).to(dtype)
    got = fn(x)
    assert got.shape == (3, 4, DIM) and got.dtype == dtype
    assert_close(got, _act_and_mul(name, x))
    out = torch.empty(3, 4, DIM, dtype=dtype)
    assert fn(x, out) is out
    assert torch.equal(out, got)


# Rotary embedding


def _qkv(tokens: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """qkv [tokens, (4 + 2 + 2) heads * HEAD_SIZE] and its 2-D query, key slices."""
    qkv = torch.randn(tokens, 8 * HEAD_SIZE).to(dtype)
    return qkv, qkv[:, : 4 * HEAD_SIZE], qkv[:, 4 * HEAD_SIZE : 6 * HEAD_SIZE]


def _heads(x: torch.Tensor) -> torch.Tensor:
    return x.view(x.shape[0], -1, HEAD_SIZE)


@pytest.mark.parametrize(
    ("dtype", "is_neox", "positions_dtype"),
    [
        (torch.float32, True, torch.int64),
        (torch.float16, False, torch.int64),
        (torch.bfloat16, True, torch.int32),
    ],
    ids=["fp32-neox-int64", "fp16-gptj-int64", "bf16-neox-int32"],
)
def test_apply_rope_two_dimensional_in_place(
    dtype: torch.dtype, is_neox: bool, positions_dtype: torch.dtype
) -> None:
    qkv, query, key = _qkv(7, dtype)
    v_before = qkv[:, 6 * HEAD_SIZE :].clone()
    positions = torch.randint(0, MAX_POSITION, (7,), dtype=positions_dtype)
    cache = rope_cache(MAX_POSITION, HEAD_SIZE)
    want_q = _rope(positions, _heads(query), cache, is_neox)
    want_k = _rope(positions, _heads(key), cache, is_neox)
    result = sgl_kernel.apply_rope_with_cos_sin_cache_inplace(
        positions, query, key, HEAD_SIZE, cache, is_neox
    )
    assert result is None
    assert_close(_heads(query), want_q)
    assert_close(_heads(key), want_k)
    assert torch.equal(qkv[:, 6 * HEAD_SIZE :], v_before)


def test_apply_rope_three_dimensional_partial_rotary() -> None:
    # A cache of width 64 < head_size: elements 64.. of each head stay as they are.
    query = torch.randn(7, 4, HEAD_SIZE).to(torch.bfloat16)
    key = torch.randn(7, 2, HEAD_SIZE).to(torch.bfloat16)
    positions = torch.randint(0, MAX_POSITION, (7,))
    cache = rope_cache(MAX_POSITION, 64)
    want_q, want_k = _rope(positions, query, cache, True), _rope(positions, key, cache, True)
    tails = query[..., 64:].clone(), key[..., 64:].clone()
    sgl_kernel.apply_rope_with_cos_sin_cache_inplace(positions, query, key, HEAD_SIZE, cache)
    assert_close(query, want_q)
    assert_close(key, want_k)
    assert torch.equal(query[..., 64:], tails[0]) and torch.equal(key[..., 64:], tails[1])


def test_apply_rope_stores_key_and_value() -> None:
    slots = 16
    qkv, query, key = _qkv(7, torch.bfloat16)
    value = qkv[:, 6 * HEAD_SIZE :]
    positions = torch.randint(0, MAX_POSITION, (7,))
    cache = rope_cache(MAX_POSITION, 64)  # partial: the key's unrotated tail is stored too
    cache_loc = torch.randperm(slots)[:7]
    cache_loc[3] = -1  # a padding token: stored nowhere, still rotated
    k_buffer = torch.zeros(slots, 2 * HEAD_SIZE, dtype=torch.bfloat16)
    v_buffer = torch.zeros(slots, 2 * HEAD_SIZE, dtype=torch.bfloat16)
    want_k = _rope(positions, _heads(key), cache, True)
    arg = sgl_kernel.FusedSetKVBufferArg(value, k_buffer, v_buffer, None, None, cache_loc)
    sgl_kernel.apply_rope_with_cos_sin_cache_inplace(
        positions, query, key, HEAD_SIZE, cache, True, fused_set_kv_buffer_arg=arg
    )
    assert_close(_heads(key), want_k)
    stored = cache_loc >= 0
    assert torch.equal(k_buffer[cache_loc[stored]], key[stored])
    assert torch.equal(v_buffer[cache_loc[stored]], value[stored])
    untouched = torch.ones(slots, dtype=torch.bool)
    untouched[cache_loc[stored]] = False
    assert not k_buffer[untouched].any() and not v_buffer[untouched].any()


def test_apply_rope_refuses_what_sgl_kernel_refuses() -> None:
    _, query, key = _qkv(3, torch.bfloat16)
    positions = torch.zeros(3, dtype=torch.int64)
    with pytest.raises(ValueError, match="float32"):
        sgl_kernel.apply_rope_with_cos_sin_cache_inplace(
            positions, query, key, HEAD_SIZE, rope_cache(MAX_POSITION, HEAD_SIZE).to(torch.bfloat16)
        )
    value = torch.zeros_like(key)
    arg = sgl_kernel.FusedSetKVBufferArg(value, value, value, 1.0, None, positions)
    with pytest.raises(ValueError, match="k_scale"):
        sgl_kernel.apply_rope_with_cos_sin_cache_inplace(
            positions, query, key, HEAD_SIZE, rope_cache(MAX_POSITION, HEAD_SIZE), True, arg
        )


@pytest.mark.parametrize("cache_dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["2d", "3d"])
def test_rotary_embedding_returns_the_same_tensors(layout: str, cache_dtype: torch.dtype) -> None:
    _, query, key = _qkv(7, torch.bfloat16)
    if layout == "3d":
        query, key = _heads(query), _heads(key)
    positions = torch.randint(0, MAX_POSITION, (7,))
    cache = rope_cache(MAX_POSITION, HEAD_SIZE).to(cache_dtype)
    want_q = _rope(positions, _heads(query), cache, True)
    want_k = _rope(positions, _heads(key), cache, True)
    got_q, got_k = sgl_kernel.rotary_embedding(positions, query, key, HEAD_SIZE, cache, True)
    assert got_q is query and got_k is key
    assert_close(_heads(query), want_q)
    assert_close(_heads(key), want_k)


@pytest.mark.parametrize(
    ("dtype", "rotary_dim", "cache_dtype", "is_neox", "positions_dtype"),
    [
        (torch.bfloat16, 64, torch.bfloat16, False, torch.int64),
        (torch.float16, HEAD_SIZE, torch.float32, True, torch.int32),
    ],
    ids=["bf16-rot64-bf16cache-gptj-int64", "fp16-rot128-fp32cache-neox-int32"],
)
def test_fused_qk_rope_rotates_head_slices_in_place(
    dtype: torch.dtype,
    rotary_dim: int,
    cache_dtype: torch.dtype,
    is_neox: bool,
    positions_dtype: torch.dtype,
) -> None:
    # As SGLang's forward_xpu passes them: heads of a packed qkv cut to [..., :rotary_dim].
    qkv, query, key = _qkv(7, dtype)
    before = qkv.clone()
    positions = torch.randint(0, MAX_POSITION, (7,), dtype=positions_dtype)
    cache = rope_cache(MAX_POSITION, rotary_dim).to(cache_dtype)
    want_q = _rope(positions, _heads(query), cache, is_neox)
    want_k = _rope(positions, _heads(key), cache, is_neox)
    q_rope, k_rope = _heads(query)[..., :rotary_dim], _heads(key)[..., :rotary_dim]
    result = sgl_kernel.fused_qk_rope_with_cos_sin_cache_inplace(
        q_rope, k_rope, cache, positions, rotary_dim, is_neox
    )
    assert result is None
    assert_close(_heads(query), want_q)  # the elements past rotary_dim kept (want's)
    assert_close(_heads(key), want_k)
    assert torch.equal(qkv[:, 6 * HEAD_SIZE :], before[:, 6 * HEAD_SIZE :])


def test_fused_qk_rope_refuses_what_it_cannot_take() -> None:
    _, query, key = _qkv(3, torch.bfloat16)
    positions = torch.zeros(3, dtype=torch.int64)
    cache = rope_cache(MAX_POSITION, HEAD_SIZE)
    fused = sgl_kernel.fused_qk_rope_with_cos_sin_cache_inplace
    with pytest.raises(ValueError, match=r"^sgl_kernel\.fused_qk_rope\w*\(\): q has shape"):
        fused(query, _heads(key), cache, positions, HEAD_SIZE, True)
    with pytest.raises(ValueError, match=r"\(\): rope_dim is 64 but cos_sin_cache has 128"):
        fused(_heads(query), _heads(key), cache, positions, 64, True)
