"""sycl_kernels.compat.vllm against float64 references written from vLLM's kernel definitions
(csrc/layernorm_kernels.cu, activation_kernels.cu, pos_encoding_kernels.cu), and its call
contract (everything in place, None returned).

Sizes are manifest ones (kernels/variants.toml) and shared with test_sgl_kernel.py, so
the two files compile few variants.
"""

from __future__ import annotations

import math

import pytest
import torch
from sycl_kernels.compat import vllm

from tests.references import assert_close, rope_cache

HIDDEN = 2048  # norms
DIM = 2048  # gated activations: input [..., 2 * DIM]
HEAD_SIZE = 128
MAX_POSITION = 4096
EPS = 1e-6
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


# References. vLLM rounds to the dtype where its kernels store a scalar_t: the
# fused sum, x * rsqrt(...) before the weight, act(gate) before the product.


def _rms_norm(x: torch.Tensor, weight: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
    x64 = x.double()
    normed = (x64 * torch.rsqrt(x64.square().mean(-1, keepdim=True) + EPS)).to(dtype).double()
    return normed if weight is None else normed * weight.double()


def _act(name: str, a: torch.Tensor) -> torch.Tensor:
    if name == "gelu_and_mul":
        return 0.5 * a * torch.special.erfc(-a / math.sqrt(2))
    if name == "gelu_tanh_and_mul":
        return a * torch.sigmoid(2 * math.sqrt(2 / math.pi) * (a + 0.044715 * a**3))
    return a * torch.sigmoid(a)


def _act_and_mul(name: str, x: torch.Tensor) -> torch.Tensor:
    first, second = x.double().chunk(2, dim=-1)
    if name == "mul_and_silu":
        return first * _act(name, second).to(x.dtype).double()
    return _act(name, first).to(x.dtype).double() * second


def _rope(
    positions: torch.Tensor,
    x: torch.Tensor,
    cache: torch.Tensor,
    is_neox: bool,
    offset: int = 0,
    inverse: bool = False,
) -> torch.Tensor:
    """x [*tokens, heads, head_size]: elements offset .. offset + rotary_dim of each head
    rotated by the cache rows of positions [*tokens]."""
    rot = cache.shape[1]
    cos, sin = cache.double()[positions.long()].unsqueeze(-2).chunk(2, dim=-1)
    sin = -sin if inverse else sin
    x64 = x.double().clone()
    part = x64[..., offset : offset + rot]
    if is_neox:
        a, b = part[..., : rot // 2], part[..., rot // 2 :]
    else:
        a, b = part[..., 0::2], part[..., 1::2]
    a_new, b_new = a * cos - b * sin, b * cos + a * sin
    a.copy_(a_new)
    b.copy_(b_new)
    return x64


# Norms


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_norm_writes_out(dtype: torch.dtype) -> None:
    x = torch.randn(2, 3, HIDDEN).to(dtype)
    weight = (1 + 0.5 * torch.randn(HIDDEN)).to(dtype)
    out = torch.empty_like(x)
    assert vllm.rms_norm(out, x, weight, EPS) is None
    assert_close(out, _rms_norm(x, weight, dtype))


@pytest.mark.parametrize("weight_kind", ["none", "float32"])
def test_rms_norm_weight_none_or_float32_on_bfloat16(weight_kind: str) -> None:
    x = torch.randn(5, HIDDEN).to(torch.bfloat16)
    weight = None if weight_kind == "none" else 1 + 0.5 * torch.randn(HIDDEN)
    out = torch.empty_like(x)
    vllm.rms_norm(out, x, weight, EPS)
    assert_close(out, _rms_norm(x, weight, torch.bfloat16))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_fused_add_rms_norm_in_place(dtype: torch.dtype) -> None:
    # input as rows of a wider tensor: vLLM passes strided input, contiguous residual.
    wide = torch.randn(5, HIDDEN + 64).to(dtype)
    x = wide[:, :HIDDEN]
    residual = torch.randn(5, HIDDEN).to(dtype)
    weight = (1 + 0.5 * torch.randn(HIDDEN)).to(dtype)
    total = (x.double() + residual.double()).to(dtype)
    assert vllm.fused_add_rms_norm(x, residual, weight, EPS) is None
    assert torch.equal(residual, total)
    assert_close(x, _rms_norm(total, weight, dtype))
    assert x.data_ptr() == wide.data_ptr()


def test_fused_add_rms_norm_normalizes_the_rounded_sum() -> None:
    # bf16: the sum rounded to bf16 and the exact sum give different outputs on many
    # elements; vLLM normalizes the rounded (stored) one. A unit weight keeps vLLM's
    # rounding before the weight out of the comparison.
    x = torch.randn(8, HIDDEN).to(torch.bfloat16)
    residual = torch.randn(8, HIDDEN).to(torch.bfloat16)
    weight = torch.ones(HIDDEN, dtype=torch.bfloat16)
    total = x.double() + residual.double()
    rounded_sum = _rms_norm(total.to(torch.bfloat16), None, torch.bfloat16).to(torch.bfloat16)
    float_sum = _rms_norm(total, None, torch.bfloat16).to(torch.bfloat16)
    assert (float_sum != rounded_sum).float().mean() > 0.05, "the two readings must differ"
    vllm.fused_add_rms_norm(x, residual, weight, EPS)
    assert (x != rounded_sum).float().mean() < 1e-3
    assert (x != float_sum).float().mean() > 0.05


# Gated activations


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("silu_and_mul", torch.float32),
        ("silu_and_mul", torch.float16),
        ("silu_and_mul", torch.bfloat16),
        ("mul_and_silu", torch.bfloat16),
        ("gelu_and_mul", torch.bfloat16),
        ("gelu_tanh_and_mul", torch.bfloat16),
    ],
    ids=lambda v: str(v).removeprefix("torch."),
)
def test_act_and_mul_writes_out(name: str, dtype: torch.dtype) -> None:
    x = (2 * torch.randn(3, 4, 2 * DIM)).to(dtype)
    out = torch.empty(3, 4, DIM, dtype=dtype)
    assert getattr(vllm, name)(out, x) is None
    assert_close(out, _act_and_mul(name, x))


