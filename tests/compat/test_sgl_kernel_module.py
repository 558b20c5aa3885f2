"""sycl_kernels.compat.sgl_kernel.install(): ``import sgl_kernel`` and
``torch.ops.sgl_kernel.rotary_embedding`` for unmodified SGLang code.

Each test runs its script in a fresh interpreter (this one's environment, so the same
kernel cache), so that this session's sys.modules and torch.ops keep no sgl_kernel.
The scripts make SGLang's XPU calls as its layer code (python/sglang/srt/layers/,
SGLang 0.5.23) writes them and save what they computed; the float64 references are
taken here. The functions `import sgl_kernel` gives are compat.sgl_kernel's own
(checked by identity), whose numerics test_sgl_kernel*.py check call by call.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from tests import references

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sgl_kernel") is not None,
    reason="a real sgl_kernel is installed: install() leaves it in place",
)


def _run(script: str, tmp_path: Path, pythonpath: tuple[str, ...] = ()) -> dict:
    """Runs script (sys.argv[1]: where it torch.saves its results) in a fresh interpreter
    at the repository root; returns what it saved."""
    out = tmp_path / "results.pt"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*pythonpath, env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return torch.load(out)


NOTHING_WITHOUT_INSTALL = """
import importlib.util, sys
import torch
import sycl_kernels
import sycl_kernels.compat.sgl_kernel
torch.save(
    {
        "in sys.modules": "sgl_kernel" in sys.modules,
        "found": importlib.util.find_spec("sgl_kernel") is not None,
        "op": hasattr(torch.ops.sgl_kernel, "rotary_embedding"),
    },
    sys.argv[1],
)
"""


def test_importing_the_package_installs_nothing(tmp_path: Path) -> None:
    got = _run(NOTHING_WITHOUT_INSTALL, tmp_path)
    assert got == {"in sys.modules": False, "found": False, "op": False}


# SGLang's XPU imports from sgl_kernel, line by line (python/sglang/...).
SGLANG_IMPORTS = """
from sgl_kernel import fused_add_rmsnorm, gemma_fused_add_rmsnorm, gemma_rmsnorm, rmsnorm
from sgl_kernel import gelu_and_mul, gelu_tanh_and_mul, silu_and_mul
from sgl_kernel import fused_qk_rope_with_cos_sin_cache_inplace
from sgl_kernel import topk_sigmoid, topk_softmax
from sgl_kernel import moe_fused_gate
from sgl_kernel import biased_topk
from sgl_kernel import (
    min_p_sampling_from_probs,
    top_k_renorm_prob,
    top_k_top_p_sampling_from_probs,
    top_p_renorm_prob,
)
from sgl_kernel import store_cache_xpu
from sgl_kernel import sgl_per_tensor_quant_fp8, sgl_per_token_quant_fp8
from sgl_kernel import moe_sum_reduce, silu_and_mul
"""

INSTALL = f"""
import importlib.util, sys, warnings
import torch
from sycl_kernels.compat import sgl_kernel as compat

with warnings.catch_warnings():
    warnings.simplefilter("error")
    first, second = compat.install(), compat.install()
import sgl_kernel
{SGLANG_IMPORTS}
imported = {{n: v for n, v in globals().items() if n in compat.__all__}}
op = torch.ops.sgl_kernel.rotary_embedding.default
torch.save(
    {{
        "installed": (first, second),
        "module": sgl_kernel.__name__,
        "same in sys.modules": sys.modules["sgl_kernel"] is sgl_kernel,
        "spec": importlib.util.find_spec("sgl_kernel") is not None,
        "names": sorted(n for n in dir(sgl_kernel) if not n.startswith("_")),
        "all": sorted(compat.__all__),
        "imported": {{n: v is getattr(compat, n) for n, v in imported.items()}},
        "schema": str(op._schema),
        "keys": [
            torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key) for key in ("CPU", "XPU")
        ],
    }},
    sys.argv[1],
)
"""


def test_install_makes_sgl_kernel_importable(tmp_path: Path) -> None:
    got = _run(INSTALL, tmp_path)
    assert got["installed"] == (True, True)  # no warning either time
    assert got["module"] == "sycl_kernels.compat._sgl_kernel_module"
    assert got["same in sys.modules"] and got["spec"]
    assert got["names"] == got["all"]
    imports = SGLANG_IMPORTS.replace("(", "").replace(")", "").split("from sgl_kernel import")
    names = {n.strip() for line in imports for n in line.split(",") if n.strip()}
    assert got["imported"] == dict.fromkeys(names, True)
    assert got["schema"] == (
        "sgl_kernel::rotary_embedding(Tensor positions, Tensor query, Tensor key, "
        "int head_size, Tensor cos_sin_cache, bool is_neox) -> (Tensor, Tensor)"
    )
    assert got["keys"] == [True, True]


# SGLang's XPU calls: the bodies of RMSNorm.forward_xpu, GemmaRMSNorm.forward_xpu
# (layernorm.py), SiluAndMul.forward_xpu (activation.py) and RotaryEmbedding.forward_xpu
# (rotary_embedding/base.py) as they are, `self` a namespace of the layer's attributes.
SGLANG_CALLS = """
import sys
from types import SimpleNamespace
import torch
from sycl_kernels.compat import sgl_kernel as compat
from torch._subclasses.fake_tensor import FakeTensorMode

