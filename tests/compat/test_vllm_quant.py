"""sycl_kernels.compat.vllm's quantizing ops against torch references written from
vllm-xpu-kernels' kernels at 4543b580 (csrc/quantization/fp8/fp8_quant.cpp,
csrc/layernorm_quant.cpp, csrc/quantization/fused_kernels/fused_silu_mul_block_quant.cpp),
on small samples of vLLM's own test grids (tests/test_fp8_quant.py,
test_fused_norm_quant.py, test_fused_quant_activation.py,
test_fused_silu_mul_block_quant.py).

Where the values are x itself the references are float32 as the kernels' and the
results bit-exact; where a norm or silu makes them, the references compute it in float64
and the quantized values may be one step apart (the norm's sum of squares is summed in
another order, vLLM's silu_and_mul_per_block_quant divides where this multiplies by the
reciprocal).
"""

from __future__ import annotations

import pytest
import torch
from sycl_kernels.compat import vllm

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
MIN_SCALE = 1.0 / (FP8_MAX * 512)  # vLLM's min_scaling_factor (exact in float32)
FLT_EPSILON = 2.0**-23
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
EPS = 1e-6
H = 256


# References, from the kernels' formulas.


def _cast(v: torch.Tensor, qdtype: torch.dtype) -> torch.Tensor:
    """float32 values clamped and cast: fp8 to nearest even (c10), int8 rint (half even)."""
    if qdtype == torch.int8:
        return torch.round(v).clamp(-128, 127).to(torch.int8)
    return v.clamp(-FP8_MAX, FP8_MAX).to(FP8)


def _quant(v: torch.Tensor, scale: torch.Tensor, qdtype: torch.dtype = FP8) -> torch.Tensor:
    """vLLM's ConvertWithScaleOp<true>: v * (1.0f / scale) in float32."""
    return _cast(v.float() * (1.0 / scale.float()), qdtype)


def _ue8m0(s: torch.Tensor) -> torch.Tensor:
    """exp2(ceil(log2(fmax(fabs(s), 1e-10f))))."""
    return torch.exp2(torch.ceil(torch.log2(s.abs().clamp(min=1e-10))))


def _group_absmax(v: torch.Tensor, group: int) -> torch.Tensor:
    return v.unflatten(-1, (-1, group)).abs().amax(-1)


def _expand(s: torch.Tensor, group: int) -> torch.Tensor:
    return s.repeat_interleave(group, dim=-1)


def _rms(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor | None = None):
    """vLLM's norm value: float32 x (the dtype-rounded x + residual) * rsqrt(mean(x^2) +
    eps) * float(w), here in float64; and the rounded sum."""
    if residual is not None:
        x = (x.float() + residual.float()).to(x.dtype)
    x64 = x.double()
    normed = x64 * torch.rsqrt(x64.square().mean(-1, keepdim=True) + EPS) * weight.double()
    return normed, x


def _steps(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """How many representable values apart got and want are (fp8 or int8)."""
    if got.dtype == torch.int8:
        return (got.int() - want.int()).abs()

    def ordinal(t: torch.Tensor) -> torch.Tensor:
        bits = t.view(torch.uint8).int()
        return torch.where(bits >= 128, -(bits & 0x7F), bits)

    return (ordinal(got) - ordinal(want)).abs()


def _assert_near(got: torch.Tensor, want: torch.Tensor, fraction: float = 0.01) -> None:
    """At most one step apart, on at most `fraction` of the elements."""
    steps = _steps(got, want)
    assert steps.max() <= 1, f"{int(steps.max())} steps apart"
    assert steps.bool().float().mean() <= fraction


def _bits_equal(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8))


