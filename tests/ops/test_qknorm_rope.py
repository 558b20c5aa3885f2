"""qknorm_rope against the float64 qknorm reference followed by the rope reference: both
styles, Gemma's norm, partial rotary, weight and cache kinds, layouts, the KV store, and
its one rounding against the two of qknorm then apply_rope."""

from __future__ import annotations

import pytest
import sycl_kernels
import torch
from sycl_kernels import _dtypes as dtype_table

from tests import references
from tests.ops import cases

DTYPES = [d.torch_dtype for d in dtype_table.DTYPES]
MAX_POSITION = 4096
EPS = 1e-6


def _want(
    positions: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor | None,
    cache: torch.Tensor,
    is_neox: bool,
    gemma: bool = False,
) -> torch.Tensor:
    """The composition of the references, x [..., heads, head_dim] with positions x.shape[:-2]."""
    flat = x.reshape(-1, *x.shape[-2:])
    normed = references.rmsnorm(flat, weight, EPS, gemma)
    return references.rope(positions.reshape(-1), normed, cache, is_neox).view(x.shape)


def _qkv(tokens: int, num_q: int, num_kv: int, head_dim: int, dtype: torch.dtype):
    """q, k, v as views into one fused qkv tensor, as attention layers produce them."""
    qkv = torch.randn(tokens, (num_q + 2 * num_kv) * head_dim).to(dtype)
    q, k, v = qkv.split((num_q * head_dim, num_kv * head_dim, num_kv * head_dim), -1)
    heads = (tokens, -1, head_dim)
    return qkv, q.view(heads), k.view(heads), v.view(heads)


def _weights(head_dim: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(head_dim).to(dtype), torch.randn(head_dim).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    ("head_dim", "rotary_dim", "is_neox", "gemma"),
    [(64, 64, True, False), (128, 128, True, True), (128, 32, False, True), (80, 32, True, False)],
    ids=["d64-neox", "d128-neox-gemma", "d128-r32-gptj-gemma", "d80-r32-neox"],
)
def test_qknorm_rope_matches_the_composition(
    head_dim: int, rotary_dim: int, is_neox: bool, gemma: bool, dtype: torch.dtype
) -> None:
    tokens = 13
    _, q, k, v = _qkv(tokens, 4, 2, head_dim, dtype)
    q_weight, k_weight = _weights(head_dim, dtype)
    positions = torch.randint(0, MAX_POSITION, (tokens,))
    cache = references.rope_cache(MAX_POSITION, rotary_dim)
    want_q = _want(positions, q, q_weight, cache, is_neox, gemma)
    want_k = _want(positions, k, k_weight, cache, is_neox, gemma)
    v_before = v.clone()
    sycl_kernels.qknorm_rope(positions, q, k, q_weight, k_weight, cache, is_neox, gemma=gemma)
    references.assert_close(q, want_q)
    references.assert_close(k, want_k)
    assert torch.equal(v, v_before), "v must stay"


@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
@pytest.mark.parametrize(
    "kind", ["float32_weights", "no_weights", "misaligned_weights", "cache_in_dtype"]
)
def test_qknorm_rope_weight_and_cache_kinds(kind: str, is_neox: bool) -> None:
    """GPT-J reads its weights a pair at a time where they are pair-aligned (a weight one
    element into its storage is not)."""
    dtype, head_dim = torch.bfloat16, 64
    _, q, k, _ = _qkv(9, 4, 2, head_dim, dtype)
    q_weight, k_weight = _weights(head_dim, torch.float32 if kind == "float32_weights" else dtype)
    if kind == "no_weights":
        q_weight = k_weight = None
    if kind == "misaligned_weights":
        q_weight, k_weight = (torch.cat([w[:1], w])[1:] for w in (q_weight, k_weight))
    positions = torch.randint(0, MAX_POSITION, (9,))
    cache = references.rope_cache(MAX_POSITION, head_dim)
    if kind == "cache_in_dtype":
        cache = cache.to(dtype)
    want_q = _want(positions, q, q_weight, cache, is_neox)
    want_k = _want(positions, k, k_weight, cache, is_neox)
    sycl_kernels.qknorm_rope(positions, q, k, q_weight, k_weight, cache, is_neox)
    references.assert_close(q, want_q)
    references.assert_close(k, want_k)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_qknorm_rope_stores_kv(dtype: torch.dtype) -> None:
    tokens, num_kv, head_dim, slots = 11, 2, 128, 32
    _, q, k, v = _qkv(tokens, 4, num_kv, head_dim, dtype)
    q_weight, k_weight = _weights(head_dim, dtype)
    positions = torch.randint(0, MAX_POSITION, (tokens,))
    out_loc = torch.randperm(slots)[:tokens]
    out_loc[3] = -1  # a padding token: nothing stored
    cache = references.rope_cache(MAX_POSITION, 64)  # partial: the rest is stored normalized
    k_cache = torch.zeros(slots, num_kv, head_dim, dtype=dtype)
    v_cache = torch.zeros(slots, num_kv, head_dim, dtype=dtype)
    want_q = _want(positions, q, q_weight, cache, True)
    want_k = _want(positions, k, k_weight, cache, True)
    v_before = v.clone()
    kv = {"v": v, "k_cache": k_cache, "v_cache": v_cache, "out_loc": out_loc}
    sycl_kernels.qknorm_rope(positions, q, k, q_weight, k_weight, cache, True, **kv)
    references.assert_close(q, want_q)
    references.assert_close(k, want_k)
    stored = out_loc >= 0
    assert torch.equal(k_cache[out_loc[stored]], k[stored]), "the cache holds exactly the new k"
    assert torch.equal(v_cache[out_loc[stored]], v_before[stored])
    untouched = torch.ones(slots, dtype=torch.bool)
    untouched[out_loc[stored]] = False
    assert torch.all(k_cache[untouched] == 0) and torch.all(v_cache[untouched] == 0)