compat.install()
from sgl_kernel import fused_add_rmsnorm, gemma_fused_add_rmsnorm, gemma_rmsnorm, rmsnorm
from sgl_kernel import silu_and_mul
from sgl_kernel import fused_qk_rope_with_cos_sin_cache_inplace

g = torch.Generator().manual_seed(0)
saved = {}


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g).to(dtype)


for dtype in (torch.float32, torch.bfloat16):
    x, residual = randn(5, 2048, dtype=dtype), randn(5, 2048, dtype=dtype)
    self = SimpleNamespace(weight=randn(2048), variance_epsilon=1e-6, eps=1e-6)
    self.weight = (1 + 0.5 * self.weight).to(dtype)
    inputs = (x.clone(), residual.clone(), self.weight)
    out = rmsnorm(x, self.weight.data, self.variance_epsilon)
    saved["rmsnorm", dtype] = inputs, out
    fused_add_rmsnorm(x, residual, self.weight.data, self.variance_epsilon)
    saved["fused_add_rmsnorm", dtype] = inputs, (x, residual)
    x, residual = inputs[0].clone(), inputs[1].clone()
    out = gemma_rmsnorm(x, self.weight.data, self.eps)
    saved["gemma_rmsnorm", dtype] = inputs, out
    gemma_fused_add_rmsnorm(x, residual, self.weight.data, self.eps)
    saved["gemma_fused_add_rmsnorm", dtype] = inputs, (x, residual)

    x = randn(5, 2 * 2048, dtype=dtype)
    d = x.shape[-1] // 2
    output_shape = x.shape[:-1] + (d,)
    out = torch.empty(output_shape, dtype=x.dtype, device=x.device)
    silu_and_mul(x, out)
    saved["silu_and_mul", dtype] = x, out


def forward_xpu(self, positions, query, key):
    # Fused_qk_rope only supports aligned head_size
    if fused_qk_rope_with_cos_sin_cache_inplace is not None and self.head_size in [
        128,
        256,
        512,
    ]:
        num_tokens = positions.size(0)
        q_rope = query.view(num_tokens, -1, self.head_size)
        k_rope = key.view(num_tokens, -1, self.head_size)
        if self.head_size != self.rotary_dim:
            q_rope = q_rope[..., : self.rotary_dim]
            k_rope = k_rope[..., : self.rotary_dim]
        fused_qk_rope_with_cos_sin_cache_inplace(
            q_rope,
            k_rope,
            self.cos_sin_cache,
            positions,
            self.rotary_dim,
            self.is_neox_style,
        )
        return query, key
    assert self.head_size == self.rotary_dim  # else SGLang's forward_native
    # self._match_cos_sin_cache_dtype(query):
    self.cos_sin_cache = self.cos_sin_cache.to(query.device, dtype=query.dtype)
    q_2d = query.dim() == 2
    k_2d = key.dim() == 2
    if q_2d:
        query = query.view(query.shape[0], -1, self.head_size)
    if k_2d:
        key = key.view(key.shape[0], -1, self.head_size)
    q_out, k_out = torch.ops.sgl_kernel.rotary_embedding(
        positions,
        query,
        key,
        self.head_size,
        self.cos_sin_cache,
        self.is_neox_style,
    )
    if q_2d:
        q_out = q_out.view(q_out.shape[0], -1)
    if k_2d:
        k_out = k_out.view(k_out.shape[0], -1)
    return q_out, k_out


cache = {r: torch.load(sys.argv[2])[r] for r in (64, 128)}
positions = torch.tensor([0, 7, 4095, 1, 300])
for head_size, rotary_dim in ((128, 128), (128, 64), (64, 64)):
    for dtype in (torch.float32, torch.bfloat16):
        for is_neox in (True, False):
            self = SimpleNamespace(
                head_size=head_size,
                rotary_dim=rotary_dim,
                cos_sin_cache=cache[rotary_dim],  # float32, as SGLang keeps it on XPU
                is_neox_style=is_neox,
            )
            query, key = randn(5, 4 * head_size, dtype=dtype), randn(5, 2 * head_size, dtype=dtype)
            inputs = query.clone(), key.clone()
            q_out, k_out = forward_xpu(self, positions, query, key)
            fused = head_size in (128, 256, 512)
            record = {"in place": (q_out is query, k_out is key)}
            record["inputs kept"] = torch.equal(query, inputs[0]) and torch.equal(key, inputs[1])
            if not fused:  # the op's fake kernel, on the tensors forward_xpu passed it
                mode = FakeTensorMode()
                args = positions, *(t.view(5, -1, head_size) for t in inputs), self.cos_sin_cache
                fakes = [mode.from_tensor(t) for t in args]
                with mode:
                    fake = torch.ops.sgl_kernel.rotary_embedding(
                        *fakes[:3], head_size, fakes[3], is_neox
                    )
                record["fake"] = [(tuple(t.shape), t.stride(), t.dtype) for t in fake]
            saved["rope", head_size, rotary_dim, dtype, is_neox] = inputs, (q_out, k_out), record

