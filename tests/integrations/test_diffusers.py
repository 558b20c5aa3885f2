"""integrations.diffusers: patched tiny UNet and Flux models against unpatched ones, each
served module alone, what stays unpatched, and unpatch() restoring bit-identical outputs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
import torch
from diffusers import FluxTransformer2DModel, UNet2DConditionModel
from diffusers.models.activations import GEGLU, SwiGLU
from diffusers.models.embeddings import Timesteps
from diffusers.models.normalization import RMSNorm
from sycl_kernels.integrations import diffusers as integration
from sycl_kernels.integrations.diffusers import patch, unpatch

# Kernel sizes are shared across tests, since each new one is a JIT compile of a second
# or two: GEGLU and SwiGLU d=256, norms over 16 elements, timestep embeddings of 32 and
# 256 (the UNet's and Flux's).
_BF16_EPS = torch.finfo(torch.bfloat16).eps


def _assert_close(out: torch.Tensor, ref: torch.Tensor, rtol: float = 1e-5) -> None:
    assert out.dtype == ref.dtype
    atol = rtol * ref.abs().max().item()
    torch.testing.assert_close(out, ref, rtol=rtol, atol=atol)


@pytest.fixture
def kernel_calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the ops the patched forwards call; a fallback to diffusers' code calls none."""
    calls: Counter[str] = Counter()

    def counted(name: str, op: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        def call(*args: object, **kwargs: object) -> torch.Tensor:
            calls[name] += 1
            return op(*args, **kwargs)

        return call

    for name in ("gelu_and_mul", "rmsnorm", "silu_and_mul", "timestep_embedding"):
        monkeypatch.setattr(integration, name, counted(name, getattr(integration, name)))
    return calls


def _tiny_unet() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    # Cross-attention only at 64 channels (down, mid, up), so every GEGLU has d = 256.
    model = UNet2DConditionModel(
        sample_size=16,
        in_channels=4,
        out_channels=4,
        block_out_channels=(32, 64),
        layers_per_block=1,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
    ).eval()
    inputs = {
        "sample": torch.randn(2, 4, 16, 16),
        "timestep": torch.tensor([999, 500]),
        "encoder_hidden_states": torch.randn(2, 8, 32),
    }
    return model, inputs


def _tiny_flux() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    model = FluxTransformer2DModel(
        patch_size=1,
        in_channels=16,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        axes_dims_rope=(4, 4, 8),
    ).eval()
    img_ids = torch.zeros(64, 3)
    img_ids[:, 1] = torch.arange(64) // 8
    img_ids[:, 2] = torch.arange(64) % 8
    inputs = {
        "hidden_states": torch.randn(2, 64, 16),
        "encoder_hidden_states": torch.randn(2, 8, 32),
        "pooled_projections": torch.randn(2, 32),
        "timestep": torch.tensor([1.0, 0.5]),
        "img_ids": img_ids,
        "txt_ids": torch.zeros(8, 3),
    }
    return model, inputs


@torch.no_grad()
def test_unet_patched_matches_unpatched(kernel_calls: Counter[str]) -> None:
    model, inputs = _tiny_unet()
    ref = model(**inputs).sample

    report = patch(model)
    assert report[0] == "time_proj: Timesteps -> timestep_embedding"
    assert [line.split(": ")[1] for line in report[1:]] == ["GEGLU -> gelu_and_mul"] * 4
    _assert_close(model(**inputs).sample, ref)
    assert kernel_calls == {"timestep_embedding": 1, "gelu_and_mul": 4}

    unpatch(model)
    assert type(model.time_proj) is Timesteps
    assert torch.equal(model(**inputs).sample, ref)
    assert kernel_calls.total() == 5


@torch.no_grad()
def test_flux_patched_matches_unpatched(kernel_calls: Counter[str]) -> None:
    model, inputs = _tiny_flux()
    ref = model(**inputs).sample

    norms = [
        f"{block}.attn.{norm}: torch.nn.RMSNorm -> rmsnorm"
        for block, names in [
            ("transformer_blocks.0", ("norm_q", "norm_k", "norm_added_q", "norm_added_k")),
            ("single_transformer_blocks.0", ("norm_q", "norm_k")),
        ]
        for norm in names
    ]
    assert patch(model) == ["time_text_embed.time_proj: Timesteps -> timestep_embedding", *norms]
    _assert_close(model(**inputs).sample, ref)
    assert kernel_calls == {"timestep_embedding": 1, "rmsnorm": 6}
    assert patch(model) == []  # patched already

    unpatch(model)
    assert torch.equal(model(**inputs).sample, ref)
    assert kernel_calls.total() == 7


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cls", [GEGLU, SwiGLU])
def test_gated_feed_forward(cls: type, dtype: torch.dtype, kernel_calls: Counter[str]) -> None:
    module = cls(16, 256).to(dtype)
    x = torch.randn(2, 5, 16, dtype=dtype)
    ref = module(x)

    op = "gelu_and_mul" if cls is GEGLU else "silu_and_mul"
    assert patch(module) == [f"(model): {cls.__name__} -> {op}"]
    # In bf16 the kernel rounds once where torch rounds the activation and the product.
    _assert_close(module(x), ref, rtol=1e-5 if dtype == torch.float32 else _BF16_EPS)
    assert kernel_calls == {op: 1}

    unpatch(module)
    assert torch.equal(module(x), ref)


# (x dtype, weight dtype or None for elementwise_affine=False, bias)
_RMSNORM_CASES = [
    (torch.float32, None, False),
    (torch.float32, torch.float32, False),
    (torch.float32, torch.float32, True),
    (torch.bfloat16, None, False),
    (torch.bfloat16, torch.bfloat16, False),
    (torch.bfloat16, torch.float32, False),  # diffusers' result is float32 here
    (torch.float32, torch.bfloat16, True),  # and bfloat16 here
]


@pytest.mark.parametrize(("x_dtype", "w_dtype", "bias"), _RMSNORM_CASES)
def test_diffusers_rmsnorm(
    x_dtype: torch.dtype, w_dtype: torch.dtype | None, bias: bool, kernel_calls: Counter[str]
) -> None:
    module = RMSNorm(16, eps=1e-6, elementwise_affine=w_dtype is not None, bias=bias)
    if w_dtype is not None:
        torch.nn.init.normal_(module.weight)
        if bias:
            torch.nn.init.normal_(module.bias)
        module.to(w_dtype)
    # A [B, H, S, D] view of [B, S, H, D], as attention processors pass q and k.
    x = torch.randn(2, 7, 3, 16, dtype=x_dtype).transpose(1, 2)
    ref = module(x)

    assert patch(module) == ["(model): RMSNorm -> rmsnorm"]
    _assert_close(module(x), ref, rtol=1e-5 if ref.dtype == torch.float32 else _BF16_EPS)
    assert kernel_calls == {"rmsnorm": 1}

    unpatch(module)
    assert torch.equal(module(x), ref)


@pytest.mark.parametrize(
    ("x_dtype", "w_dtype", "eps"),
    [
        (torch.float32, torch.float32, 1e-6),
        (torch.float32, None, None),
        (torch.bfloat16, torch.bfloat16, None),
        pytest.param(
            torch.bfloat16,
            torch.float32,
            1e-6,
            # torch's own warning: it computes this case without its fused kernel
            marks=pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight"),
        ),
    ],
)
def test_torch_rmsnorm(
    x_dtype: torch.dtype, w_dtype: torch.dtype | None, eps: float | None, kernel_calls: Counter[str]
) -> None:
    module = torch.nn.RMSNorm(16, eps=eps, elementwise_affine=w_dtype is not None)
    if w_dtype is not None:
        torch.nn.init.normal_(module.weight)
        module.to(w_dtype)
    # Small values, so an eps of bfloat16's epsilon (not torch's default) would show.
    x = (0.05 * torch.randn(2, 7, 3, 16)).to(x_dtype).transpose(1, 2)
    ref = module(x)

    assert patch(module) == ["(model): torch.nn.RMSNorm -> rmsnorm"]
    _assert_close(module(x), ref, rtol=1e-5 if x_dtype == torch.float32 else _BF16_EPS)
    assert kernel_calls == {"rmsnorm": 1}

    unpatch(module)
    assert torch.equal(module(x), ref)


@pytest.mark.parametrize(
    ("dim", "flip_sin_to_cos", "shift", "scale"), [(32, True, 0, 1), (256, False, 1, 2.5)]
)
def test_timesteps(
    dim: int, flip_sin_to_cos: bool, shift: float, scale: float, kernel_calls: Counter[str]
) -> None:
    module = Timesteps(dim, flip_sin_to_cos, shift, scale)
    t = torch.tensor([999.0, 500.0, 13.7, 0.5, 0.0])
    ref = module(t)

    assert patch(module) == ["(model): Timesteps -> timestep_embedding"]
    # The same float32 steps; exp differs by an ulp from torch's, which moves the sine's
    # argument (up to scale * t) by a few of its ulps.
    atol = 4 * torch.finfo(torch.float32).eps * scale * t.max().item()
    torch.testing.assert_close(module(t), ref, rtol=0, atol=atol)
    assert kernel_calls == {"timestep_embedding": 1}

    # The kernel has no backward: a differentiable call keeps diffusers' code.
    t_grad = t.clone().requires_grad_()
    assert module(t_grad).requires_grad
    assert kernel_calls.total() == 1

    unpatch(module)
    assert torch.equal(module(t), ref)


def test_unpatched_configurations() -> None:
    # half - shift = 16 - (2^-21 + 2^-46): float32 of the double difference is 16 - 2^-20,
    # the kernel's float32 subtraction 16 - 2^-21 ties to 16.
    shift = 2.0**-21 + 2.0**-46
    model = torch.nn.ModuleDict(
        {
            "time": Timesteps(32, False, shift),
            "norm": RMSNorm((4, 16), eps=1e-6),
            "torch_norm": torch.nn.RMSNorm((4, 16)),
            "swiglu": SwiGLU(16, 256),
        }
    )
    model["swiglu"].activation = torch.nn.GELU()
    assert patch(model) == [
        f"time: Timesteps unpatched: downscale_freq_shift={shift!r}: float32(16 - shift) "
        "differs from the kernel's float32 subtraction",
        "norm: RMSNorm unpatched: weight of shape (4, 16) scales more than the normalized dim",
        "torch_norm: torch.nn.RMSNorm unpatched: normalized_shape=(4, 16) spans more than "
        "the last dim",
        "swiglu: SwiGLU unpatched: activation is GELU, not SiLU",
    ]
    assert [type(module) for module in model.values()] == [
        Timesteps,
        RMSNorm,
        torch.nn.RMSNorm,
        SwiGLU,
    ]
