"""sycl_kernels.integrations.diffusers: swaps the kernels into built diffusers models, and back.

patch(model) gives each module it can serve a subclass whose forward calls the kernel
(the instance's class is swapped, nothing else changes); unpatch(model) swaps the
original classes back, so outputs are bit-identical to an unpatched model again.
Served: Timesteps (timestep_embedding), GEGLU and SwiGLU (gelu_and_mul / silu_and_mul
on the second half), diffusers' RMSNorm and torch.nn.RMSNorm (rmsnorm; Flux's q/k
norms are torch.nn.RMSNorm). Only exact classes are patched: a subclass may have its
own forward. A call the kernels cannot take (another device or dtype, a non-unit last
stride, a gradient through Timesteps) runs the original forward.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from diffusers.models.activations import GEGLU, SwiGLU
from diffusers.models.embeddings import Timesteps
from diffusers.models.normalization import RMSNorm

from ..ops import gelu_and_mul, rmsnorm, silu_and_mul, timestep_embedding

__all__ = ["patch", "unpatch"]

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _on_sycl_device(x: torch.Tensor) -> bool:
    return x.device.type in ("cpu", "xpu")


def _kernel_takes(x: torch.Tensor) -> bool:
    return _on_sycl_device(x) and x.dtype in _DTYPES


def _real(value: object) -> bool:
    # The ops take int and float scalars, not bools or NaN.
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isnan(value)


def _f32(value: float) -> float:
    return torch.tensor(value, dtype=torch.float32).item()


class _Served:
    """What patch() reads off each patched class: the op it calls, and why a module's
    configuration is one the op would compute differently (None: patch it)."""

    op: ClassVar[str]
    problem: ClassVar[Callable[[Any], str | None]]


def _eps_problem(eps: object) -> str | None:
    if not _real(eps) or eps < 0:
        return f"eps={eps!r} is not a non-negative number"
    return None


class SyclTimesteps(Timesteps, _Served):
    """Timesteps on timestep_embedding: diffusers' get_timestep_embedding formula, each
    step rounded to float32 as torch does; exp, sin and cos are the kernel's, so results
    differ from torch's by a few ulps of the sine's argument (scale * t * freq)."""

    op: ClassVar[str] = "timestep_embedding"

    @staticmethod
    def problem(module: Timesteps) -> str | None:
        dim, shift, scale = module.num_channels, module.downscale_freq_shift, module.scale
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            return f"num_channels={dim!r} is not a positive int"
        if not _real(shift) or not _real(scale):
            return f"downscale_freq_shift={shift!r} and scale={scale!r} must be real numbers"
        # diffusers divides by float32(half - shift), the difference taken in double; the
        # kernel subtracts in float32. Float64 arithmetic on float32 values then rounded
        # to float32 is the float32 operation, so this compares the two denominators.
        half = dim // 2
        if _f32(half - float(shift)) != _f32(half - _f32(float(shift))):
            return (
                f"downscale_freq_shift={shift!r}: float32({half} - shift) differs from the "
                "kernel's float32 subtraction"
            )
        return None

    def forward(self, timesteps: torch.Tensor) -> torch.Tensor:
        # Any real dtype is converted to float32, as diffusers does. The kernel has no
        # backward: a differentiable call keeps the torch code.
        if not _on_sycl_device(timesteps) or (timesteps.requires_grad and torch.is_grad_enabled()):
            return super().forward(timesteps)
        return timestep_embedding(
            timesteps,
            self.num_channels,
            bool(self.flip_sin_to_cos),  # diffusers tests its truthiness
            float(self.downscale_freq_shift),
            float(self.scale),
        )


class SyclGEGLU(GEGLU, _Served):
    """GEGLU on gelu_and_mul: proj, then hidden * gelu(gate) with the erf gelu on the
    second half. In fp16/bf16 the kernel rounds once where torch rounds gelu(gate) and
    then the product (at most 1 ulp apart)."""

    op: ClassVar[str] = "gelu_and_mul"

    @staticmethod
    def problem(module: GEGLU) -> str | None:
        return None

    def forward(self, hidden_states: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        # Extra arguments are deprecated; diffusers' forward warns about them.
        if args or kwargs or not _kernel_takes(hidden_states):
            return super().forward(hidden_states, *args, **kwargs)
        return gelu_and_mul(self.proj(hidden_states), gate_first=False)


class SyclSwiGLU(SwiGLU, _Served):
    """SwiGLU on silu_and_mul: proj, then hidden * silu(gate) on the second half (one
    rounding in fp16/bf16, as SyclGEGLU)."""

    op: ClassVar[str] = "silu_and_mul"

    @staticmethod
    def problem(module: SwiGLU) -> str | None:
        if type(module.activation) is not torch.nn.SiLU:
            return f"activation is {type(module.activation).__name__}, not SiLU"
        return None

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if not _kernel_takes(hidden_states):
            return super().forward(hidden_states)
        return silu_and_mul(self.proj(hidden_states), gate_first=False)


class SyclRMSNorm(RMSNorm, _Served):
    """diffusers' RMSNorm on rmsnorm, with its dtype rules kept exactly: x * rsqrt(mean(x^2)
    + eps) in float32; no weight: rounded to x's dtype; a float32 weight: the float32
    product (float32 even for fp16/bf16 x); an fp16/bf16 weight: rounded to the weight's
    dtype, then multiplied in it (two roundings, so the kernel normalizes without the
    weight and torch multiplies); then + bias."""

    op: ClassVar[str] = "rmsnorm"

    @staticmethod
    def problem(module: RMSNorm) -> str | None:
        if module.weight is not None and module.weight.dim() != 1:
            return (
                f"weight of shape {tuple(module.weight.shape)} scales more than the normalized dim"
            )
        return _eps_problem(module.eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        x, weight, eps = hidden_states, self.weight, float(self.eps)
        if (
            not _kernel_takes(x)
            or x.stride(-1) != 1
            or (weight is not None and weight.dtype not in _DTYPES)
        ):
            return super().forward(x)
        if weight is None:
            return rmsnorm(x, None, eps)
        if weight.dtype == torch.float32:
            out = rmsnorm(x.float(), weight, eps)
        else:
            # The float32 normalized x converted to the weight's dtype, as diffusers does;
            # an fp16 x under a bf16 weight would round twice through fp16, so goes float32.
            x = x if x.dtype in (torch.float32, weight.dtype) else x.float()
            out = rmsnorm(x, None, eps).to(weight.dtype) * weight
        return out if self.bias is None else out + self.bias


class SyclTorchRMSNorm(torch.nn.RMSNorm, _Served):
    """torch.nn.RMSNorm on rmsnorm: torch (2.13, CPU) computes x * rsqrt(mean(x^2) + eps)
    * weight in float32 and rounds once to x's dtype, whatever the weight's dtype, which
    is the kernel's formula with the weight in x's dtype or float32."""

    op: ClassVar[str] = "rmsnorm"

    @staticmethod
    def problem(module: torch.nn.RMSNorm) -> str | None:
        if len(module.normalized_shape) != 1:
            return f"normalized_shape={module.normalized_shape} spans more than the last dim"
        return None if module.eps is None else _eps_problem(module.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight
        if (
            not _kernel_takes(x)
            or x.stride(-1) != 1
            # torch raises on a size mismatch, and the kernel without a weight would not
            or x.shape[-1] != self.normalized_shape[0]
            or (weight is not None and weight.dtype not in _DTYPES)
        ):
            return super().forward(x)
        # Documented as x's dtype's epsilon, but torch takes its math type's: float32's.
        eps = torch.finfo(torch.float32).eps if self.eps is None else float(self.eps)
        if weight is not None and weight.dtype != x.dtype:
            weight = weight.float()
        return rmsnorm(x, weight, eps)


_PATCHES: dict[type[torch.nn.Module], type[_Served]] = {
    cls.__bases__[0]: cls
    for cls in (SyclTimesteps, SyclGEGLU, SyclSwiGLU, SyclRMSNorm, SyclTorchRMSNorm)
}
_ORIGINALS = {patched: original for original, patched in _PATCHES.items()}


def _class_name(cls: type) -> str:
    return "torch.nn.RMSNorm" if cls is torch.nn.RMSNorm else cls.__name__


def patch(model: torch.nn.Module) -> list[str]:
    """Swaps the kernels into `model` (and its submodules) in place. Returns one line per
    module of a served class: "name: Class -> op" when patched, "name: Class unpatched:
    reason" when its configuration is one the kernel would compute differently. Modules
    patched already are skipped."""
    report = []
    for name, module in model.named_modules():
        patched = _PATCHES.get(type(module))
        if patched is None:
            continue
        label = f"{name or '(model)'}: {_class_name(type(module))}"
        problem = patched.problem(module)
        if problem is None:
            module.__class__ = patched
            report.append(f"{label} -> {patched.op}")
        else:
            report.append(f"{label} unpatched: {problem}")
    return report


def unpatch(model: torch.nn.Module) -> None:
    """Restores the original class of every module patch() swapped, in place."""
    for module in model.modules():
        original = _ORIGINALS.get(type(module))
        if original is not None:
            module.__class__ = original