@pytest.mark.parametrize("layout", ["HND", "flat", "padded"])
def test_qknorm_rope_on_strided_layouts(layout: str) -> None:
    head_dim = 64
    q_weight, k_weight = _weights(head_dim, torch.float32)
    cache = references.rope_cache(64, head_dim)
    call = {}
    if layout == "HND":
        # Hugging Face's transposed [batch, heads, seq, head_dim] views, one position row.
        batch, seq = 2, 5
        q = torch.randn(batch, seq, 8, head_dim).transpose(1, 2)
        k = torch.randn(batch, seq, 2, head_dim).transpose(1, 2)
        positions = torch.tensor([[3, 9, 10, 11, 40]], dtype=torch.int32)
        full = positions.expand(batch, seq)
        want_q = _want(full, q.transpose(1, 2), q_weight, cache, True).transpose(1, 2)
        want_k = _want(full, k.transpose(1, 2), k_weight, cache, True).transpose(1, 2)
        call = {"layout": "HND"}
        rest = torch.zeros(0)
    else:
        # vLLM's [tokens, heads * head_size] rows of the fused qkv (row stride > width),
        # or heads padded to 80 elements (head stride > head_dim).
        tokens, width = 7, 80 if layout == "padded" else head_dim
        storage = torch.randn(tokens, 6, width)
        q, k = storage[:, :4, :head_dim], storage[:, 4:, :head_dim]
        rest = storage[..., head_dim:].clone()
        positions = torch.randint(0, 64, (tokens,))
        want_q = _want(positions, q, q_weight, cache, True)
        want_k = _want(positions, k, k_weight, cache, True)
        if layout == "flat":
            q, k = q.flatten(1), k.flatten(1)
            call = {"head_size": head_dim}
    sycl_kernels.qknorm_rope(positions, q, k, q_weight, k_weight, cache, True, **call)
    references.assert_close(q.view(want_q.shape), want_q)
    references.assert_close(k.view(want_k.shape), want_k)
    if layout == "padded":
        assert torch.equal(storage[..., head_dim:], rest), "the padding must stay"