# static_scaled_fp8_quant


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "group_shape",
    ["0-d", (-1, -1), (-1, 1), (1, -1), (1, 128), (4, 256), (1, 64)],
    ids=str,
)
def test_static_scaled_fp8_quant(dtype: torch.dtype, group_shape) -> None:
    tokens = 8
    x = torch.randn(tokens, H).to(dtype)
    out = torch.empty(tokens, H, dtype=FP8)
    if group_shape == "0-d":
        scale, shape_arg, full = torch.tensor(0.02), None, torch.full((tokens, H), 0.02)
    else:
        gm = tokens if group_shape[0] == -1 else group_shape[0]
        gn = H if group_shape[1] == -1 else group_shape[1]
        grid = 0.005 + 0.03 * torch.rand(tokens // gm, H // gn)
        full = grid.repeat_interleave(gm, 0).repeat_interleave(gn, 1)
        if group_shape in ((-1, 1), (1, -1)):
            scale, shape_arg = grid.flatten(), group_shape  # vLLM's 1-D form
        else:
            scale, shape_arg = grid, (group_shape if gm == 4 else None)
    assert vllm.static_scaled_fp8_quant(out, x, scale, shape_arg) is None
    _bits_equal(out, _quant(x, full))


def test_static_scaled_fp8_quant_strided_and_3d() -> None:
    # vLLM honours the input's row stride; a 3-D input is tokens of its leading dims.
    wide = torch.randn(8, H + 64).to(torch.bfloat16)
    x = wide[:, :H]
    scale = 0.005 + 0.03 * torch.rand(2, 4)
    out = torch.empty(8, H, dtype=FP8)
    vllm.static_scaled_fp8_quant(out, x, scale)
    full = scale.repeat_interleave(4, 0).repeat_interleave(H // 4, 1)
    _bits_equal(out, _quant(x, full))
    out3 = torch.empty(2, 4, H, dtype=FP8)
    vllm.static_scaled_fp8_quant(out3, x.reshape(2, 4, H), scale, (4, 64))
    _bits_equal(out3.view(8, H), out)


def test_static_scaled_fp8_quant_refuses_what_vllm_refuses() -> None:
    x = torch.randn(8, H)
    out = torch.empty(8, H, dtype=FP8)
    with pytest.raises(ValueError, match="group_shape"):
        vllm.static_scaled_fp8_quant(out, x, torch.rand(H))  # 1-D needs group_shape
    with pytest.raises(ValueError, match="does not match"):
        vllm.static_scaled_fp8_quant(out, x, torch.rand(2, 4), (1, 64))
    with pytest.raises(ValueError, match="scale counts"):
        vllm.static_scaled_fp8_quant(out, x, torch.rand(8 * 2), (1, 128))
    with pytest.raises(TypeError, match="float8_e5m2"):
        vllm.static_scaled_fp8_quant(torch.empty(8, H, dtype=torch.int8), x, torch.tensor(1.0))


# dynamic_scaled_fp8_quant (per tensor)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("tokens, hidden", [(7, H), (1, 67)])
def test_dynamic_scaled_fp8_quant(dtype: torch.dtype, tokens: int, hidden: int) -> None:
    if hidden == 67 and dtype != torch.bfloat16:
        pytest.skip("one dtype for the odd width")
    x = torch.rand(tokens, hidden).to(dtype)  # vLLM's test: non-negative
    x[0, 0] = -2.0
    out = torch.empty(tokens, hidden, dtype=FP8)
    scale = torch.full((1,), -1.0)
    assert vllm.dynamic_scaled_fp8_quant(out, x, scale) is None
    want = x.float().abs().max() / FP8_MAX
    assert torch.equal(scale, want.reshape(1))
    _bits_equal(out, _quant(x, want))


def test_dynamic_scaled_fp8_quant_all_zero() -> None:
    # vLLM: scale 0, then 0 * inf (undefined in its fast-math build); here 0 and q 0.
    x = torch.zeros(3, H, dtype=torch.bfloat16)
    out = torch.full((3, H), 1.0).to(FP8)
    scale = torch.ones(1)
    vllm.dynamic_scaled_fp8_quant(out, x, scale)
    assert scale.item() == 0.0 and not out.float().any()


# dynamic_per_token_scaled_fp8_quant


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("use_ub", [False, True])
def test_dynamic_per_token_scaled_fp8_quant(dtype: torch.dtype, use_ub: bool) -> None:
    tokens = 7
    x = (torch.rand(tokens, H) + 1e-6).to(dtype)
    x[3] *= 1e-7  # a row at the floor 1 / (448 * 512)
    scale_ub = x.float().mean().reshape(()) if use_ub else None
    out = torch.empty(tokens, H, dtype=FP8)
    scale = torch.empty(tokens, 1)  # vLLM's test helper: [T, 1]
    assert vllm.dynamic_per_token_scaled_fp8_quant(out, x, scale, scale_ub) is None
    amax = x.float().abs().amax(-1, keepdim=True)
    if use_ub:
        amax = amax.clamp(max=scale_ub)
    want = (amax / FP8_MAX).clamp(min=MIN_SCALE)
    assert torch.equal(scale, want)
    _bits_equal(out, _quant(x, want))
    flat = torch.empty(tokens)  # [T] works as well
    vllm.dynamic_per_token_scaled_fp8_quant(out, x, flat, scale_ub)
    assert torch.equal(flat, want.flatten())


# per_token_group_fp8_quant


def _group_ref(x: torch.Tensor, group: int, eps: float, ue8m0: bool):
    amax = _group_absmax(x.float(), group).clamp(min=eps)
    scale = torch.maximum(amax / FP8_MAX, torch.tensor(MIN_SCALE))
    if ue8m0:
        scale = _ue8m0(scale)
    return scale, _quant(x, _expand(scale, group))


@pytest.mark.parametrize(
    "dtype, tokens, group, layout, ue8m0",
    [
        (torch.bfloat16, 1, 32, "row", False),
        (torch.bfloat16, 3, 64, "column", False),
        (torch.bfloat16, 31, 128, "tma", False),
        (torch.float16, 8, 128, "row", False),
        (torch.float32, 4, 128, "column", False),
        (torch.bfloat16, 8, 32, "row", True),  # test_per_block_mxfp8_quant
        (torch.float32, 2, 32, "tma", True),
    ],
)
def test_per_token_group_fp8_quant(
    dtype: torch.dtype, tokens: int, group: int, layout: str, ue8m0: bool
) -> None:
    x = (torch.rand(tokens, H) + 1e-6).to(dtype)
    x[0, :group] = 0  # an all-zero group: the floor 1 / (448 * 512)
    groups = H // group
    out_q = torch.empty(tokens, H, dtype=FP8)
    if layout == "row":
        out_s = torch.empty(tokens, groups)
    elif layout == "column":
        out_s = torch.empty(groups, tokens).t()
    else:  # TMA-aligned: stride(1) rounded up to 4 tokens, the padding never written
        aligned = -(-tokens // 4) * 4
        out_s = torch.full((groups, aligned), -1.0).t()[:tokens]
    # fp8_min/fp8_max and the dummies are ignored (vLLM reads the range from output_q).
    assert (
        vllm.per_token_group_fp8_quant(x, out_q, out_s, group, 1e-10, -1.0, 1.0, ue8m0, 0, 0)
        is None
    )
    scale, q = _group_ref(x, group, 1e-10, ue8m0)
    assert torch.equal(out_s, scale)
    _bits_equal(out_q, q)
    if layout == "tma":
        padding = out_s.as_strided((out_s.stride(1) - tokens, groups), (1, out_s.stride(1)), tokens)
        assert (padding == -1.0).all()


def test_per_token_group_fp8_quant_eps_takes_part() -> None:
    # eps above 1 / 512 raises the floor: max(max(absmax, eps) / 448, 1 / (448 * 512)).
    x = torch.randn(4, H).to(torch.bfloat16)
    x[1] *= 1e-3
    out_q, out_s = torch.empty(4, H, dtype=FP8), torch.empty(4, 2)
    vllm.per_token_group_fp8_quant(x, out_q, out_s, 128, 0.25, -448.0, 448.0, False, 0, 0)
    scale, q = _group_ref(x, 128, 0.25, False)
    assert torch.equal(out_s, scale)
    _bits_equal(out_q, q)


# rms_norm_static_fp8_quant, fused_add_rms_norm_static_fp8_quant


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("strided", [False, True])
def test_rms_norm_static_fp8_quant(dtype: torch.dtype, strided: bool) -> None:
    tokens = 7
    wide = (torch.randn(tokens, 2 * H) / H).to(dtype)
    x = wide[:, :H] if strided else wide[:, :H].contiguous()
    weight = torch.normal(1.0, 0.1, (H,)).to(dtype)
    scale = torch.tensor([0.005])
    out = torch.empty(tokens, H, dtype=FP8)
    assert vllm.rms_norm_static_fp8_quant(out, x, weight, scale, EPS) is None
    normed, _ = _rms(x, weight)
    _assert_near(out, _quant(normed.float(), scale))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fused_add_rms_norm_static_fp8_quant(dtype: torch.dtype) -> None:
    tokens = 7
    wide = torch.randn(tokens, 2 * H).to(dtype)
    x = wide[:, :H]  # strided input, as vLLM's test
    residual = torch.randn(tokens, H).to(dtype)
    weight = torch.normal(1.0, 0.1, (H,)).to(dtype)
    scale = torch.tensor(0.01)
    before = x.clone()
    normed, total = _rms(x, weight, residual)
    out = torch.empty(tokens, H, dtype=FP8)
    vllm.fused_add_rms_norm_static_fp8_quant(out, x, residual, weight, scale, EPS)
    assert torch.equal(residual, total)  # input + residual rounded to the dtype
    assert torch.equal(x, before)
    _assert_near(out, _quant(normed.float(), scale))


# rms_norm_dynamic_per_token_quant


def _per_token_norm_ref(normed: torch.Tensor, qdtype: torch.dtype, ub=None):
    amax = normed.abs().amax(-1, keepdim=True).float()
    if qdtype == torch.int8:
        return torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    if ub is not None:
        amax = amax.clamp(max=ub)
    return (amax / FP8_MAX).clamp(min=MIN_SCALE)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("qdtype", [FP8, torch.int8], ids=str)
@pytest.mark.parametrize("add_residual", [False, True])
def test_rms_norm_dynamic_per_token_quant(
    dtype: torch.dtype, qdtype: torch.dtype, add_residual: bool
) -> None:
    tokens = 7
    x = (torch.randn(tokens, H) / H).to(dtype)
    x[2] = 0  # int8: vLLM's scale 1.0 for an all-zero row
    residual = torch.randn(tokens, H).to(dtype) / H if add_residual else None
    if residual is not None:
        residual[2] = 0
    weight = torch.normal(1.0, 0.1, (H,)).to(dtype)
    normed, total = _rms(x, weight, residual)
    out = torch.empty(tokens, H, dtype=qdtype)
    scales = torch.empty(tokens)  # vLLM's test: [T]
    res = None if residual is None else residual.clone()
    assert vllm.rms_norm_dynamic_per_token_quant(out, x, weight, scales, EPS, None, res) is None
    want = _per_token_norm_ref(normed, qdtype)
    torch.testing.assert_close(scales, want.flatten(), rtol=1e-5, atol=0)
    if qdtype == torch.int8:
        assert scales[2] == 1.0
    _assert_near(out, _quant(normed.float(), scales[:, None], qdtype))
    if res is not None:
        assert torch.equal(res, total)


def test_rms_norm_dynamic_per_token_quant_scale_ub() -> None:
    x = torch.randn(5, H).to(torch.bfloat16)
    weight = torch.ones(H, dtype=torch.bfloat16)
    normed, _ = _rms(x, weight)
    ub = torch.tensor([1.5])
    out, scales = torch.empty(5, H, dtype=FP8), torch.empty(5, 1)
    vllm.rms_norm_dynamic_per_token_quant(out, x, weight, scales, EPS, ub)
    want = _per_token_norm_ref(normed, FP8, ub)
    torch.testing.assert_close(scales, want, rtol=1e-5, atol=0)
    assert (scales == 1.5 / FP8_MAX).all()  # every row's absmax is above the bound
    _assert_near(out, _quant(normed.float(), scales))
    with pytest.raises(ValueError, match="scale_ub"):
        vllm.rms_norm_dynamic_per_token_quant(
            torch.empty(5, H, dtype=torch.int8), x, weight, scales, EPS, ub
        )


# rms_norm_per_block_quant


def _block_norm_ref(normed: torch.Tensor, group: int, qdtype: torch.dtype, ue8m0: bool):
    amax = _group_absmax(normed, group).float()
    if qdtype == torch.int8:
        return torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    scale = (amax / FP8_MAX).clamp(min=MIN_SCALE)
    return _ue8m0(scale) if ue8m0 else scale


@pytest.mark.parametrize(
    "dtype, qdtype, group, add_residual, transposed, ue8m0, strided",
    [
        (torch.bfloat16, FP8, 128, False, True, False, False),
        (torch.float16, torch.int8, 64, True, False, False, False),
        (torch.bfloat16, torch.int8, 128, False, True, False, True),
        (torch.float16, FP8, 64, True, True, False, True),  # rows padded: DeepSeek's split
        (torch.bfloat16, FP8, 64, False, False, True, False),  # mxfp8-style ue8m0
        (torch.float32, torch.int8, 128, True, False, False, True),
    ],
)
def test_rms_norm_per_block_quant(
    dtype: torch.dtype,
    qdtype: torch.dtype,
    group: int,
    add_residual: bool,
    transposed: bool,
    ue8m0: bool,
    strided: bool,
) -> None:
    tokens, groups = 7, H // group
    wide = (torch.randn(tokens, H + 64) / H).to(dtype)
    x = wide[:, :H] if strided else wide[:, :H].contiguous()
    x[1, :group] = 0  # an all-zero group (int8: vLLM's scale 1.0)
    residual = torch.randn(tokens, H).to(dtype) / H if add_residual else None
    if residual is not None:
        residual[1, :group] = 0
    weight = torch.normal(1.0, 0.1, (H,)).to(dtype)
    normed, total = _rms(x, weight, residual)
    out = torch.empty(tokens, H, dtype=qdtype)
    storage = torch.full((tokens * groups + 3,), -1.0)
    # vLLM ignores the scale tensor's strides: transposed is element (t, g) at t + g * T.
    scale = storage[: tokens * groups].view(tokens, groups)
    res = None if residual is None else residual.clone()
    vllm.rms_norm_per_block_quant(out, x, weight, scale, EPS, None, res, group, transposed, ue8m0)
    want = _block_norm_ref(normed, group, qdtype, ue8m0)
    flat = storage[: tokens * groups]
    got = flat.view(groups, tokens).t() if transposed else flat.view(tokens, groups)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
    assert (storage[tokens * groups :] == -1.0).all()
    if qdtype == torch.int8:
        assert got[1, 0] == 1.0
    _assert_near(out, _quant(normed.float(), _expand(got, group), qdtype))
    if res is not None:
        assert torch.equal(res, total)


# silu_and_mul_quant


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("tokens", [1, 7])
def test_silu_and_mul_quant(dtype: torch.dtype, tokens: int) -> None:
    d = 128
    x = torch.randn(tokens, 2 * d).to(dtype)
    scale = torch.tensor([0.5])
    out = torch.empty(tokens, d, dtype=FP8)
    assert vllm.silu_and_mul_quant(out, x, scale) is None
    gate, up = x.float().chunk(2, dim=-1)
    # (T)(x / (1 + exp(-x))), then the product in T, then * (1 / scale) in float32.
    silu = (gate / (1.0 + torch.exp(-gate))).to(dtype)
    product = (silu.float() * up).to(dtype)
    _assert_near(out, _quant(product, scale), fraction=0.02)


# silu_and_mul_per_block_quant


def _silu_block_ref(x, group, qdtype, ub=None, ue8m0=False):
    gate, up = x.double().chunk(2, dim=-1)
    v = (gate / (1.0 + torch.exp(-gate)) * up).float()  # float32, not rounded to the dtype
    amax = _group_absmax(v, group)
    if qdtype == torch.int8:
        return v, torch.clamp(amax / 127.0, min=FLT_EPSILON)
    scale = (amax / FP8_MAX).clamp(min=MIN_SCALE)
    if ub is not None:
        scale = scale.clamp(max=ub).clamp(min=MIN_SCALE)
    return v, _ue8m0(scale) if ue8m0 else scale


def _divide(v: torch.Tensor, scale: torch.Tensor, qdtype: torch.dtype) -> torch.Tensor:
    """ScaledQuant<out_t, false>: v / scale."""
    return _cast(v / scale, qdtype)


@pytest.mark.parametrize(
    "dtype, qdtype, tokens, hidden, group, transposed",
    [
        (torch.bfloat16, FP8, 16, H, 64, False),
        (torch.float16, FP8, 1, H, 128, True),
        (torch.bfloat16, torch.int8, 16, H, 128, True),
        (torch.float16, torch.int8, 1, 64, 64, False),
    ],
)
def test_silu_and_mul_per_block_quant(
    dtype: torch.dtype, qdtype: torch.dtype, tokens: int, hidden: int, group: int, transposed: bool
) -> None:
    x = (torch.randn(tokens, 2 * hidden) / hidden).to(dtype)
    x[0, :group] = 0  # an all-zero group: int8 floor FLT_EPSILON
    groups = hidden // group
    out = torch.empty(tokens, hidden, dtype=qdtype)
    scales = torch.empty(groups, tokens).t() if transposed else torch.empty(tokens, groups)
    assert vllm.silu_and_mul_per_block_quant(out, x, scales, group, None, transposed) is None
    v, want = _silu_block_ref(x, group, qdtype)
    torch.testing.assert_close(scales, want, rtol=1e-5, atol=0)
    _assert_near(out, _divide(v, _expand(scales, group), qdtype))


def test_silu_and_mul_per_block_quant_scale_ub_and_ue8m0() -> None:
    tokens, group = 4, 64
    x = torch.randn(tokens, 2 * H).to(torch.bfloat16)
    out, scales = torch.empty(tokens, H, dtype=FP8), torch.empty(tokens, H // group)
    ub = torch.tensor([0.002])
    vllm.silu_and_mul_per_block_quant(out, x, scales, group, ub)
    v, want = _silu_block_ref(x, group, FP8, ub=ub)
    # scale_ub clamps the scale; here applied as a bound ub * 448 on the absmax (the
    # bound's float32 product may move the scale by one unit in the last place).
    torch.testing.assert_close(scales, want, rtol=2**-23, atol=0)
    assert (scales <= ub * (1 + 2**-23)).all()
    _assert_near(out, _divide(v, _expand(scales, group), FP8))
    vllm.silu_and_mul_per_block_quant(out, x, scales, group, None, False, True)
    v, want = _silu_block_ref(x, group, FP8, ue8m0=True)
    assert torch.equal(scales, want)
    _assert_near(out, _divide(v, _expand(scales, group), FP8))
    with pytest.raises(ValueError, match="scale_ub"):
        vllm.silu_and_mul_per_block_quant(
            torch.empty(tokens, H, dtype=torch.int8), x, scales, group, ub
        )
