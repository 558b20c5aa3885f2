"""sycl_kernels.ops: the public ops, one module per kernel family.

The imports below are written out, so readers and static tools follow each public
name to its definition; `python -m sycl_kernels new-op` rewrites them from the
modules' @op functions (sycl_kernels._new_op.write_exports).
"""

from .activation import (
    act_and_mul,
    fatrelu_and_mul,
    gelu_and_mul,
    gelu_quick,
    gelu_tanh,
    gelu_tanh_and_mul,
    silu_and_mul,
    swigluoai_and_mul,
)
from .diffusion import timestep_embedding
from .kv_cache import concat_and_cache_mla, gather_cache, store_kv_cache
from .moe import moe_align_block_size, moe_sum
from .norm import fused_add_rmsnorm, gemma_fused_add_rmsnorm, gemma_rmsnorm, qknorm, rmsnorm
from .penalties import apply_penalties, repetition_penalty_by_ids, top_k_mask_logits
from .quant import (
    dynamic_quantize,
    dynamic_quantize_per_tensor,
    quantize,
    rmsnorm_dynamic_quantize,
    rmsnorm_quantize,
    silu_and_mul_dynamic_quantize,
    silu_and_mul_quantize,
)
from .rope import apply_rope, qknorm_rope
from .routing import moe_topk
from .sampling import sample_from_probs, top_k_renorm_probs, top_p_renorm_probs

__all__ = [
    "act_and_mul",
    "apply_penalties",
    "apply_rope",
    "concat_and_cache_mla",
    "dynamic_quantize",
    "dynamic_quantize_per_tensor",
    "fatrelu_and_mul",
    "fused_add_rmsnorm",
    "gather_cache",
    "gelu_and_mul",
    "gelu_quick",
    "gelu_tanh",
    "gelu_tanh_and_mul",
    "gemma_fused_add_rmsnorm",
    "gemma_rmsnorm",
    "moe_align_block_size",
    "moe_sum",
    "moe_topk",
    "qknorm",
    "qknorm_rope",
    "quantize",
    "repetition_penalty_by_ids",
    "rmsnorm",
    "rmsnorm_dynamic_quantize",
    "rmsnorm_quantize",
    "sample_from_probs",
    "silu_and_mul",
    "silu_and_mul_dynamic_quantize",
    "silu_and_mul_quantize",
    "store_kv_cache",
    "swigluoai_and_mul",
    "timestep_embedding",
    "top_k_mask_logits",
    "top_k_renorm_probs",
    "top_p_renorm_probs",
]