# Elementwise gelus (csrc/activation.cpp's gelu_new, gelu_fast and gelu_quick kernels,
# their formulas in float64), and fatrelu and swigluoai.

GELU_HIDDEN = 4096  # a manifest width of the elementwise gelus
# fatrelu and swigluoai have no manifest rows: tests/ops/test_activation.py's size, whose
# kernels these share.
PARAM_DIM = 999


def _gelu(name: str, x: torch.Tensor) -> torch.Tensor:
    a = x.double()
    if name == "gelu_new":
        return 0.5 * a * (1 + torch.tanh(0.7978845608 * (a + 0.044715 * a**3)))
    if name == "gelu_fast":
        return 0.5 * a * (1 + torch.tanh(0.7978845608 * a * (1 + 0.044715 * a * a)))
    return a * torch.sigmoid(1.702 * a)


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("gelu_new", torch.bfloat16),
        ("gelu_fast", torch.bfloat16),
        ("gelu_quick", torch.bfloat16),
        ("gelu_new", torch.float16),
    ],
    ids=lambda v: str(v).removeprefix("torch."),
)
def test_gelus_write_out(name: str, dtype: torch.dtype) -> None:
    x = (2 * torch.randn(3, 4, GELU_HIDDEN)).to(dtype)
    out = torch.empty_like(x)
    assert getattr(vllm, name)(out, x) is None
    assert_close(out, _gelu(name, x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_fatrelu_and_mul_matches_bit_for_bit(dtype: torch.dtype) -> None:
    # vLLM's kernel: (gate > threshold ? gate : 0) * up, one rounding: exact here too.
    x = (2 * torch.randn(5, 2 * PARAM_DIM)).to(dtype)
    x_before = x.clone()
    gate, up = x.double().chunk(2, dim=-1)
    out = torch.empty(5, PARAM_DIM, dtype=dtype)
    assert vllm.fatrelu_and_mul(out, x, 0.25) is None
    assert torch.equal(out, (torch.where(gate > 0.25, gate, 0) * up).to(dtype))
    assert torch.equal(x, x_before), "input is read only (vLLM's schema says Tensor! input)"


@pytest.mark.parametrize("params", [(), (1.0, 3.0)], ids=["defaults", "alpha-limit"])
def test_swigluoai_and_mul_interleaved(params: tuple) -> None:
    alpha, limit = params or (1.702, 7.0)
    x = (4 * torch.randn(2, 3, 2 * PARAM_DIM)).to(torch.bfloat16)
    gate = x[..., 0::2].double().clamp(max=limit)
    up = x[..., 1::2].double().clamp(-limit, limit)
    out = torch.empty(2, 3, PARAM_DIM, dtype=torch.bfloat16)
    assert vllm.swigluoai_and_mul(out, x, *params) is None
    assert_close(out, (up + 1) * gate * torch.sigmoid(alpha * gate))


# Rotary embedding


def _query_key(
    token_shape: tuple[int, ...], dtype: torch.dtype, split: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """qkv [*tokens, 8 heads * HEAD_SIZE] and its query (4 heads) and key (2 heads) slices,
    flat ([*tokens, heads * HEAD_SIZE]) or split ([*tokens, heads, HEAD_SIZE])."""
    qkv = torch.randn(*token_shape, 8 * HEAD_SIZE).to(dtype)
    query, key = qkv[..., : 4 * HEAD_SIZE], qkv[..., 4 * HEAD_SIZE : 6 * HEAD_SIZE]
    if split:
        query, key = query.unflatten(-1, (4, HEAD_SIZE)), key.unflatten(-1, (2, HEAD_SIZE))
    return qkv, query, key


def _heads(x: torch.Tensor, token_dims: int) -> torch.Tensor:
    return x if x.dim() == token_dims + 2 else x.unflatten(-1, (-1, HEAD_SIZE))


@pytest.mark.parametrize("with_key", [True, False], ids=["key", "key-none"])
@pytest.mark.parametrize(
    ("token_shape", "split"),
    [((7,), False), ((7,), True), ((2, 5), False), ((2, 5), True)],
    ids=["tokens-flat", "tokens-split", "batch-seq-flat", "batch-seq-split"],
)
def test_rotary_embedding_layouts_in_place(
    token_shape: tuple[int, ...], split: bool, with_key: bool
) -> None:
    qkv, query, key = _query_key(token_shape, torch.bfloat16, split)
    key_before, v_before = key.clone(), qkv[..., 6 * HEAD_SIZE :].clone()
    positions = torch.randint(0, MAX_POSITION, token_shape)
    cache = rope_cache(MAX_POSITION, HEAD_SIZE)
    dims = len(token_shape)
    want_q = _rope(positions, _heads(query, dims), cache, True)
    want_k = _rope(positions, _heads(key, dims), cache, True)
    result = vllm.rotary_embedding(
        positions, query, key if with_key else None, HEAD_SIZE, cache, True
    )
    assert result is None
    assert_close(_heads(query, dims), want_q)
    if with_key:
        assert_close(_heads(key, dims), want_k)
    else:
        assert torch.equal(key, key_before)
    assert torch.equal(qkv[..., 6 * HEAD_SIZE :], v_before)


@pytest.mark.parametrize(
    ("dtype", "is_neox"),
    [(torch.float32, True), (torch.float16, False)],
    ids=["fp32-neox", "fp16-gptj"],
)
def test_rotary_embedding_dtypes_and_styles(dtype: torch.dtype, is_neox: bool) -> None:
    _, query, key = _query_key((7,), dtype, split=False)
    positions = torch.randint(0, MAX_POSITION, (7,))
    cache = rope_cache(MAX_POSITION, HEAD_SIZE)
    want_q = _rope(positions, _heads(query, 1), cache, is_neox)
    want_k = _rope(positions, _heads(key, 1), cache, is_neox)
    vllm.rotary_embedding(positions, query, key, HEAD_SIZE, cache, is_neox)
    assert_close(_heads(query, 1), want_q)
    assert_close(_heads(key, 1), want_k)


@pytest.mark.parametrize(
    ("positions_dtype", "cache_dtype"),
    [(torch.int32, torch.float32), (torch.int64, torch.bfloat16)],
    ids=["int32-fp32-cache", "int64-bf16-cache"],
)
def test_rotary_embedding_positions_and_cache_dtypes(
    positions_dtype: torch.dtype, cache_dtype: torch.dtype
) -> None:
    _, query, key = _query_key((7,), torch.bfloat16, split=True)
    positions = torch.randint(0, MAX_POSITION, (7,), dtype=positions_dtype)
    cache = rope_cache(MAX_POSITION, HEAD_SIZE).to(cache_dtype)
    want_q, want_k = _rope(positions, query, cache, True), _rope(positions, key, cache, True)
    vllm.rotary_embedding(positions, query, key, HEAD_SIZE, cache, True)
    assert_close(query, want_q)
    assert_close(key, want_k)


@pytest.mark.parametrize("offset", [0, 32], ids=["rope_dim_offset-0", "rope_dim_offset-32"])
def test_rotary_embedding_partial_leaves_the_rest(offset: int) -> None:
    # rotary_dim = the cache's width (64 < head_size): only offset .. offset + 64 turns.
    _, query, key = _query_key((7,), torch.bfloat16, split=False)
    positions = torch.randint(0, MAX_POSITION, (7,))
    cache = rope_cache(MAX_POSITION, 64)
    q_heads, k_heads = _heads(query, 1), _heads(key, 1)
    want_q = _rope(positions, q_heads, cache, True, offset)
    want_k = _rope(positions, k_heads, cache, True, offset)
    rest = torch.ones(HEAD_SIZE, dtype=torch.bool)
    rest[offset : offset + 64] = False
    q_rest, k_rest = q_heads[..., rest].clone(), k_heads[..., rest].clone()
    vllm.rotary_embedding(positions, query, key, HEAD_SIZE, cache, True, offset)
    assert_close(q_heads, want_q)
    assert_close(k_heads, want_k)
    assert torch.equal(q_heads[..., rest], q_rest) and torch.equal(k_heads[..., rest], k_rest)


def test_rotary_embedding_inverse_undoes_the_rotation() -> None:
    _, query, key = _query_key((7,), torch.float32, split=True)
    original_q, original_k = query.clone(), key.clone()
    positions = torch.randint(0, MAX_POSITION, (7,))
    cache = rope_cache(MAX_POSITION, HEAD_SIZE)
    vllm.rotary_embedding(positions, query, key, HEAD_SIZE, cache, True)
    want_q = _rope(positions, query, cache, True, inverse=True)
    vllm.rotary_embedding(positions, query, key, HEAD_SIZE, cache, True, inverse=True)
    assert_close(query, want_q)
    assert_close(query, original_q.double())
    assert_close(key, original_k.double())


def test_rotary_embedding_refuses_a_mismatched_head_size() -> None:
    query = torch.randn(3, 4, 64)
    with pytest.raises(ValueError, match="query"):
        vllm.rotary_embedding(
            torch.zeros(3, dtype=torch.int64),
            query,
            None,
            HEAD_SIZE,
            rope_cache(MAX_POSITION, 64),
            True,
        )


# Fused QK-norm and rotation: vLLM's csrc/fused_qknorm_rope_kernel.cu keeps the
# normalized value in float through the rotation.


@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
def test_fused_qk_norm_rope_in_place(is_neox: bool) -> None:
    tokens, heads = 7, (4, 2, 2)
    qkv = torch.randn(tokens, sum(heads) * HEAD_SIZE).to(torch.bfloat16)
    q, k, v = qkv.split([n * HEAD_SIZE for n in heads], -1)
    q, k, v = (t.unflatten(-1, (-1, HEAD_SIZE)) for t in (q, k, v))
    q_weight, k_weight = torch.randn(HEAD_SIZE).bfloat16(), torch.randn(HEAD_SIZE).bfloat16()
    positions = torch.randint(0, MAX_POSITION, (tokens,))
    cache = rope_cache(MAX_POSITION, HEAD_SIZE)

    def normed(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x64 = x.double()
        return x64 * torch.rsqrt(x64.square().mean(-1, keepdim=True) + EPS) * w.double()

    want_q = _rope(positions, normed(q, q_weight), cache, is_neox)
    want_k = _rope(positions, normed(k, k_weight), cache, is_neox)
    v_before = v.clone()
    result = vllm.fused_qk_norm_rope(
        qkv, *heads, HEAD_SIZE, EPS, q_weight, k_weight, cache, is_neox, positions
    )
    assert result is None
    assert_close(q, want_q)
    assert_close(k, want_k)
    assert torch.equal(v, v_before)
    with pytest.raises(ValueError, match=r"qkv has shape \(7, 1024\); expected \[tokens, 1152\]"):
        vllm.fused_qk_norm_rope(
            qkv, 4, 2, 3, HEAD_SIZE, EPS, q_weight, k_weight, cache, is_neox, positions
        )
