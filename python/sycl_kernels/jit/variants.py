"""sycl_kernels.jit.variants: the AOT variant manifest (kernels/variants.toml) turned into specs."""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .._dtypes import BY_NAME
from .activation import ACTIVATIONS, act_and_mul_spec
from .diffusion import timestep_embedding_spec
from .norm import fused_add_rmsnorm_spec, qknorm_spec, rmsnorm_spec
from .rope import qknorm_rope_spec, rope_spec
from .spec import KernelSpec

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def _act_and_mul_spec(activation: str, dtype: str, dim: int, tuned_for: str) -> KernelSpec:
    return act_and_mul_spec(activation, BY_NAME[dtype], dim, tuned_for)


def _rope_spec(
    dtype: str,
    head_dim: int,
    rotary_dim: int,
    style: str,
    positions: str,
    store_kv: bool,
    tuned_for: str,
    cache: str = "fp32",
) -> KernelSpec:
    """cache: "fp32", or "dtype" for a cos/sin cache in the rows' own dtype."""
    return rope_spec(
        BY_NAME[dtype],
        head_dim,
        rotary_dim,
        style == "neox",
        positions,
        store_kv,
        BY_NAME[dtype if cache == "dtype" else cache],
        tuned_for,
    )


def _qknorm_rope_spec(
    dtype: str,
    head_dim: int,
    style: str,
    positions: str,
    store_kv: bool,
    tuned_for: str,
    cache: str = "fp32",
    gemma: bool = False,
    rotary_dim: int | None = None,
) -> KernelSpec:
    """As _rope_spec; gemma: the (1 + weight) norm; rotary_dim: head_dim unless given."""
    return qknorm_rope_spec(
        BY_NAME[dtype],
        head_dim,
        head_dim if rotary_dim is None else rotary_dim,
        style == "neox",
        positions,
        store_kv,
        BY_NAME[dtype if cache == "dtype" else cache],
        tuned_for,
        gemma,
    )


# Op name in the manifest -> spec factory taking the manifest's keys as arguments.
SPEC_FACTORIES: dict[str, Callable[..., KernelSpec]] = {
    "rmsnorm": lambda dtype, hidden, tuned_for: rmsnorm_spec(BY_NAME[dtype], hidden, tuned_for),
    "gemma_rmsnorm": lambda dtype, hidden, tuned_for: rmsnorm_spec(
        BY_NAME[dtype], hidden, tuned_for, gemma=True
    ),
    "fused_add_rmsnorm": lambda dtype, hidden, tuned_for, rounded_sum=True: fused_add_rmsnorm_spec(
        BY_NAME[dtype], hidden, tuned_for, rounded_sum=rounded_sum
    ),
    "gemma_fused_add_rmsnorm": lambda dtype, hidden, tuned_for, rounded_sum=True: (
        fused_add_rmsnorm_spec(
            BY_NAME[dtype], hidden, tuned_for, gemma=True, rounded_sum=rounded_sum
        )
    ),
    "qknorm": lambda dtype, head_dim, tuned_for, gemma=False: qknorm_spec(
        BY_NAME[dtype], head_dim, tuned_for, gemma
    ),
    "rope": _rope_spec,
    "qknorm_rope": _qknorm_rope_spec,
    **{f"{act}_and_mul": functools.partial(_act_and_mul_spec, act) for act in ACTIVATIONS},
    "timestep_embedding": lambda dim: timestep_embedding_spec(dim),
}


@dataclass(frozen=True)
class Variant:
    op: str
    params: tuple[tuple[str, object], ...]
    spec: KernelSpec


def spec_for(op: str, params: dict[str, object]) -> KernelSpec:
    try:
        factory = SPEC_FACTORIES[op]
    except KeyError:
        raise ValueError(f"unknown op {op!r}; known: {', '.join(SPEC_FACTORIES)}") from None
    return factory(**params)


def read_manifest(path: Path) -> list[Variant]:
    """Every variant `path` lists: the product of each op's value lists.

    ValueError naming the file and the op when it is not a manifest.
    """
    try:
        with path.open("rb") as f:
            tables = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not TOML ({e})") from None
    variants = []
    names: set[str] = set()
    for op, rows in tables.items():
        try:
            # A table, or an array of tables when some value combinations do not make sense.
            for axes in rows if isinstance(rows, list) else [rows]:
                keys = sorted(axes)
                for values in itertools.product(*(axes[k] for k in keys)):
                    params = dict(zip(keys, values, strict=True))
                    spec = spec_for(op, params)
                    # Axes may name one kernel twice (a "dtype" cache on fp32 rows is fp32).
                    if spec.name not in names:
                        names.add(spec.name)
                        variants.append(Variant(op, tuple(params.items()), spec))
        except (TypeError, KeyError, ValueError) as e:
            raise ValueError(f"{path}: [{op}]: {e}") from None
    return variants
