"""sycl_kernels.specs.diffusion: specs of the diffusion kernels (kernels/diffusion/)."""

from __future__ import annotations

import functools

from .._dtypes import BY_NAME
from .spec import KernelSpec, Param, row_group_size
from .variants import manifest_op


@manifest_op("timestep_embedding")
@functools.cache
def timestep_embedding_spec(dim: int) -> KernelSpec:
    # No vector accesses, so one tuning serves both device classes.
    threads = row_group_size(BY_NAME["fp32"], max(1, dim // 2), "gpu")
    return KernelSpec(
        name=f"timestep_embedding_fp32_d{dim}",
        header="diffusion/timestep_embedding.hpp",
        function="sycl_kernels::timestep_embedding",
        template_args=(str(dim), str(threads)),
        params=(
            Param("timesteps", "const float*"),
            Param("out", "float*"),
            Param("flip_sin_to_cos", "int32_t"),
            Param("downscale_freq_shift", "float"),
            Param("scale", "float"),
            Param("max_period", "float"),
        ),
        group_size=threads,
    )