def _ulp(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of `dtype` at |x| (normal numbers): eps in [1, 2), scaled by the binade."""
    _, exponent = torch.frexp(x.abs())  # |x| in [2^(exponent - 1), 2^exponent)
    return torch.finfo(dtype).eps * torch.ldexp(torch.ones_like(x), exponent - 1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_qknorm_rope_rounds_once(dtype: torch.dtype) -> None:
    # The composition rounds the normalized values before rotating them: the two
    # differ by at most 2 ulps of the larger normalized value of a pair (docs/ops.md),
    # and the fused result is the closer to the exact one.
    tokens, head_dim = 64, 64
    _, q, k, _ = _qkv(tokens, 4, 2, head_dim, dtype)
    q_weight, k_weight = _weights(head_dim, dtype)
    positions = torch.randint(0, MAX_POSITION, (tokens,))
    cache = references.rope_cache(MAX_POSITION, head_dim)
    want_q = _want(positions, q, q_weight, cache, True)
    normed = references.rmsnorm(q, q_weight, EPS)
    half = head_dim // 2
    larger = torch.maximum(normed[..., :half].abs(), normed[..., half:].abs()).repeat(1, 1, 2)
    composed_q, composed_k = q.clone(), k.clone()
    sycl_kernels.qknorm(composed_q, composed_k, q_weight, k_weight, EPS)
    sycl_kernels.apply_rope(positions, composed_q, composed_k, cache, True)
    sycl_kernels.qknorm_rope(positions, q, k, q_weight, k_weight, cache, True, EPS)
    difference = (q.double() - composed_q.double()).abs()
    # The ulps of the rounded values, which the composition rotates.
    assert torch.all(difference <= 2 * _ulp(larger.to(dtype).double(), dtype)), difference.max()
    fused_error = (q.double() - want_q).abs().mean()
    composed_error = (composed_q.double() - want_q).abs().mean()
    assert fused_error < composed_error, (fused_error, composed_error)


# The inputs of the suite-wide tests: the bad-input matrix and opcheck (tests/ops/cases.py).


def _qknorm_rope_args() -> dict[str, object]:
    return {
        **{k: v for k, v in cases.rope_args().items() if k != "rotary_dim"},
        "q_weight": torch.randn(64),
        "k_weight": torch.randn(64),
        "eps": 1e-6,
    }


def _opcheck_samples() -> list[tuple[str, tuple]]:
    w = torch.randn(64)
    qkv = torch.randn(3, 6 * 64)
    q, k = qkv[:, : 4 * 64].view(3, 4, 64), qkv[:, 4 * 64 : 5 * 64].view(3, 1, 64)
    positions, cache = torch.tensor([0, 5, 9]), references.rope_cache(16, 64)
    kv = (torch.randn(3, 1, 64), torch.zeros(4, 1, 64), torch.zeros(4, 1, 64))
    hnd_qk = (torch.randn(4, 3, 64), torch.randn(1, 3, 64))  # [heads, tokens, head_dim]
    return [
        ("qknorm_rope", (positions, q, k, torch.randn(64), torch.randn(64), cache, True)),
        ("qknorm_rope", (positions, *hnd_qk, None, None, cache, False, 1e-5, True, None, "HND")),
        (
            "qknorm_rope",
            (
                positions,
                q,
                k,
                w,
                w,
                cache,
                True,
                1e-6,
                False,
                64,
                "NHD",
                *kv,
                torch.tensor([2, -1, 3]),
            ),
        ),
    ]


def _once_qknorm_rope(op, dtype: torch.dtype) -> None:
    # The run-once case (tests/ops/test_every_op_once.py): head size 96, not bundled.
    q, k = torch.randn(5, 4, 96).to(dtype), torch.randn(5, 2, 96).to(dtype)
    q_weight, k_weight = ((1 + 0.5 * torch.randn(96)).to(dtype) for _ in range(2))
    positions = torch.randint(0, MAX_POSITION, (5,))
    cache = references.rope_cache(MAX_POSITION, 96)
    want_q = references.rope(positions, references.rmsnorm(q, q_weight, EPS), cache, True)
    want_k = references.rope(positions, references.rmsnorm(k, k_weight, EPS), cache, True)
    op(positions, q, k, q_weight, k_weight, cache, True, EPS)
    references.assert_close(q, want_q)
    references.assert_close(k, want_k)


cases.register(
    cases.OpCase(
        "qknorm_rope",
        _qknorm_rope_args,
        {
            "positions": cases.ROPE_TENSORS["positions"],
            "q": cases.ROPE_TENSORS["q"],
            "k": cases.ROPE_TENSORS["k"],
            "q_weight": cases.NORM_WEIGHT,
            "k_weight": cases.NORM_WEIGHT,
            **{
                name: cases.ROPE_TENSORS[name]
                for name in ("cos_sin_cache", "v", "k_cache", "v_cache")
            },
            "out_loc": cases.ROPE_TENSORS["out_loc"],
        },
        {
            "eps": cases.NON_NEGATIVE,
            "gemma": cases.BOOL,
            "is_neox": cases.BOOL,
            "head_size": [(32, ValueError), (0, ValueError), (64.0, TypeError)],
            "layout": [("BSHD", ValueError), (3, TypeError)],
        },
    ),
    opcheck=_opcheck_samples,
    once={"qknorm_rope": cases.OnceCase(_once_qknorm_rope)},
)