torch.save(saved, sys.argv[1])
"""

ROTARY = {r: references.rope_cache(4096, r) for r in (64, 128)}


@pytest.fixture(scope="module")
def sglang_calls(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp_path = tmp_path_factory.mktemp("sglang_calls")
    torch.save(ROTARY, tmp_path / "cache.pt")
    script = SGLANG_CALLS.replace("sys.argv[2]", repr(str(tmp_path / "cache.pt")))
    return _run(script, tmp_path)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_sglang_norm_and_activation_calls(sglang_calls: dict, dtype: torch.dtype) -> None:
    (x, residual, weight), out = sglang_calls["rmsnorm", dtype]
    references.assert_close(out, references.rmsnorm(x, weight, 1e-6))
    for name, gemma in (("fused_add_rmsnorm", False), ("gemma_fused_add_rmsnorm", True)):
        _, (x_out, residual_out) = sglang_calls[name, dtype]
        want_x, want_residual = references.fused_add_rmsnorm(x, residual, weight, 1e-6, gemma)
        references.assert_close(x_out, want_x)
        references.assert_close(residual_out, want_residual)
    _, out = sglang_calls["gemma_rmsnorm", dtype]
    references.assert_close(out, references.rmsnorm(x, weight, 1e-6, gemma=True))
    x, out = sglang_calls["silu_and_mul", dtype]
    references.assert_close(out, references.act_and_mul("silu_and_mul", x))


@pytest.mark.parametrize("is_neox", [True, False], ids=["neox", "gptj"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    ("head_size", "rotary_dim"), [(128, 128), (128, 64), (64, 64)], ids=lambda v: str(v)
)
def test_sglang_rotary_embedding_forward_xpu(
    sglang_calls: dict, head_size: int, rotary_dim: int, dtype: torch.dtype, is_neox: bool
) -> None:
    """head_size 128: fused_qk_rope_with_cos_sin_cache_inplace on [..., :rotary_dim]
    slices, in place; 64: torch.ops.sgl_kernel.rotary_embedding, new tensors."""
    (query, key), (q_out, k_out), record = sglang_calls[
        "rope", head_size, rotary_dim, dtype, is_neox
    ]
    positions = torch.tensor([0, 7, 4095, 1, 300])
    cache = ROTARY[rotary_dim]
    if head_size == 64:  # forward_xpu casts the cache to the query's dtype for the op
        cache = cache.to(dtype)
    for got, x in ((q_out, query), (k_out, key)):
        assert got.shape == x.shape and got.dtype == dtype
        want = references.rope(positions, x.view(5, -1, head_size), cache, is_neox)
        references.assert_close(got.view(5, -1, head_size), want)
    fused = head_size == 128
    assert record["in place"] == (fused, fused)
    assert record["inputs kept"] == (not fused)
    if not fused:
        heads = [(5, n, head_size) for n in (4, 2)]
        assert record["fake"] == [(s, (s[1] * head_size, head_size, 1), dtype) for s in heads]


# A real sgl_kernel stands first on the path (importable), or is imported already.
REAL_FIRST = """
import sys, warnings
import torch
{prelude}
from sycl_kernels.compat import sgl_kernel as compat

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    installed = compat.install()
import sgl_kernel
torch.save(
    {{
        "installed": installed,
        "real": getattr(sgl_kernel, "REAL", False),
        "warnings": [str(w.message) for w in caught],
        "op": hasattr(torch.ops.sgl_kernel, "rotary_embedding"),
    }},
    sys.argv[1],
)
"""


@pytest.mark.parametrize("imported", [False, True], ids=["importable", "imported"])
def test_install_leaves_a_real_sgl_kernel_alone(tmp_path: Path, imported: bool) -> None:
    (tmp_path / "site" / "sgl_kernel").mkdir(parents=True)
    (tmp_path / "site" / "sgl_kernel" / "__init__.py").write_text("REAL = True\n")
    script = REAL_FIRST.format(prelude="import sgl_kernel" if imported else "")
    got = _run(script, tmp_path, pythonpath=(str(tmp_path / "site"),))
    assert got["installed"] is False and got["real"] is True and got["op"] is False
    state = "imported" if imported else "installed"
    assert len(got["warnings"]) == 1
    assert f"an sgl_kernel is already {state}" in got["warnings"][0]
    assert str(tmp_path / "site" / "sgl_kernel" / "__init__.py") in got["warnings"][0]
