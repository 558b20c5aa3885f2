"""Bad arguments to sycl_kernels.compat.vllm and compat.sgl_kernel: each raises a
TypeError or ValueError naming the engine's argument (not a core op's, not torch's),
before anything is written; and the error re-wording every compat function goes
through (compat._args.engine_names).
"""

from __future__ import annotations

import pytest
import torch
from sycl_kernels.compat import _args, sgl_kernel, vllm

FP8 = torch.float8_e4m3fn
T, H, G = 4, 256, 128


def _x(dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    return torch.randn(T, H, generator=torch.Generator().manual_seed(0)).to(dtype)


def _q() -> torch.Tensor:
    return torch.zeros(T, H, dtype=FP8)


def _vllm_group(input, output_q, output_s, group_size=G):
    vllm.per_token_group_fp8_quant(
        input, output_q, output_s, group_size, 1e-10, -448.0, 448.0, False, False, False
    )


def _sgl_group(input, output_q, output_s, group_size=G, v2=False, ue8m0=False):
    sgl_kernel.sgl_per_token_group_quant_8bit(
        input, output_q, output_s, group_size, 1e-10, -448.0, 448.0, ue8m0, enable_v2=v2
    )


def _vllm_block(input, result, scale, group_size=G):
    weight = torch.ones(H, dtype=input.dtype)
    vllm.rms_norm_per_block_quant(result, input, weight, scale, 1e-6, None, None, group_size, False)


def _vllm_silu_block(input, out, scales, group_size=G):
    gated = torch.cat([input, input], dim=-1)
    vllm.silu_and_mul_per_block_quant(out, gated, scales, group_size)


GROUP_FUNCTIONS = {
    "vllm.per_token_group_fp8_quant": _vllm_group,
    "sgl_kernel.sgl_per_token_group_quant_8bit": _sgl_group,
    "sgl_kernel.sgl_per_token_group_quant_8bit_v2": lambda i, q, s, g: _sgl_group(i, q, s, g, True),
    "vllm.rms_norm_per_block_quant": _vllm_block,
    "vllm.silu_and_mul_per_block_quant": _vllm_silu_block,
}


# 1. group_size: an int, positive, dividing the last dimension.


@pytest.mark.parametrize(
    ("group_size", "error"),
    [(0, ValueError), (-128, ValueError), (96, ValueError), (128.0, TypeError), (True, TypeError)],
    ids=str,
)
@pytest.mark.parametrize("name", list(GROUP_FUNCTIONS))
def test_group_size_refused(name: str, group_size: object, error: type) -> None:
    q = _q()
    with pytest.raises(error, match=rf"^{name}\(\): group_size"):
        GROUP_FUNCTIONS[name](_x(), q, torch.empty(T, H // G), group_size)
    assert not q.view(torch.uint8).any(), "written before refusing"


# 2. Scale outputs the compat layer re-views: expanded, sliced, wrong dtype or device.


def _expanded(shape: tuple, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.zeros((1,) * len(shape), dtype=dtype).expand(shape)


@pytest.mark.parametrize(
    "output_s",
    [
        _expanded((T, H // G)),
        torch.zeros(T, 2 * (H // G))[:, ::2],  # a slice: gaps vLLM's layout would write
        torch.zeros(H // G, 1).expand(H // G, T).t(),  # expanded, column-major by its strides
    ],
    ids=["expanded", "sliced", "expanded-column"],
)
@pytest.mark.parametrize("name", list(GROUP_FUNCTIONS)[:3])
def test_group_scales_layout_refused(name: str, output_s: torch.Tensor) -> None:
    q = _q()
    with pytest.raises(ValueError, match=rf"^{name}\(\): output_s has shape .* and strides"):
        GROUP_FUNCTIONS[name](_x(), q, output_s, G)
    assert not q.view(torch.uint8).any()


@pytest.mark.parametrize("name", list(GROUP_FUNCTIONS)[3:])
def test_block_scales_layout_refused(name: str) -> None:
    q = _q()
    with pytest.raises(ValueError, match=r"\(\): scales? has shape \(8,\) and strides \(0,\)"):
        GROUP_FUNCTIONS[name](_x(), q, _expanded((T * (H // G),)), G)
    assert not q.view(torch.uint8).any()


@pytest.mark.parametrize("v2", [False, True])
def test_sgl_ue8m0_scales_layout_refused(v2: bool) -> None:
    """UE8M0 scales, bytes (row-major) or int32 words (column-major), written by torch ops
    through a re-view: an expanded output_s is refused, not written past."""
    name = "sgl_per_token_group_quant_8bit" + ("_v2" if v2 else "")
    packed = torch.zeros(1, 2, dtype=torch.int32).expand(T, 2)[:, :1]  # strides (0, 1)
    for output_s in (_expanded((T, H // G), torch.uint8), packed):
        with pytest.raises(
            ValueError, match=rf"^sgl_kernel\.{name}\(\): output_s has shape .* strides"
        ):
            _sgl_group(_x(), _q(), output_s, G, v2, ue8m0=True)


@pytest.mark.parametrize("name", list(GROUP_FUNCTIONS)[:3])
def test_group_outputs_checked(name: str) -> None:
    """output_s's dtype and device, output_q's shape: named as the engine names them."""
    quantize = GROUP_FUNCTIONS[name]
    with pytest.raises(TypeError, match=rf"^{name}\(\): output_s has dtype torch.float16"):
        quantize(_x(), _q(), torch.empty(T, H // G, dtype=torch.float16), G)
    with pytest.raises(ValueError, match=rf"^{name}\(\): output_s is on meta"):
        quantize(_x(), _q(), torch.empty(T, H // G, device="meta"), G)
    with pytest.raises(ValueError, match=rf"^{name}\(\): output_q has shape \(3, 256\)"):
        quantize(_x(), _q()[:3], torch.empty(T, H // G), G)


def test_group_scales_column_major_still_taken() -> None:
    """The layouts vLLM's callers allocate are taken: column-major with padding rows
    (TMA-aligned), written at t + g * stride(1)."""
    x = _x()
    row, column = torch.zeros(T, H // G), torch.zeros(H // G, T + 4).t()[:T]
    q_row, q_column = _q(), _q()
    _vllm_group(x, q_row, row)
    _vllm_group(x, q_column, column)
    assert torch.equal(row, column) and torch.equal(
        q_row.view(torch.uint8), q_column.view(torch.uint8)
    )


@pytest.mark.parametrize(
    ("quantize", "name"),
    [
        (lambda x, q, s: vllm.dynamic_per_token_scaled_fp8_quant(q, x, s), "scale"),
        (lambda x, q, s: vllm.dynamic_scaled_fp8_quant(q, x, s), "scale"),
        (lambda x, q, s: sgl_kernel.sgl_per_token_quant_fp8(x, q, s), "output_s"),
        (lambda x, q, s: sgl_kernel.sgl_per_tensor_quant_fp8(x, q, s, False), "output_s"),
    ],
    ids=["vllm-per-token", "vllm-per-tensor", "sgl-per-token", "sgl-per-tensor"],
)
def test_token_scales_named(quantize, name: str) -> None:
    """Scales the core op checks: its errors name the engine's argument."""
    with pytest.raises(ValueError, match=rf"\(\): {name} (is written|has \d+ elements)"):
        quantize(_x(), _q(), _expanded((T,)))
    with pytest.raises(TypeError, match=rf"\(\): {name} (has dtype|must be)"):
        quantize(_x(), _q(), torch.zeros(T, dtype=torch.float16))


# 3. vLLM's routing outputs: [tokens, topk], their dtypes, their own memory.


def _routing(tokens: dict[str, int] | None = None) -> dict[str, torch.Tensor]:
    rows = {"topk_weights": T, "topk_indices": T, "token_expert_indices": T} | (tokens or {})
    return {
        "topk_weights": torch.zeros(rows["topk_weights"], 2),
        "topk_indices": torch.zeros(rows["topk_indices"], 2, dtype=torch.int32),
        "token_expert_indices": torch.zeros(rows["token_expert_indices"], 2, dtype=torch.int32),
    }


@pytest.mark.parametrize("sigmoid", [False, True])
@pytest.mark.parametrize("name", ["topk_weights", "topk_indices", "token_expert_indices"])
def test_vllm_routing_outputs_named(name: str, sigmoid: bool) -> None:
    gating = torch.randn(T, 8)

    def route(outputs: dict[str, torch.Tensor]) -> None:
        args = (*outputs.values(), gating, False)
        if sigmoid:
            vllm.topk_sigmoid(*args, None, 1.0)
        else:
            vllm.topk_softmax(*args)

    function = "topk_sigmoid" if sigmoid else "topk_softmax"
    with pytest.raises(ValueError, match=rf"^vllm\.{function}\(\): {name} has shape \(3, 2\)"):
        route(_routing({name: 3}))
    outputs = _routing()
    outputs[name] = _expanded((T, 2), outputs[name].dtype)
    with pytest.raises(ValueError, match=rf"^vllm\.{function}\(\): {name} is written"):
        route(outputs)
    outputs = _routing()
    outputs[name] = outputs[name].to(torch.float16)
    with pytest.raises(TypeError, match=rf"^vllm\.{function}\(\): {name} has dtype"):
        route(outputs)
    outputs = _routing()
    outputs[name] = outputs[name].to("meta")
    with pytest.raises(ValueError, match=rf"^vllm\.{function}\(\): {name} is on meta"):
        route(outputs)


# 5. A core op's errors in the engine's argument names.


def test_store_cache_xpu_names_indices() -> None:
    k, cache = torch.randn(8, 16), torch.zeros(16, 16)
    with pytest.raises(ValueError, match=r"^sgl_kernel\.store_cache_xpu\(\): indices has shape"):
        sgl_kernel.store_cache_xpu(k, k, cache, cache.clone(), torch.arange(8)[::2])
    with pytest.raises(ValueError, match=r"^sgl_kernel\.store_cache_xpu\(\): v_cache"):
        sgl_kernel.store_cache_xpu(k, k, cache, torch.zeros(16, 8), torch.arange(8))
    with pytest.raises(IndexError, match=r"^sgl_kernel\.store_cache_xpu\(\): indices holds 16"):
        sgl_kernel.store_cache_xpu(k[:1], k[:1], cache, cache.clone(), torch.tensor([16]))
    assert not cache.any()


def test_core_errors_named_as_the_engine() -> None:
    """One example a family: the core op's argument never shows."""
    x = _x()
    with pytest.raises(ValueError, match=r"^vllm\.rms_norm\(\): out has shape .* \(input\.shape\)"):
        vllm.rms_norm(torch.empty(3, H, dtype=x.dtype), x, None, 1e-6)
    with pytest.raises(ValueError, match=r"^vllm\.moe_sum\(\): output has shape"):
        vllm.moe_sum(torch.randn(T, 2, 8), torch.empty(3, 8))
    with pytest.raises(ValueError, match=r"^sgl_kernel\.biased_topk\(\): output has shape"):
        sgl_kernel.biased_topk(
            torch.randn(T, 8),
            torch.zeros(8),
            torch.empty(3, 2),
            torch.empty(3, 2, dtype=torch.int32),
            2,
            "sigmoid",
        )
    with pytest.raises(TypeError, match=r"^sgl_kernel\.silu_and_mul\(\): input has dtype"):
        sgl_kernel.silu_and_mul(torch.zeros(T, 8, dtype=torch.int32))


@pytest.mark.parametrize("module", [vllm, sgl_kernel], ids=lambda m: m.__name__)
def test_every_function_rewords(module) -> None:
    # Every engine call; not a class, nor register(), which defines the calls as ops.
    not_calls = ("FusedSetKVBufferArg", "register")
    functions = [getattr(module, n) for n in module.__all__ if n not in not_calls]
    assert all(hasattr(f, "__wrapped__") for f in functions), "a function not under engine_names"


def test_engine_names() -> None:
    """Only a core op's message is re-worded (whole words), the exception kept as raised."""
    raised = [
        ValueError("store_kv_cache(): slot_mapping has shape (4,); expected key's tokens"),
        TypeError("as_strided(): argument 'stride' must be tuple of ints"),  # torch's own
        ValueError("sgl_kernel.store_cache_xpu(): key is 3-D"),  # already the engine's
    ]

    def store_cache_xpu(error: Exception) -> None:
        raise error

    store_cache_xpu.__module__ = sgl_kernel.__name__
    wrapped = _args.engine_names(slot_mapping="indices", key="k")(store_cache_xpu)
    want = [
        "sgl_kernel.store_cache_xpu(): indices has shape (4,); expected k's tokens",
        "as_strided(): argument 'stride' must be tuple of ints",
        "sgl_kernel.store_cache_xpu(): key is 3-D",
    ]
    for error, message in zip(raised, want, strict=True):
        with pytest.raises(type(error)) as info:
            wrapped(error)
        assert info.value is error and str(error) == message


# 6. An empty input's per-tensor scale is written.


@pytest.mark.parametrize("shape", [(1,), ()], ids=str)
def test_empty_input_writes_the_scale(shape: tuple) -> None:
    empty = torch.empty(0, H)
    scale = torch.full(shape, 5.0)
    vllm.dynamic_scaled_fp8_quant(torch.empty(0, H, dtype=FP8), empty, scale)
    assert scale.item() == 0.0  # absmax 0 / 448, no floor
    output_s = torch.full(shape, 5.0)
    sgl_kernel.sgl_per_tensor_quant_fp8(empty, torch.empty(0, H, dtype=FP8), output_s, False)
    assert output_s.item() == 0.0
