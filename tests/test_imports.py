"""The package's modules import one another without a cycle, so each has a place in the layers.

The graph is read from the sources with `ast`: every import statement, at module
level or inside a function (a deferred import still ties the two modules together),
except those under `if TYPE_CHECKING:`, which never run and are how a type-only
dependency stays out of the graph. A module's import of one of its own parent
packages is implied by Python for every submodule, so only the names an import
statement spells count as edges.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import sycl_kernels


def _reraise(name: str) -> None:
    # walk_packages skips a subpackage that fails to import unless told otherwise; a
    # skipped package would hide its modules' imports.
    raise  # the import's error: walk_packages calls this in its except block


def _modules(package: ModuleType) -> dict[str, Path]:
    """Every module of `package`, its subpackages' included: name -> source file."""
    found = {package.__name__: Path(package.__file__)}
    for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}.", _reraise):
        spec = info.module_finder.find_spec(info.name)
        found[info.name] = Path(spec.origin)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """The absolute names a module's import statements bind, relative ones resolved."""

    def __init__(self, package: str, modules: set[str]) -> None:
        self.package = package
        """The package relative imports are resolved against."""
        self.modules = modules
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.update(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            base = importlib.util.resolve_name("." * node.level + base, self.package)
        for alias in node.names:
            # `from package import name`: a submodule if there is one, else an attribute.
            submodule = f"{base}.{alias.name}"
            self.found.add(submodule if submodule in self.modules else base)


def import_graph(package: ModuleType) -> dict[str, set[str]]:
    """module -> the modules of `package` it imports."""
    modules = _modules(package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        # A package's relative imports start from itself, a module's from its package.
        anchor = name if path.name == "__init__.py" else name.rpartition(".")[0]
        visitor = _Imports(anchor, set(modules))
        visitor.visit(ast.parse(path.read_text(), str(path)))
        graph[name] = {m for m in visitor.found if m in modules and m != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of `graph` as [a, b, ..., a], or None (depth-first, in name order)."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for successor in sorted(graph[node]):
            cycle = visit(successor)
            if cycle is not None:
                return cycle
        path.pop()
        done.add(node)
        return None

    for node in sorted(graph):
        cycle = visit(node)
        if cycle is not None:
            return cycle
    return None


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(sycl_kernels)
    # The walk reached the subpackages and resolved their relative imports.
    assert {"sycl_kernels._runtime", "sycl_kernels.jit.cache"} <= graph["sycl_kernels.jit.loader"]
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


# What each build-time layer may import of the package: the catalog (specs) is plain
# data, the toolchain adds the compile inputs' flags and the compile tool's path.
# Neither reaches the loader and caches (jit), the ops or torch.
LAYERS = {
    "sycl_kernels.specs": {"sycl_kernels.specs", "sycl_kernels._dtypes"},
    "sycl_kernels.toolchain": {
        "sycl_kernels.specs",
        "sycl_kernels.toolchain",
        "sycl_kernels._build_config",
        "sycl_kernels._runtime",
    },
}
# write_specs borrows the cache's atomic file writer, imported when it is called.
LAYER_EXCEPTIONS = {("sycl_kernels.specs.spec", "sycl_kernels.jit.cache")}


def test_the_catalog_and_toolchain_import_only_the_layers_below() -> None:
    graph = import_graph(sycl_kernels)
    for layer, allowed in LAYERS.items():
        members = [m for m in graph if m == layer or m.startswith(f"{layer}.")]
        assert members, layer
        for module in members:
            for imported in graph[module]:
                if (module, imported) in LAYER_EXCEPTIONS:
                    continue
                assert any(imported == a or imported.startswith(f"{a}.") for a in allowed), (
                    f"{module} imports {imported}"
                )


# Imports every module of the catalog and the toolchain as the wheel build does
# (cmake/aot_build.py: the package's __init__ skipped), with torch unimportable.
TORCH_FREE = """
import importlib, pkgutil, sys, types
sys.modules["torch"] = None
package = types.ModuleType("sycl_kernels")
package.__path__ = [sys.argv[1]]
sys.modules["sycl_kernels"] = package
for layer in ("specs", "toolchain"):
    for info in pkgutil.iter_modules(importlib.import_module(f"sycl_kernels.{layer}").__path__):
        importlib.import_module(f"sycl_kernels.{layer}.{info.name}")
from sycl_kernels.specs.variants import spec_factories
assert spec_factories(), "no spec factory registered"
print(" ".join(sorted(m for m in sys.modules if m.startswith("sycl_kernels"))))
"""


def test_the_catalog_and_toolchain_import_without_torch() -> None:
    result = subprocess.run(
        [sys.executable, "-c", TORCH_FREE, str(Path(sycl_kernels.__file__).parent)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    loaded = set(result.stdout.split())
    assert {"sycl_kernels.specs.norm", "sycl_kernels.toolchain.aot_build"} <= loaded
    assert not {m for m in loaded if m.startswith(("sycl_kernels.jit", "sycl_kernels.ops"))}


def test_a_cycle_through_a_deferred_import_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "cyclic"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from .sub import high\n")
    (package / "sub" / "high.py").write_text("from ..low import f\n")
    (package / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import low\n"
    )
    (package / "sub" / "user.py").write_text("from .. import typed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        graph = import_graph(importlib.import_module("cyclic"))
    finally:
        for name in [m for m in sys.modules if m.partition(".")[0] == "cyclic"]:
            del sys.modules[name]
    assert graph["cyclic.sub.user"] == {"cyclic.typed"}
    assert graph["cyclic.typed"] == set()
    assert find_cycle(graph) == ["cyclic.low", "cyclic.sub.high", "cyclic.low"]
