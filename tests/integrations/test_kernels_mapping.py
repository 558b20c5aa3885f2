"""register_kernel_mapping(): the package's layers under Hugging Face's `kernels.kernelize`,
on tiny random models (no Hub)."""

from __future__ import annotations

import collections
import subprocess
import sys
from collections.abc import Iterator

import pytest
import torch
from sycl_kernels.integrations import transformers as patcher
from torch import nn

import kernels
from kernels import Mode, kernelize
from tests.integrations.test_transformers import (
    _assert_logits_close,
    _greedy,
    _logits,
    count_kernel_calls,
    tiny_model,
)

OPS = ("rmsnorm", "gemma_rmsnorm", "apply_rope")
NUM_LAYERS = 2  # test_transformers.TINY
# Norm calls per forward: two per decoder layer and the final one; Qwen3 adds q and k norms.
NORM_CALLS = {"llama": 2 * NUM_LAYERS + 1, "qwen3": 4 * NUM_LAYERS + 1}


@pytest.fixture
def mapping() -> Iterator[None]:
    """A scope for kernels' global mapping: what a test registers is gone after it."""
    with kernels.use_kernel_mapping({}, inherit_mapping=False):
        yield


@pytest.fixture
def kernel_calls(monkeypatch: pytest.MonkeyPatch) -> collections.Counter:
    return count_kernel_calls(monkeypatch, OPS)


def _kernelized(model: nn.Module) -> nn.Module:
    return kernelize(model, device="cpu", mode=Mode.INFERENCE)


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
def test_kernelized_model_matches_hugging_face(
    model_type: str, mapping: None, kernel_calls: collections.Counter
) -> None:
    model = tiny_model(model_type)
    ids = torch.randint(3, 512, (2, 12))
    logits, tokens = _logits(model, ids), _greedy(model, ids)

    assert patcher.register_kernel_mapping() == ["RMSNorm", "rotary_pos_emb"]
    _kernelized(model)
    got = _logits(model, ids)
    assert kernel_calls == {"rmsnorm": NORM_CALLS[model_type], "apply_rope": NUM_LAYERS}
    _assert_logits_close(got, logits)
    assert torch.equal(_greedy(model, ids), tokens)


def test_half_precision_runs_hugging_face_code(
    mapping: None, kernel_calls: collections.Counter
) -> None:
    # HF's norm and rotary round after each op in bf16; the kernels would round once.
    model = tiny_model("llama", torch.bfloat16)
    ids = torch.randint(3, 512, (2, 12))
    logits = _logits(model, ids)
    patcher.register_kernel_mapping()
    _kernelized(model)
    assert torch.equal(_logits(model, ids), logits)
    assert not kernel_calls


def test_registering_twice_is_harmless(mapping: None, kernel_calls: collections.Counter) -> None:
    model = tiny_model("llama")
    ids = torch.randint(3, 512, (1, 8))
    patcher.register_kernel_mapping()
    _kernelized(model)
    once = _logits(model, ids)
    calls = dict(kernel_calls)

    patcher.register_kernel_mapping()
    _kernelized(model)
    assert torch.equal(_logits(model, ids), once)
    assert kernel_calls == {name: 2 * n for name, n in calls.items()}
    assert model.model.norm.__dict__["_kernel_repo"] == patcher.SyclLayerRepository("RMSNorm")


def test_without_kernels_it_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kernels", None)  # import kernels raises ImportError
    with pytest.raises(ImportError, match="`kernels` package"):
        patcher.register_kernel_mapping()


def test_importing_the_package_registers_nothing() -> None:
    script = (
        "import sycl_kernels, sycl_kernels.integrations.transformers\n"
        "from kernels._internals.layer.globals import _KERNEL_MAPPING\n"
        "print(sorted(_KERNEL_MAPPING.get()))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=True
    )
    assert result.stdout.strip() == "[]"


def test_patch_leaves_kernelized_modules_alone(mapping: None) -> None:
    model = tiny_model("llama")
    patcher.register_kernel_mapping()
    _kernelized(model)
    report = patcher.patch(model)
    try:
        assert "model.norm: unpatched, the instance has its own forward already" in "\n".join(
            report
        )
    finally:
        patcher.unpatch(model)
    assert model.model.norm.__dict__["_kernel_repo"] == patcher.SyclLayerRepository("RMSNorm")
