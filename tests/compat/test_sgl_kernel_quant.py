"""sycl_kernels.compat.sgl_kernel's quantizing ops against torch references written from
sgl-kernel-xpu's kernels at 9cf16bf9 (src/sycl/per_token_group_quant_8bit{,_v2}.cpp,
per_tensor_quant_fp8.cpp, per_token_quant_fp8.cpp; python/sgl_kernel/gemm.py), on
small samples of its own test grids (tests/test_per_token_group_quant_8bit{,_v2}.py,
test_per_tensor_quant_fp8.py, test_per_token_quant_fp8.py): int8 truncated toward
zero, UE8M0 bytes, the packed and interleaved scale layouts.

The references compute in float32 as the kernels do and the results are bit-exact,
except with fuse_silu_and_mul (silu's float32 value may differ in its last place).
"""

from __future__ import annotations

import pytest
import torch
from sycl_kernels.compat import sgl_kernel

FP8 = torch.float8_e4m3fn
RANGE = {FP8: (-448.0, 448.0), torch.int8: (-128.0, 127.0)}
EPS = 1e-10
H = 256


# References, from the kernels' formulas.


def _group_ref(v: torch.Tensor, group: int, qdtype: torch.dtype, eps: float, ue8m0: bool):
    """(float32 scales, UE8M0 bytes or None, q): y = max(eps, absmax) / max_8bit; ue8m0:
    exp = ceil(log2(fmax(y, 1e-10f))), y = exp2(exp), byte = exp + 127; q = fmin(fmax(v
    * (1 / y), min), max), cast: fp8 to nearest even, int8 static_cast (truncation)."""
    low, high = RANGE[qdtype]
    v = v.float()
    amax = v.unflatten(-1, (-1, group)).abs().amax(-1)
    y = torch.clamp(amax, min=torch.tensor(eps, dtype=torch.float32)) / high
    byte = None
    if ue8m0:
        exp = torch.ceil(torch.log2(y.clamp(min=1e-10)))
        y = torch.exp2(exp)
        byte = (exp.int() + 127).to(torch.uint8)
    q = (v * (1.0 / y).repeat_interleave(group, -1)).clamp(low, high)
    q = q.trunc().to(torch.int8) if qdtype == torch.int8 else q.to(FP8)
    return y, byte, q


def _silu_mul(x: torch.Tensor) -> torch.Tensor:
    """v2's fused value: (T)silu(float(gate)) * up, the product in T."""
    gate, up = x.chunk(2, dim=-1)
    silu = gate.float() * torch.sigmoid(gate.float())
    return (silu.to(x.dtype).float() * up.float()).to(x.dtype)


