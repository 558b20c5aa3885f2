"""vLLM's op namespaces (sycl_kernels.compat.vllm.register()): every op defined under
vLLM's name with vLLM's schema, called as vLLM's Python calls it (vllm/_custom_ops.py,
model_executor/layers/activation.py, kernels/vllm_c.py, vLLM 0.34) on CPU tensors and
checked against float64 references (tests/references.py and the compat tests' own);
nothing defined without the call; an op already defined left alone; torch.compile
tracing through the fake kernels.

The in-process tests register once for the session (module fixture): no other test
depends on these namespaces being absent. What must run before or without register()
runs in a subprocess.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from sycl_kernels.compat import vllm
from sycl_kernels.compat._namespaces import Registration
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from tests import references
from tests.compat.test_vllm import _rope
from tests.compat.test_vllm_penalties import _vllm_torch_form
from tests.compat.test_vllm_quant import (
    _assert_near,
    _bits_equal,
    _block_norm_ref,
    _divide,
    _expand,
    _group_ref,
    _per_token_norm_ref,
    _quant,
    _rms,
    _silu_block_ref,
)
from tests.ops.test_moe import _ids
from tests.ops.test_routing import assert_routes

# vLLM's schemas, copied from vllm-xpu-kernels 4543b580 csrc/torch_bindings.cpp and
# csrc/moe/torch_bindings.cpp; rotary_embedding and apply_repetition_penalties_ from
# vLLM's csrc/torch_bindings.cpp (vllm-xpu-kernels has no apply_repetition_penalties_,
# and its rotary_embedding lacks the rope_dim_offset and inverse vLLM passes).
VLLM_SCHEMAS = (
    ("_C", "rms_norm(Tensor! result, Tensor input, Tensor? weight, float epsilon) -> ()"),
    (
        "_C",
        "fused_add_rms_norm(Tensor! input, Tensor! residual, Tensor? weight, float epsilon) -> ()",
    ),
    ("_C", "silu_and_mul(Tensor! result, Tensor input) -> ()"),
    ("_C", "mul_and_silu(Tensor! out, Tensor input) -> ()"),
    ("_C", "gelu_and_mul(Tensor! out, Tensor input) -> ()"),
    ("_C", "gelu_tanh_and_mul(Tensor! out, Tensor input) -> ()"),
    ("_C", "fatrelu_and_mul(Tensor! out, Tensor! input, float threshold) -> ()"),
    (
        "_C",
        "swigluoai_and_mul(Tensor! out, Tensor input, float alpha=1.702, float limit=7.0) -> ()",
    ),
    ("_C", "gelu_new(Tensor! out, Tensor input) -> ()"),
    ("_C", "gelu_fast(Tensor! out, Tensor input) -> ()"),
    ("_C", "gelu_quick(Tensor! out, Tensor input) -> ()"),
    (
        "_C",
        "rotary_embedding(Tensor positions, Tensor! query, Tensor!? key, int head_size, Tensor "
        "cos_sin_cache, bool is_neox, int rope_dim_offset=0, bool inverse=False) -> ()",
    ),
    (
        "_C",
        "fused_qk_norm_rope(Tensor! qkv, int num_heads_q, int num_heads_k, int num_heads_v, int "
        "head_dim, float eps, Tensor q_weight, Tensor k_weight, Tensor cos_sin_cache, bool "
        "is_neox, Tensor position_ids, int forced_token_heads_per_warp=-1) -> ()",
    ),
    (
        "_C",
        "static_scaled_fp8_quant(Tensor! result, Tensor input, Tensor scale, (int, int)? "
        "group_shape=None) -> ()",
    ),
    ("_C", "dynamic_scaled_fp8_quant(Tensor! result, Tensor input, Tensor! scale) -> ()"),
    (
        "_C",
        "dynamic_per_token_scaled_fp8_quant(Tensor! result, Tensor input, Tensor! scale, Tensor? "
        "scale_ub) -> ()",
    ),
    (
        "_C",
        "per_token_group_fp8_quant(Tensor input, Tensor! output_q, Tensor! output_s, int "
        "group_size, float eps, float fp8_min, float fp8_max, bool scale_ue8m0, bool "
        "dummy_is_scale_transposed, bool dummy_is_tma_aligned) -> ()",
    ),
    (
        "_C",
        "rms_norm_static_fp8_quant(Tensor! result, Tensor input, Tensor weight, Tensor scale, "
        "float epsilon) -> ()",
    ),
    (
        "_C",
        "fused_add_rms_norm_static_fp8_quant(Tensor! result, Tensor input, Tensor! residual, "
        "Tensor weight, Tensor scale, float epsilon) -> ()",
    ),
    (
        "_C",
        "rms_norm_dynamic_per_token_quant(Tensor! result, Tensor input, Tensor weight, Tensor! "
        "scale, float epsilon, Tensor? scale_ub, Tensor!? residual) -> ()",
    ),
    (
        "_C",
        "rms_norm_per_block_quant(Tensor! result, Tensor input, Tensor weight, Tensor! scale, "
        "float epsilon, Tensor? scale_ub, Tensor!? residual, int group_size, bool "
        "is_scale_transposed, bool scale_ue8m0=False) -> ()",
    ),
    ("_C", "silu_and_mul_quant(Tensor! result, Tensor input, Tensor scale) -> ()"),
    (
        "_C",
        "silu_and_mul_per_block_quant(Tensor! out, Tensor input, Tensor! scales, int group_size, "
        "Tensor? scale_ub=None, bool is_scale_transposed=False, bool scale_ue8m0=False) -> ()",
    ),
    (
        "_C",
        "apply_repetition_penalties_(Tensor! logits, Tensor prompt_mask, Tensor output_mask, "
        "Tensor repetition_penalties) -> ()",
    ),
    (
        "_moe_C",
        "topk_softmax(Tensor! topk_weights, Tensor! topk_indices, Tensor! token_expert_indices, "
        "Tensor gating_output, bool renormalize, Tensor? bias, Tensor? is_padding) -> ()",
    ),
    (
        "_moe_C",
        "topk_sigmoid(Tensor! topk_weights, Tensor! topk_indices, Tensor! token_expert_indices, "
        "Tensor gating_output, bool renormalize, Tensor? bias, float routed_scaling_factor, "
        "Tensor? is_padding) -> ()",
    ),
    (
        "_moe_C",
        "grouped_topk(Tensor scores, int n_group, int topk_group, int topk, bool renormalize, "
        "float routed_scaling_factor, Tensor bias, int scoring_func) -> (Tensor, Tensor)",
    ),
    (
        "_moe_C",
        "moe_align_block_size(Tensor topk_ids, int num_experts, int block_size, Tensor! "
        "sorted_token_ids, Tensor! experts_ids, Tensor! num_tokens_post_pad, Tensor? "
        "maybe_expert_map) -> ()",
    ),
    ("_moe_C", "moe_sum(Tensor input, Tensor! output, Tensor? topk_ids, Tensor? expert_map) -> ()"),
    (
        "_C_cache_ops",
        "reshape_and_cache(Tensor key, Tensor value, Tensor! key_cache, Tensor! value_cache, "
        "Tensor slot_mapping, str kv_cache_dtype, Tensor k_scale, Tensor v_scale) -> ()",
    ),
    (
        "_C_cache_ops",
        "reshape_and_cache_flash(Tensor key, Tensor value, Tensor! key_cache, Tensor! "
        "value_cache, Tensor slot_mapping, str kv_cache_dtype, Tensor k_scale, Tensor v_scale) -> "
        "()",
    ),
    (
        "_C_cache_ops",
        "concat_and_cache_mla(Tensor kv_c, Tensor k_pe, Tensor! kv_cache, Tensor slot_mapping, "
        "str kv_cache_dtype, Tensor scale) -> ()",
    ),
    (
        "_C_cache_ops",
        "gather_cache(Tensor src_cache, Tensor! dst, Tensor block_table, Tensor cu_seq_lens, int "
        "batch_size, Tensor? seq_starts) -> ()",
    ),
    (
        "_C_cache_ops",
        "gather_and_maybe_dequant_cache(Tensor src_cache, Tensor! dst, Tensor block_table, Tensor "
        "cu_seq_lens, Tensor token_to_seq, int num_tokens, str kv_cache_dtype, Tensor scale, "
        "Tensor? seq_starts) -> ()",
    ),
)
NAMESPACES = ("_C", "_moe_C", "_C_cache_ops")
QUALNAMES = [f"{ns}::{schema.split('(', 1)[0]}" for ns, schema in VLLM_SCHEMAS]

FP8 = torch.float8_e4m3fn
EPS = 1e-6
HIDDEN = 2048  # sizes of the compat tests (tests/compat/test_vllm*.py): compiled variants
H = 256
HEAD_SIZE = 128
MAX_POSITION = 4096


@pytest.fixture(scope="module", autouse=True)
def registration() -> Registration:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing here is left to another registration
        return vllm.register()


def _run(code: str, **env: str) -> str:
    """code's stdout, run by a fresh interpreter (this one's sys.path, env added)."""
    paths = os.pathsep.join([*env.pop("PYTHONPATH", "").split(os.pathsep), *sys.path])
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env, "PYTHONPATH": paths},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


# The registration.


def test_registers_every_op_with_vllms_schema(registration: Registration) -> None:
    want: dict[str, tuple[str, ...]] = {}
    for ns, schema in VLLM_SCHEMAS:
        want[ns] = (*want.get(ns, ()), schema.split("(", 1)[0])
    assert registration.registered == want
    assert {ns: len(names) for ns, names in want.items()} == {
        "_C": 24,
        "_moe_C": 5,
        "_C_cache_ops": 5,
    }
    assert registration.left_alone == {}
    for ns, schema in VLLM_SCHEMAS:
        packet = getattr(getattr(torch.ops, ns), schema.split("(", 1)[0])
        assert str(packet.default._schema) == str(torch._C.parse_schema(f"{ns}::{schema}"))
        assert packet.overloads() == ["default"]


def test_register_again_does_nothing(registration: Registration) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert vllm.register() is registration


def test_the_vllm_plugin_entry_point_is_register() -> None:
    # vLLM loads the group's entry points and calls each without arguments.
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    value = pyproject["project"]["entry-points"]["vllm.general_plugins"]["sycl_kernels"]
    module, _, attribute = value.partition(":")
    assert getattr(importlib.import_module(module), attribute) is vllm.register


def test_nothing_is_registered_without_register() -> None:
    # Any op at all in vLLM's namespaces, after importing the package and its vLLM module.
    out = _run(
        f"""
        import torch
        import sycl_kernels, sycl_kernels.ops, sycl_kernels.compat.vllm

        def count():
            names = torch._C._dispatch_get_all_op_names()
            return sum(n.split("::")[0] in {NAMESPACES!r} for n in names)

        print(count())
        sycl_kernels.compat.vllm.register()
        print(count())
        """
    )
    assert out.split() == ["0", str(len(VLLM_SCHEMAS))]


def test_an_op_already_defined_is_left_alone() -> None:
    # Another library's _C::rms_norm (vllm-xpu-kernels' schema, a kernel that writes 7s)
    # stays: its schema, its kernel; the other 33 ops are defined, with one warning.
    out = _run(
        """
        import json, warnings
        import torch

        lib = torch.library.Library("_C", "FRAGMENT")
        lib.define("rms_norm(Tensor! result, Tensor input, Tensor? weight, float epsilon) -> ()")

        def sevens(result, input, weight, epsilon):
            result.fill_(7.0)

        lib.impl("rms_norm", sevens, "CPU")
        schema = str(torch.ops._C.rms_norm.default._schema)

        from sycl_kernels.compat import vllm

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = vllm.register()
            second = vllm.register()
        out = torch.empty(2, 8)
        torch.ops._C.rms_norm(out, torch.ones(2, 8), None, 1e-6)
        print(json.dumps({
            "registered": first.registered,
            "left_alone": first.left_alone,
            "same": second is first,
            "warnings": [str(w.message) for w in caught],
            "schema_kept": str(torch.ops._C.rms_norm.default._schema) == schema,
            "out": out.unique().tolist(),
        }))
        """
    )
    got = json.loads(out)
    assert list(got["left_alone"]) == ["_C::rms_norm"]
    assert got["left_alone"]["_C::rms_norm"].startswith("registered at <string>:")
    assert "rms_norm" not in got["registered"]["_C"] and len(got["registered"]["_C"]) == 23
    assert len(got["registered"]["_moe_C"]) == len(got["registered"]["_C_cache_ops"]) == 5
    assert got["same"] and got["schema_kept"] and got["out"] == [7.0]
    assert len(got["warnings"]) == 1 and "_C::rms_norm" in got["warnings"][0]


def test_vllm_xpu_kernels_is_loaded_first(tmp_path: Path) -> None:
    # A stand-in vllm_xpu_kernels: _C defines silu_and_mul and a _C_cache_ops op, as the
    # real one's _C does; _moe_C fails to load (no GPU runtime), so its ops are ours.
    package = tmp_path / "vllm_xpu_kernels"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_C.py").write_text(
        textwrap.dedent(
            """
            import torch

            ops = torch.library.Library("_C", "FRAGMENT")
            ops.define("silu_and_mul(Tensor! result, Tensor input) -> ()")
            cache_ops = torch.library.Library("_C_cache_ops", "FRAGMENT")
            cache_ops.define("gather_cache(Tensor src_cache, Tensor! dst) -> ()")
            """
        )
    )
    (package / "_moe_C.py").write_text("raise OSError('libsycl.so.8: cannot open')\n")
    out = _run(
        """
        import json, warnings
        from sycl_kernels.compat import vllm

        warnings.simplefilter("ignore")
        r = vllm.register()
        print(json.dumps({"left_alone": r.left_alone, "registered": r.registered}))
        """,
        PYTHONPATH=str(tmp_path),
    )
    got = json.loads(out)
    assert sorted(got["left_alone"]) == ["_C::silu_and_mul", "_C_cache_ops::gather_cache"]
    assert all(str(package / "_C.py") in where for where in got["left_alone"].values())
    assert len(got["registered"]["_moe_C"]) == 5
    assert len(got["registered"]["_C"]) == 23 and len(got["registered"]["_C_cache_ops"]) == 4


def test_vllms_own_kernels_are_loaded_first(tmp_path: Path) -> None:
    # A stand-in vllm whose platform's import_kernels() loads vllm._C, which defines
    # _C::rms_norm (vLLM's CUDA _C, imported lazily by vllm._custom_ops): it is kept.
    (tmp_path / "vllm" / "platforms").mkdir(parents=True)
    (tmp_path / "vllm" / "__init__.py").write_text("")
    (tmp_path / "vllm" / "platforms" / "__init__.py").write_text(
        textwrap.dedent(
            """
            import importlib

            class _Platform:
                def import_kernels(self):
                    importlib.import_module("vllm._C")

            current_platform = _Platform()
            """
        )
    )
    (tmp_path / "vllm" / "_C.py").write_text(
        textwrap.dedent(
            """
            import torch

            ops = torch.library.Library("_C", "FRAGMENT")
            ops.define("rms_norm(Tensor! result, Tensor input, Tensor weight, float epsilon) -> ()")
            """
        )
    )
    out = _run(
        """
        import json, warnings
        from sycl_kernels.compat import vllm

        warnings.simplefilter("ignore")
        print(json.dumps(vllm.register().left_alone))
        """,
        PYTHONPATH=str(tmp_path),
    )
    left_alone = json.loads(out)
    assert list(left_alone) == ["_C::rms_norm"]
    assert str(tmp_path / "vllm" / "_C.py") in left_alone["_C::rms_norm"]


def test_torch_compile_traces_through_the_fake_kernel() -> None:
    # The graph holds auto_functionalized(_C.rms_norm.default), which vLLM's passes match.
    graphs: list[torch.fx.GraphModule] = []

    def capture(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    backend = aot_autograd(fw_compiler=capture)

    def norm_twice(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        torch.ops._C.rms_norm(out, x, weight, EPS)
        return out * 2

    compiled = torch.compile(norm_twice, fullgraph=True, backend=backend)
    x = torch.randn(5, HIDDEN).to(torch.bfloat16)
    weight = torch.randn(HIDDEN).to(torch.bfloat16)
    references.assert_close(compiled(x, weight), 2 * references.rmsnorm(x, weight, EPS))
    pattern = r"auto_functionalized(_v2)?\(torch\.ops\._C\.rms_norm\.default"
    assert re.search(pattern, graphs[0].code)
    meta = torch.empty(3, 8, device="meta")
    bias = torch.empty(8, device="meta")
    weights, ids = torch.ops._moe_C.grouped_topk(meta, 2, 1, 2, True, 1.0, bias, 1)
    assert (weights.shape, weights.dtype, ids.dtype) == ((3, 2), torch.float32, torch.int32)


def test_errors_name_vllms_arguments() -> None:
    with pytest.raises(ValueError, match=r"vllm.rms_norm\(\): out has shape"):
        torch.ops._C.rms_norm(torch.empty(2, 8), torch.ones(2, 9), None, EPS)


# Norms and activations, as vLLM's layers call them.


def test_rms_norm() -> None:
    x = torch.randn(2, 3, HIDDEN).to(torch.bfloat16)
    weight = (1 + 0.5 * torch.randn(HIDDEN)).to(torch.bfloat16)
    out = torch.empty_like(x)
    torch.ops._C.rms_norm(out, x, weight, EPS)
    references.assert_close(out, references.rmsnorm(x, weight, EPS))


def test_fused_add_rms_norm() -> None:
    x = torch.randn(5, HIDDEN).to(torch.bfloat16)
    x_residual = torch.randn(5, HIDDEN).to(torch.bfloat16)
    weight = (1 + 0.5 * torch.randn(HIDDEN)).to(torch.bfloat16)
    normed, total = references.fused_add_rmsnorm(x, x_residual, weight, EPS, rounded_sum=True)
    torch.ops._C.fused_add_rms_norm(x, x_residual, weight, EPS)
    assert torch.equal(x_residual.double(), total)
    references.assert_close(x, normed)


def _mul_and_silu(x: torch.Tensor) -> torch.Tensor:
    first, second = x.double().chunk(2, dim=-1)
    return first * references.activation("silu", second)


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("silu_and_mul", lambda x: references.act_and_mul("silu_and_mul", x)),
        ("mul_and_silu", _mul_and_silu),
        ("gelu_and_mul", lambda x: references.act_and_mul("gelu_and_mul", x)),
        ("gelu_tanh_and_mul", lambda x: references.act_and_mul("gelu_tanh_and_mul", x)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_gated_activations(name: str, want) -> None:
    x = (2 * torch.randn(3, 4, 2 * HIDDEN)).to(torch.bfloat16)
    out = torch.empty(3, 4, HIDDEN, dtype=torch.bfloat16)
    getattr(torch.ops._C, name)(out, x)  # SiluAndMul & co: self.op(out, x)
    references.assert_close(out, want(x))


@pytest.mark.parametrize(
    ("name", "activation"),
    [("gelu_new", "gelu_tanh"), ("gelu_fast", "gelu_tanh"), ("gelu_quick", "gelu_quick")],
)
def test_gelus(name: str, activation: str) -> None:
    x = (2 * torch.randn(3, 4, 4096)).to(torch.bfloat16)
    out = torch.empty_like(x)
    getattr(torch.ops._C, name)(out, x)
    references.assert_close(out, references.activation(activation, x))


def test_fatrelu_and_swigluoai() -> None:
    x = (2 * torch.randn(5, 2 * 999)).to(torch.bfloat16)
    out = torch.empty(5, 999, dtype=torch.bfloat16)
    torch.ops._C.fatrelu_and_mul(out, x, 0.25)  # FatreluAndMul: self.op(out, x, threshold)
    assert torch.equal(out, references.fatrelu_and_mul(x, 0.25).to(torch.bfloat16))
    torch.ops._C.swigluoai_and_mul(out, x, 1.0, 3.0)  # SwigluOAIAndMul: (out, x, alpha, limit)
    references.assert_close(out, references.swigluoai_and_mul(x, 1.0, 3.0))
    torch.ops._C.swigluoai_and_mul(out, x)  # fused_moe/activation.py: the schema's defaults
    references.assert_close(out, references.swigluoai_and_mul(x))


# Rotary embeddings.


def test_rotary_embedding_both_call_forms() -> None:
    tokens = 7
    query = torch.randn(tokens, 4 * HEAD_SIZE).to(torch.bfloat16)
    key = torch.randn(tokens, 2 * HEAD_SIZE).to(torch.bfloat16)
    positions = torch.randint(0, MAX_POSITION, (tokens,))
    cache = references.rope_cache(MAX_POSITION, HEAD_SIZE)
    q_heads, k_heads = query.view(tokens, 4, HEAD_SIZE), key.view(tokens, 2, HEAD_SIZE)
    want_q = references.rope(positions, q_heads, cache, True)
    want_k = references.rope(positions, k_heads, cache, True)
    torch.ops._C.rotary_embedding(positions, query, key, HEAD_SIZE, cache, True)
    references.assert_close(q_heads, want_q)
    references.assert_close(k_heads, want_k)
    # DeepSeek's scaling rope: rope_dim_offset (a 64-wide cache from element 32), then
    # with inverse the same rotation undone.
    partial = references.rope_cache(MAX_POSITION, 64)
    want_q = _rope(positions, q_heads, partial, False, 32)
    before_k = key.clone()
    torch.ops._C.rotary_embedding(positions, query, None, HEAD_SIZE, partial, False, 32, False)
    references.assert_close(q_heads, want_q)
    assert torch.equal(key, before_k)
    want_q = _rope(positions, q_heads, partial, False, 32, inverse=True)
    torch.ops._C.rotary_embedding(positions, query, None, HEAD_SIZE, partial, False, 32, True)
    references.assert_close(q_heads, want_q)


def test_fused_qk_norm_rope() -> None:
    tokens, heads = 7, (4, 2, 2)
    qkv = torch.randn(tokens, sum(heads) * HEAD_SIZE).to(torch.bfloat16)
    q, k, v = (
        t.unflatten(-1, (-1, HEAD_SIZE)) for t in qkv.split([n * HEAD_SIZE for n in heads], -1)
    )
    q_weight, k_weight = torch.randn(HEAD_SIZE).bfloat16(), torch.randn(HEAD_SIZE).bfloat16()
    position_ids = torch.randint(0, MAX_POSITION, (tokens,))
    cache = references.rope_cache(MAX_POSITION, HEAD_SIZE)
    want_q = references.rope(position_ids, references.rmsnorm(q, q_weight, EPS), cache, True)
    want_k = references.rope(position_ids, references.rmsnorm(k, k_weight, EPS), cache, True)
    v_before = v.clone()
    torch.ops._C.fused_qk_norm_rope(
        qkv, *heads, HEAD_SIZE, EPS, q_weight, k_weight, cache, True, position_ids, -1
    )
    references.assert_close(q, want_q)
    references.assert_close(k, want_k)
    assert torch.equal(v, v_before)


# Quantization, as vllm/_custom_ops.py (scaled_fp8_quant, the fused norms) and the
# fusion passes (keyword arguments: the schema's names) call it.


def test_scaled_fp8_quant_three_ways() -> None:
    tokens = 8
    x = torch.randn(tokens, H).to(torch.bfloat16)
    output = torch.empty(tokens, H, dtype=FP8)
    scale = torch.tensor([0.02])
    torch.ops._C.static_scaled_fp8_quant(output, x, scale, None)
    _bits_equal(output, _quant(x, torch.full((tokens, H), 0.02)))
    per_token = 0.005 + 0.03 * torch.rand(tokens)
    torch.ops._C.static_scaled_fp8_quant(output, x, per_token, (1, -1))
    _bits_equal(output, _quant(x, per_token[:, None].expand(tokens, H)))
    scale = torch.empty(1, dtype=torch.float32)
    torch.ops._C.dynamic_scaled_fp8_quant(output, x, scale)
    want = x.float().abs().max() / 448.0
    assert torch.equal(scale, want.reshape(1))
    _bits_equal(output, _quant(x, want))
    scale = torch.empty((tokens, 1), dtype=torch.float32)
    scale_ub = torch.tensor(1.5)
    torch.ops._C.dynamic_per_token_scaled_fp8_quant(output, x, scale, scale_ub)
    want = (x.float().abs().amax(-1, keepdim=True).clamp(max=1.5) / 448.0).clamp(min=1 / 229376)
    assert torch.equal(scale, want)
    _bits_equal(output, _quant(x, want))


def test_per_token_group_fp8_quant() -> None:
    # fp8_utils.py: (x, x_q, x_s, group_size, eps, fp8_min, fp8_max, use_ue8m0, ...).
    x = (torch.rand(3, H) + 1e-6).to(torch.bfloat16)
    x_q, x_s = torch.empty(3, H, dtype=FP8), torch.empty(2, 3).t()  # column-major
    torch.ops._C.per_token_group_fp8_quant(
        x, x_q, x_s, 128, 1e-10, -448.0, 448.0, False, True, False
    )
    scale, q = _group_ref(x, 128, 1e-10, False)
    assert torch.equal(x_s, scale)
    _bits_equal(x_q, q)


def test_rms_norm_static_fp8_quants_by_keyword() -> None:
    tokens = 7
    x = (torch.randn(tokens, H) / H).to(torch.bfloat16)
    weight = torch.normal(1.0, 0.1, (H,)).to(torch.bfloat16)
    scale = torch.tensor([0.005])
    result = torch.empty(tokens, H, dtype=FP8)
    torch.ops._C.rms_norm_static_fp8_quant(
        result=result, input=x, weight=weight, scale=scale, epsilon=EPS
    )
    normed, _ = _rms(x, weight)
    _assert_near(result, _quant(normed.float(), scale))
    residual = torch.randn(tokens, H).to(torch.bfloat16) / H
    normed, total = _rms(x, weight, residual)
    torch.ops._C.fused_add_rms_norm_static_fp8_quant(
        result=result, input=x, residual=residual, weight=weight, scale=scale, epsilon=EPS
    )
    assert torch.equal(residual, total)
    _assert_near(result, _quant(normed.float(), scale))


@pytest.mark.parametrize("qdtype", [FP8, torch.int8], ids=str)
def test_rms_norm_dynamic_per_token_quant(qdtype: torch.dtype) -> None:
    tokens = 7
    x = (torch.randn(tokens, H) / H).to(torch.bfloat16)
    residual = torch.randn(tokens, H).to(torch.bfloat16) / H
    weight = torch.normal(1.0, 0.1, (H,)).to(torch.bfloat16)
    normed, total = _rms(x, weight, residual)
    output = torch.empty(x.shape, dtype=qdtype)
    scales = torch.empty((tokens, 1), dtype=torch.float32)
    torch.ops._C.rms_norm_dynamic_per_token_quant(output, x, weight, scales, EPS, None, residual)
    torch.testing.assert_close(scales, _per_token_norm_ref(normed, qdtype), rtol=1e-5, atol=0)
    _assert_near(output, _quant(normed.float(), scales, qdtype))
    assert torch.equal(residual, total)


@pytest.mark.parametrize("transposed", [False, True])
def test_rms_norm_per_block_quant(transposed: bool) -> None:
    tokens, group = 7, 128
    x = (torch.randn(tokens, H) / H).to(torch.bfloat16)
    weight = torch.normal(1.0, 0.1, (H,)).to(torch.bfloat16)
    normed, _ = _rms(x, weight)
    output = torch.empty(x.shape, dtype=FP8)
    groups = H // group
    # _custom_ops.rms_norm_per_block_quant: the transposed scales as a [T, G] view.
    scales = torch.empty(groups, tokens).t() if transposed else torch.empty(tokens, groups)
    torch.ops._C.rms_norm_per_block_quant(
        output, x, weight, scales, EPS, None, None, group, transposed
    )
    want = _block_norm_ref(normed, group, FP8, False)
    torch.testing.assert_close(scales, want, rtol=1e-5, atol=0)
    _assert_near(output, _quant(normed.float(), _expand(scales, group)))


def test_silu_and_mul_quants() -> None:
    tokens, d = 7, 128
    x = torch.randn(tokens, 2 * d).to(torch.bfloat16)
    result, scale = torch.empty(tokens, d, dtype=FP8), torch.tensor([0.5])
    torch.ops._C.silu_and_mul_quant(result, x, scale)  # fused_act_quant.py
    _assert_near(result, _quant(references.silu_and_mul_values(x), scale), fraction=0.02)
    x = (torch.randn(16, 2 * H) / H).to(torch.bfloat16)
    output, scales = torch.empty(16, H, dtype=FP8), torch.empty(16, H // 64)
    torch.ops._C.silu_and_mul_per_block_quant(output, x, scales, 64, None, False)
    v, want = _silu_block_ref(x, 64, FP8)
    torch.testing.assert_close(scales, want, rtol=1e-5, atol=0)
    _assert_near(output, _divide(v, _expand(scales, 64), FP8))


def test_apply_repetition_penalties_() -> None:
    g = torch.Generator().manual_seed(8)
    logits = (3 * torch.randn(8, 32000, generator=g)).to(torch.bfloat16)
    prompt_mask = torch.rand(8, 32000, generator=g) < 0.1
    output_mask = torch.rand(8, 32000, generator=g) < 0.05
    penalties = (0.5 + 1.5 * torch.rand(8, generator=g)).to(torch.bfloat16)
    want = _vllm_torch_form(logits, prompt_mask, output_mask, penalties)
    torch.ops._C.apply_repetition_penalties_(logits, prompt_mask, output_mask, penalties)
    assert torch.equal(logits, want)


# MoE (_moe_C), as vllm/_custom_ops.py's XPU branches call it.

TOKENS = 33


def test_topk_softmax_and_sigmoid() -> None:
    g = torch.Generator().manual_seed(0)
    gating_output = (2 * torch.randn(TOKENS, 128, generator=g)).to(torch.bfloat16)
    bias = torch.randn(128, generator=g) * 0.3
    topk_weights = torch.empty(TOKENS, 8)
    topk_ids = torch.empty(TOKENS, 8, dtype=torch.int32)
    token_expert_indices = torch.empty(TOKENS, 8, dtype=torch.int32)
    sources = torch.arange(8)[None, :] * TOKENS + torch.arange(TOKENS)[:, None]
    torch.ops._moe_C.topk_softmax(
        topk_weights, topk_ids, token_expert_indices, gating_output, True, None, None
    )
    assert_routes((topk_weights, topk_ids), gating_output, 8, renormalize=True)
    assert torch.equal(token_expert_indices, sources.int())
    is_padding = torch.zeros(TOKENS, dtype=torch.bool)
    is_padding[3] = True
    torch.ops._moe_C.topk_sigmoid(
        topk_weights, topk_ids, token_expert_indices, gating_output, True, bias, 2.5, is_padding
    )
    real = ~is_padding
    assert_routes(
        (topk_weights[real], topk_ids[real]),
        gating_output[real],
        8,
        scoring="sigmoid",
        bias=bias,
        renormalize=True,
        routed_scaling_factor=2.5,
    )
    assert (topk_weights[3] == 0).all() and (topk_ids[3] == -1).all()


def test_grouped_topk() -> None:
    g = torch.Generator().manual_seed(0)
    scores = (2 * torch.randn(TOKENS, 256, generator=g)).to(torch.bfloat16)
    bias = (torch.randn(256, generator=g) * 0.3).to(torch.bfloat16)
    got = torch.ops._moe_C.grouped_topk(scores, 8, 4, 8, True, 2.5, bias, 1)
    assert_routes(
        got,
        scores,
        8,
        scoring="sigmoid",
        bias=bias,
        renormalize=True,
        num_expert_group=8,
        topk_group=4,
        group_scoring="top2_sum",
        routed_scaling_factor=2.5,
    )


def test_moe_align_block_size_and_moe_sum() -> None:
    topk_ids, num_experts, block_size = _ids(20, 4, 64), 64, 16
    size = topk_ids.numel() + num_experts * (block_size - 1)
    sorted_ids = torch.empty(size, dtype=torch.int32)
    expert_ids = torch.empty(-(-size // block_size), dtype=torch.int32)
    num_tokens_post_pad = torch.empty(1, dtype=torch.int32)
    torch.ops._moe_C.moe_align_block_size(
        topk_ids, num_experts, block_size, sorted_ids, expert_ids, num_tokens_post_pad, None
    )
    runs, blocks, total = references.moe_align_block_size(topk_ids, num_experts, block_size)
    assert int(num_tokens_post_pad[0]) == total
    assert expert_ids[: len(blocks)].tolist() == blocks
    at = 0
    for run in runs:  # per expert, as sets (the slot order within an expert is free)
        padded = -(-len(run) // block_size) * block_size
        assert set(sorted_ids[at : at + padded].tolist()) - {topk_ids.numel()} == set(run)
        at += padded
    x = torch.randn(7, 3, 96, dtype=torch.bfloat16)
    output = torch.empty(7, 96, dtype=torch.bfloat16)
    ids = torch.tensor([[0, 1, -1]] * 7, dtype=torch.int32)
    expert_map = torch.tensor([0, -1], dtype=torch.int32)
    torch.ops._moe_C.moe_sum(x, output, ids, expert_map)
    torch.testing.assert_close(output, references.moe_sum(x, ids, expert_map).bfloat16())


# The paged KV cache (_C_cache_ops), fp8 caches as vLLM allocates them (uint8).


def test_reshape_and_cache_both_layouts() -> None:
    tokens, heads, head_size, block_size, blocks = 8, 2, 128, 16, 3
    key = torch.randn(tokens + 2, heads, head_size).to(torch.bfloat16)  # 2 padded tokens
    value = torch.randn(tokens + 2, heads, head_size).to(torch.bfloat16)
    slot_mapping = torch.randperm(blocks * block_size)[:tokens]
    slot_mapping[3] = -1
    k_scale, v_scale = torch.tensor(0.05), torch.tensor(0.03)
    key_cache = torch.zeros(blocks, block_size, heads, head_size, dtype=torch.uint8)
    value_cache = torch.zeros_like(key_cache)
    torch.ops._C_cache_ops.reshape_and_cache_flash(
        key, value, key_cache, value_cache, slot_mapping, "fp8", k_scale, v_scale
    )
    for cache, rows, scale in ((key_cache, key, k_scale), (value_cache, value, v_scale)):
        empty = torch.zeros(blocks * block_size, heads, head_size, dtype=FP8)
        want = references.paged_store(empty, rows[:tokens], slot_mapping, scale)
        assert torch.equal(cache.flatten(0, 1), want.view(torch.uint8))
    x = 8  # the split layout: key [blocks, heads, head_size / x, block_size, x]
    key_cache = torch.zeros(blocks, heads, head_size // x, block_size, x, dtype=torch.bfloat16)
    value_cache = torch.zeros(blocks, heads, head_size, block_size, dtype=torch.bfloat16)
    torch.ops._C_cache_ops.reshape_and_cache(
        key, value, key_cache, value_cache, slot_mapping, "auto", k_scale, v_scale
    )
    flat_k = key_cache.permute(0, 3, 1, 2, 4).reshape(-1, heads, head_size)
    flat_v = value_cache.permute(0, 3, 1, 2).reshape(-1, heads, head_size)
    empty = torch.zeros_like(flat_k)
    assert torch.equal(flat_k, references.paged_store(empty, key[:tokens], slot_mapping))
    assert torch.equal(flat_v, references.paged_store(empty, value[:tokens], slot_mapping))


def test_concat_and_cache_mla() -> None:
    tokens, rank, pe_dim, block_size, blocks = 5, 512, 64, 16, 2
    kv_c = torch.randn(tokens, rank).to(torch.float16)
    k_pe = torch.randn(tokens, pe_dim).to(torch.float16)
    kv_cache = torch.zeros(blocks, block_size, rank + pe_dim, dtype=torch.uint8)
    scale = torch.tensor([0.05])
    slot_mapping = torch.tensor([4, -1, 31, 0, 17])
    want = references.paged_store(
        kv_cache.view(FP8).flatten(0, 1).clone(), torch.cat([kv_c, k_pe], -1), slot_mapping, scale
    )
    torch.ops._C_cache_ops.concat_and_cache_mla(kv_c, k_pe, kv_cache, slot_mapping, "fp8", scale)
    assert torch.equal(kv_cache.flatten(0, 1), want.view(torch.uint8))


def test_gather_caches() -> None:
    block_size, entry, num_blocks, batch = 16, 576, 40, 3
    values = torch.randn(num_blocks, block_size, entry)
    src_cache = values.to(FP8).view(torch.uint8)
    block_table = torch.randperm(num_blocks)[: batch * 6].view(batch, 6).int()
    cu_seq_lens = torch.tensor([0, 17, 17, 52], dtype=torch.int32)
    seq_starts = torch.tensor([3, 0, 40], dtype=torch.int32)
    token_to_seq = torch.repeat_interleave(
        torch.arange(batch, dtype=torch.int32), (cu_seq_lens[1:] - cu_seq_lens[:-1]).long()
    )
    num_tokens = int(cu_seq_lens[-1])
    scale = torch.tensor([0.5])
    dst = torch.zeros(num_tokens, entry, dtype=torch.bfloat16)
    torch.ops._C_cache_ops.gather_and_maybe_dequant_cache(
        src_cache, dst, block_table, cu_seq_lens, token_to_seq, num_tokens, "fp8", scale, seq_starts
    )
    want = references.paged_gather(
        src_cache.view(FP8), torch.zeros_like(dst), block_table, cu_seq_lens, seq_starts, scale
    )
    assert torch.equal(dst, want)
    # gather_cache copies (the cache's dtype); seq_starts counts whole blocks (33: block 2).
    copy = torch.zeros(num_tokens, entry, dtype=torch.uint8)
    torch.ops._C_cache_ops.gather_cache(
        src_cache, copy, block_table, cu_seq_lens, batch, seq_starts
    )
    block_starts = seq_starts - seq_starts % block_size
    want = references.paged_gather(
        src_cache, torch.zeros_like(copy), block_table, cu_seq_lens, block_starts
    )
    assert torch.equal(copy, want)
