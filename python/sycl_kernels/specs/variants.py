"""sycl_kernels.specs.variants: the AOT variant manifest (kernels/variants.toml) as specs."""

from __future__ import annotations

import functools
import importlib
import itertools
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .spec import KernelSpec

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

SpecFactory = Callable[..., KernelSpec]

# Manifest op name -> spec factory taking the manifest's keys as arguments, filled by
# the spec modules' @manifest_op (read it through spec_factories()).
_FACTORIES: dict[str, SpecFactory] = {}

# A registration in a spec module's source: `@manifest_op(` or `manifest_op(` at the
# start of a line.
_REGISTERS = re.compile(r"^\s*@?manifest_op\(", re.MULTILINE)


def manifest_op(name: str) -> Callable[[SpecFactory], SpecFactory]:
    """Registers the decorated spec factory as manifest op `name` ([name] tables in
    kernels/variants.toml): it takes the table's keys as keyword arguments, plain TOML
    values (a dtype by its short name), and returns the variant's KernelSpec."""

    def register(factory: SpecFactory) -> SpecFactory:
        known = _FACTORIES.setdefault(name, factory)
        if known is not factory:
            raise ValueError(f"manifest op {name!r} is registered twice")
        return factory

    return register


def spec_factories() -> dict[str, SpecFactory]:
    """Every manifest op's spec factory, by name."""
    _import_spec_modules()
    return dict(sorted(_FACTORIES.items()))


@functools.cache
def _import_spec_modules() -> None:
    """Imports the spec modules, which register their factories: the modules of this
    package whose source calls manifest_op, so that a new one (`python -m sycl_kernels
    new-op`) joins without an edit here. Found by their source, not by importing every
    module of the package: some need the runtime's Python dependencies (platformdirs),
    which the wheel build (cmake/aot_build.py) runs without.
    """
    package = __name__.rpartition(".")[0]
    for path in sorted(Path(__file__).parent.glob("*.py")):
        if path.name != Path(__file__).name and _REGISTERS.search(path.read_text()):
            importlib.import_module(f"{package}.{path.stem}")


@dataclass(frozen=True)
class Variant:
    op: str
    params: tuple[tuple[str, object], ...]
    spec: KernelSpec


def spec_for(op: str, params: dict[str, object]) -> KernelSpec:
    _import_spec_modules()
    try:
        factory = _FACTORIES[op]
    except KeyError:
        known = ", ".join(spec_factories())
        raise ValueError(f"unknown op {op!r}; known: {known}") from None
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