def _bits_equal(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


def _unpack(words: torch.Tensor, groups: int) -> torch.Tensor:
    """Packed UE8M0 bytes [..., tokens, words] (int32, 4 a word) -> [..., tokens, groups]."""
    b = [(words >> (8 * i)) & 0xFF for i in range(4)]
    return torch.stack(b, -1).flatten(-2)[..., :groups].to(torch.uint8)


def _deinterleave(s: torch.Tensor) -> torch.Tensor:
    """v2's column-major scales [..., T, G]: (t, g) at (f // G, f % G), f = t + g * T."""
    tokens, groups = s.shape[-2:]
    return s.reshape(*s.shape[:-2], groups, tokens).transpose(-1, -2)


def _scale_tensor(tokens: int, groups: int, layout: str) -> torch.Tensor:
    """output_s as sglang's create_per_token_group_quant_fp8_output_scale allocates it."""
    aligned = -(-tokens // 4) * 4
    if layout == "row":
        return torch.full((tokens, groups), -1.0)
    if layout == "row_ue8m0":
        return torch.zeros(tokens, groups, dtype=torch.uint8)
    if layout == "column":
        return torch.full((groups, tokens), -1.0).permute(-1, -2)
    if layout == "tma":
        return torch.full((groups, aligned), -1.0).transpose(-1, -2)[:tokens]
    # tma_ue8m0: int32 words of 4 bytes, [tokens, ceil(G / 4)], stride(1) = ceil4(T);
    # filled with a sentinel to see which bytes are written.
    words = -(-groups // 4)
    return torch.full((words, aligned), 0x5A5A5A5A, dtype=torch.int32).transpose(-1, -2)[:tokens]


def _call(fn, x, q, s, group, qdtype, ue8m0=False, **kw):
    low, high = RANGE[qdtype]
    return fn(x, q, s, group, EPS, low, high, ue8m0, **kw)


# sgl_per_token_group_quant_8bit (v1)


V1_CASES = [
    # tokens, hidden, group, dst, src, layout
    (8, H, 128, FP8, torch.bfloat16, "row"),
    (8, H, 128, FP8, torch.float32, "column"),
    (5, H, 64, FP8, torch.float16, "tma"),
    (8, H, 64, torch.int8, torch.float16, "row"),
    (5, H, 32, torch.int8, torch.float32, "row"),
    (3, H, 128, torch.int8, torch.bfloat16, "column"),
    (5, H, 32, FP8, torch.bfloat16, "row_ue8m0"),  # test_plain_row_major_ue8m0
    (5, H, 128, FP8, torch.bfloat16, "tma_ue8m0"),  # 2 groups: half a word
    (6, 2 * H, 32, FP8, torch.float32, "tma_ue8m0"),  # 16 groups: 4 words
]


@pytest.mark.parametrize("tokens, hidden, group, qdtype, dtype, layout", V1_CASES)
def test_per_token_group_quant_8bit_v1(
    tokens: int, hidden: int, group: int, qdtype: torch.dtype, dtype: torch.dtype, layout: str
) -> None:
    x = torch.randn(tokens, hidden).to(dtype)
    x[1, :group] = 0  # an all-zero group: the scale's eps floor
    x[2, group : 2 * group] *= 1e-3
    groups = hidden // group
    ue8m0 = layout.endswith("ue8m0")
    q = torch.empty(tokens, hidden, dtype=qdtype)
    s = _scale_tensor(tokens, groups, layout)
    fn = sgl_kernel.sgl_per_token_group_quant_8bit
    assert _call(fn, x, q, s, group, qdtype, ue8m0, enable_v2=False) is None
    scale, byte, want_q = _group_ref(x, group, qdtype, EPS, ue8m0)
    _bits_equal(q, want_q)
    if layout == "row_ue8m0":
        assert torch.equal(s, byte)
    elif layout == "tma_ue8m0":
        assert torch.equal(_unpack(s, groups), byte)
        # v1 leaves the unused bytes of a row's last word alone
        assert (_unpack(s, -(-groups // 4) * 4)[:, groups:] == 0x5A).all()
    else:
        assert torch.equal(s, scale)
    if layout.startswith("tma"):  # the padding rows past tokens are not written
        padding = s.as_strided((s.stride(1) - tokens, s.shape[1]), (1, s.stride(1)), tokens)
        assert (padding == (-1.0 if layout == "tma" else 0x5A5A5A5A)).all()


def test_per_token_group_quant_8bit_int8_truncates() -> None:
    # static_cast<int8_t>: 126.9 -> 126 and -3.99 -> -3, where rounding gives 127 and -4.
    x = torch.zeros(1, 32)
    x[0, 0], x[0, 1], x[0, 2] = 127.0, 126.9, -3.99
    q, s = torch.empty(1, 32, dtype=torch.int8), torch.empty(1, 1)
    sgl_kernel.sgl_per_token_group_quant_int8(x, q, s, 32, EPS, -128.0, 127.0)
    assert s.item() == 1.0
    assert q[0, :3].tolist() == [127, 126, -3]


def test_per_token_group_quant_8bit_aliases_and_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sgl_kernel.sgl_per_token_group_quant_fp8 is sgl_kernel.sgl_per_token_group_quant_8bit
    assert sgl_kernel.sgl_per_token_group_quant_int8 is sgl_kernel.sgl_per_token_group_quant_8bit
    x = torch.randn(4, H).to(torch.bfloat16)
    q, s = torch.empty(4, H, dtype=FP8), torch.empty(4, 2)
    fn = sgl_kernel.sgl_per_token_group_quant_8bit
    with pytest.raises(ValueError, match="fp8_min"):
        fn(x, q, s, 128, EPS, -127.0, 127.0, enable_v2=False)
    with pytest.raises(ValueError, match="fp8_min"):
        fn(x, torch.empty(4, H, dtype=torch.int8), s, 128, EPS, -448.0, 448.0, enable_v2=False)
    with pytest.raises(AssertionError, match="only v2 support fuse_silu_and_mul"):
        fn(x, q, s, 128, EPS, -448.0, 448.0, fuse_silu_and_mul=True, enable_v2=False)
    with pytest.raises(AssertionError, match="only v2 support masked_m"):
        fn(
            x,
            q,
            s,
            128,
            EPS,
            -448.0,
            448.0,
            masked_m=torch.ones(1, dtype=torch.int32),
            enable_v2=False,
        )
    # enable_v2=None reads SGLANG_PER_TOKEN_GROUP_QUANT_8BIT_V2 as sglang's
    # get_bool_env_var: "true"/"1" in any case; v2 refuses an eps other than 1e-10.
    for value, v2 in [("TRUE", True), ("1", True), ("yes", False), ("0", False), (None, False)]:
        if value is None:
            monkeypatch.delenv("SGLANG_PER_TOKEN_GROUP_QUANT_8BIT_V2", raising=False)
        else:
            monkeypatch.setenv("SGLANG_PER_TOKEN_GROUP_QUANT_8BIT_V2", value)
        if v2:
            with pytest.raises(ValueError, match="1e-10"):
                fn(x, q, s, 128, 1e-6, -448.0, 448.0)
        else:
            fn(x, q, s, 128, 1e-6, -448.0, 448.0)


# sgl_per_token_group_quant_8bit_v2


V2_CASES = [
    # tokens, group, dst, layout (test_per_token_group_quant_8bit_v2's flag sets)
    (4, 16, FP8, "row"),
    (4, 32, torch.int8, "row"),
    (5, 64, FP8, "column"),
    (5, 128, FP8, "tma"),
    (5, 128, FP8, "tma_ue8m0"),
    (4, 32, FP8, "row_ue8m0"),  # test_plain_row_major_ue8m0_v2
    (1, 16, torch.int8, "row"),
]


@pytest.mark.parametrize("tokens, group, qdtype, layout", V2_CASES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_per_token_group_quant_8bit_v2(
    tokens: int, group: int, qdtype: torch.dtype, layout: str, dtype: torch.dtype
) -> None:
    if dtype == torch.float16 and layout not in ("row", "tma_ue8m0"):
        pytest.skip("float16 on two layouts")
    x = torch.randn(tokens, H)
    x[torch.rand(tokens, H) < 0.01] *= 10  # v2's test: 1 % outliers
    x = x.to(dtype)
    x[0, :group] = 0
    groups = H // group
    ue8m0 = layout.endswith("ue8m0")
    q = torch.empty(tokens, H, dtype=qdtype)
    s = _scale_tensor(tokens, groups, layout)
    fn = sgl_kernel.sgl_per_token_group_quant_8bit_v2
    assert _call(fn, x, q, s, group, qdtype, ue8m0, fuse_silu_and_mul=False, masked_m=None) is None
    scale, byte, want_q = _group_ref(x, group, qdtype, EPS, ue8m0)
    _bits_equal(q, want_q)
    if layout == "row_ue8m0":
        assert torch.equal(s, byte)
    elif layout == "tma_ue8m0":
        unpacked = _unpack(s, -(-groups // 4) * 4)
        assert torch.equal(_deinterleave(unpacked[:, :groups]), byte)
        assert not unpacked[:, groups:].any()  # v2 zeroes the rest of each row's last word
    elif layout == "row":
        assert torch.equal(s, scale)
    else:
        assert torch.equal(_deinterleave(s.contiguous()), scale)
    # Through the wrapper: the same.
    q2, s2 = torch.empty_like(q), _scale_tensor(tokens, groups, layout)
    low, high = RANGE[qdtype]
    sgl_kernel.sgl_per_token_group_quant_8bit(
        x, q2, s2, group, EPS, low, high, ue8m0, enable_v2=True
    )
    assert torch.equal(q2.view(torch.uint8), q.view(torch.uint8)) and torch.equal(s2, s)


def test_per_token_group_quant_8bit_v2_interleave_is_not_column_major() -> None:
    # T=2, G=3: scale (t=1, g=0) at element offset 2 (v1's column-major: offset 1).
    x = (
        torch.ones(2, 3 * 16, dtype=torch.bfloat16)
        * torch.tensor([1.0, 2.0]).to(torch.bfloat16)[:, None]
    )
    x[:, 16:] *= 4
    x[:, 32:] *= 4
    q = torch.empty(2, 48, dtype=FP8)
    s = torch.empty(3, 2).t()
    sgl_kernel.sgl_per_token_group_quant_8bit_v2(
        x, q, s, 16, EPS, -448.0, 448.0, False, False, None
    )
    absmax = torch.tensor([[1.0, 4.0, 16.0], [2.0, 8.0, 32.0]])  # (t, g)
    # f = t + g * T in the [T, G] tensor's row-major order: t0g0 t1g0 t0g1 / t1g1 t0g2 t1g2.
    assert torch.equal(s, absmax.t().reshape(2, 3) / 448)
    assert s.t().reshape(-1)[2] == absmax[1, 0] / 448  # memory offset 2 (v1: offset 1)


@pytest.mark.parametrize("masked", [False, True])
def test_per_token_group_quant_8bit_v2_fuse_silu_and_mul(masked: bool) -> None:
    # test_per_token_group_quant_8bit_v2's second grid: col + tma + ue8m0 + fuse, group 128;
    # masked: DeepEP's [experts, padded tokens, 2 * hidden] with masked_m.
    experts, tokens, group, groups = 2, 5, 128, H // 128
    lead = (experts, tokens) if masked else (tokens,)
    x = torch.randn(*lead, 2 * H).to(torch.bfloat16)
    q = torch.empty(*lead, H, dtype=FP8)
    if masked:
        aligned = 8
        s = torch.full((experts, 1, aligned), 0x5A5A5A5A, dtype=torch.int32).transpose(-1, -2)
        s = s[:, :tokens]
        masked_m = torch.tensor([3, 5], dtype=torch.int32)
    else:
        s, masked_m = _scale_tensor(tokens, groups, "tma_ue8m0"), None
    fn = sgl_kernel.sgl_per_token_group_quant_8bit
    fn(x, q, s, group, EPS, -448.0, 448.0, True, True, masked_m, enable_v2=True)
    _, byte, want_q = _group_ref(_silu_mul(x), group, FP8, EPS, True)
    steps = (q.view(torch.uint8).int() - want_q.view(torch.uint8).int()).abs()
    assert steps.max() <= 1 and steps.bool().float().mean() < 0.01
    unpacked = _unpack(s, 4)
    assert torch.equal(_deinterleave(unpacked[..., :groups]), byte)
    assert not unpacked[..., groups:].any()


def test_per_token_group_quant_8bit_v2_checks() -> None:
    x = torch.randn(4, H).to(torch.bfloat16)
    q, s = torch.empty(4, H, dtype=FP8), torch.empty(4, 2)
    fn = sgl_kernel.sgl_per_token_group_quant_8bit_v2
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        fn(x.float(), q, s, 128, EPS, -448.0, 448.0, False, False, None)
    with pytest.raises(ValueError, match="group_size"):
        fn(x, q, torch.empty(4, 1), 256, EPS, -448.0, 448.0, False, False, None)
    with pytest.raises(ValueError, match="fp8_min"):
        fn(x, torch.empty(4, H, dtype=torch.int8), s, 128, EPS, -127.0, 127.0, False, False, None)
    with pytest.raises(ValueError, match="3-D"):
        fn(x, q, s, 128, EPS, -448.0, 448.0, False, False, torch.ones(1, dtype=torch.int32))
    fn(x, q, s, 128, 1e-10 + 5e-14, -448.0, 448.0, False, False, None)  # within 1e-13


# sgl_per_tensor_quant_fp8, sgl_per_token_quant_fp8


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("is_static", [False, True])
def test_per_tensor_quant_fp8(dtype: torch.dtype, is_static: bool) -> None:
    x = torch.rand(8, H).to(dtype)
    x[3, 5] = -3.0
    q = torch.empty(8, H, dtype=FP8)
    s = torch.rand(1) if is_static else torch.zeros(1)  # sgl's callers pass zeros
    given = s.clone()
    assert sgl_kernel.sgl_per_tensor_quant_fp8(x, q, s, is_static) is None
    scale = given if is_static else (x.float().abs().max() / 448.0).reshape(1)
    assert torch.equal(s, scale)
    # sgl multiplies by 1 / (scale + 1e-8); its test's reference, as this, by 1 / scale.
    _bits_equal(q, (x.float() * (1.0 / scale)).clamp(-448, 448).to(FP8))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_per_token_quant_fp8(dtype: torch.dtype) -> None:
    tokens = 7
    x = torch.rand(tokens, H).to(dtype)
    x[2] = 0  # scale 0 and q 0, as sgl's scale_inv = 0
    x[4] *= -1e3
    q = torch.empty(tokens, H, dtype=FP8)
    s = torch.full((tokens,), -1.0)
    assert sgl_kernel.sgl_per_token_quant_fp8(x, q, s) is None
    scale = x.float().abs().amax(-1) / 448.0
    assert torch.equal(s, scale)
    inv = torch.where(scale == 0, 0.0, 1.0 / scale)
    _bits_equal(q, (x.float() * inv[:, None]).clamp(-448, 448).to(FP8))
    s2 = torch.empty(tokens, 1)
    sgl_kernel.sgl_per_token_quant_fp8(x, q, s2)
    assert torch.equal(s2.flatten(), scale)
