"""sycl_kernels.jit.variants: the AOT variant manifest (kernels/variants.toml) turned into specs."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .._dtypes import BY_NAME
from .norm import rmsnorm_spec
from .spec import KernelSpec

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

# Op name in the manifest -> spec factory taking the manifest's keys as arguments.
SPEC_FACTORIES: dict[str, Callable[..., KernelSpec]] = {
    "rmsnorm": lambda dtype, hidden: rmsnorm_spec(BY_NAME[dtype], hidden),
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
    """Every variant `path` lists: the product of each op's value lists."""
    with path.open("rb") as f:
        tables = tomllib.load(f)
    variants = []
    for op, axes in tables.items():
        keys = sorted(axes)
        for values in itertools.product(*(axes[k] for k in keys)):
            params = dict(zip(keys, values, strict=True))
            variants.append(Variant(op, tuple(params.items()), spec_for(op, params)))
    return variants
