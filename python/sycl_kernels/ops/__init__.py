"""sycl_kernels.ops: the public ops, one module per kernel family.

The imports below are written out, so readers and static tools follow each public
name to its definition; `python -m sycl_kernels new-op` rewrites them from the
modules' @op functions (sycl_kernels._new_op.write_exports).
"""

from .activation import act_and_mul, gelu_and_mul, gelu_tanh_and_mul, silu_and_mul
from .diffusion import timestep_embedding
from .norm import fused_add_rmsnorm, gemma_fused_add_rmsnorm, gemma_rmsnorm, qknorm, rmsnorm
from .rope import apply_rope, qknorm_rope

__all__ = [
    "act_and_mul",
    "apply_rope",
    "fused_add_rmsnorm",
    "gelu_and_mul",
    "gelu_tanh_and_mul",
    "gemma_fused_add_rmsnorm",
    "gemma_rmsnorm",
    "qknorm",
    "qknorm_rope",
    "rmsnorm",
    "silu_and_mul",
    "timestep_embedding",
]
