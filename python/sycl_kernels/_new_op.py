"""sycl_kernels._new_op: `python -m sycl_kernels new-op NAME`, a new op's files in a checkout.

It writes a working element-wise op, out = NAME(x, factor) = x * factor, from the
templates in _new_op_templates/: the kernel, its spec, the op, its bench case, its
tests, and its manifest rows. Each joins the package by registration (the manifest's spec
factories, the bad-input matrix and opcheck, bench and demo, the ctest `ops` label);
the shared files it edits are kernels/variants.toml, to which the op's table is
appended, and ops/__init__.py, whose imports it rewrites from the ops modules (they
stay written out, for readers and static tools).
"""

from __future__ import annotations

import ast
import keyword
import re
import string
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

TEMPLATES = Path(__file__).resolve().parent / "_new_op_templates"
MANIFEST = "kernels/variants.toml"
OPS_INIT = "python/sycl_kernels/ops/__init__.py"
# pyproject.toml's [tool.ruff] line-length: the exports it writes stay formatted.
_LINE_LENGTH = 100

# What a checkout has: new-op writes beside these.
CHECKOUT_MARKERS = (
    "pyproject.toml",
    MANIFEST,
    "kernels/common/dtype.hpp",
    "python/sycl_kernels/ops/_op.py",
    "tests/ops/cases.py",
)

# Lower-case snake case, as every op; at most 32 characters, which keeps the generated
# lines within the line length (100).
_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}", re.ASCII)

# The name is a C++ function in namespace sycl_kernels too.
_CPP_KEYWORDS = frozenset(
    """alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
    char16_t char32_t class compl concept const consteval constexpr constinit const_cast
    continue co_await co_return co_yield decltype default delete do double dynamic_cast
    else enum explicit export extern false float for friend goto if inline int long
    mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected
    public register reinterpret_cast requires return short signed sizeof static
    static_assert static_cast struct switch template this thread_local throw true try
    typedef typeid typename union unsigned using virtual void volatile wchar_t while xor
    xor_eq""".split()  # noqa: SIM905 (a list literal takes a line a word)
)


class NewOpError(Exception):
    """Why new-op wrote nothing."""


@dataclass(frozen=True)
class NewFile:
    path: str
    """Where, relative to the checkout; {name} is the op's name."""
    template: str
    what: str


NEW_FILES = (
    NewFile("kernels/{name}/{name}.hpp", "kernel.hpp.tmpl", "the kernel (device code)"),
    NewFile(
        "python/sycl_kernels/specs/{name}.py",
        "spec.py.tmpl",
        "its KernelSpec, and its spec factory for the manifest",
    ),
    NewFile(
        "python/sycl_kernels/ops/{name}.py",
        "op.py.tmpl",
        "the op: its checks, its kernel's binding, the public function",
    ),
    NewFile(
        "python/sycl_kernels/bench/{name}.py",
        "bench.py.tmpl",
        "its bench case, against its torch eager form (bench and demo)",
    ),
    NewFile(
        "tests/ops/test_{name}.py",
        "test.py.tmpl",
        "its tests, and its inputs for the bad-input matrix and opcheck",
    ),
)


def checkout_root(root: Path | None = None) -> Path:
    """`root`, or the checkout the package was imported from, if it is a checkout."""
    root = Path(__file__).resolve().parents[2] if root is None else root.resolve()
    missing = [marker for marker in CHECKOUT_MARKERS if not (root / marker).is_file()]
    if missing:
        raise NewOpError(
            f"{root} is not a sycl_kernels checkout (it has no {', '.join(missing)}): "
            "new-op writes into the source tree. Run it with the package imported from "
            "a checkout (PYTHONPATH=<checkout>/python, or pip install -e), or give --root"
        )
    return root


def _name_problem(name: str, root: Path) -> str | None:
    """Why `name` cannot be a new op of the checkout at `root`, or None."""
    if not _NAME.fullmatch(name):
        return (
            "an op name is an identifier of lower-case letters, digits and '_', starting "
            "with a letter, at most 32 characters (as rmsnorm, silu_and_mul)"
        )
    if keyword.iskeyword(name) or name in _CPP_KEYWORDS:
        return "it is a Python or C++ keyword"
    package = root / "python" / "sycl_kernels"
    if (package / name).exists() or (package / f"{name}.py").exists():
        return f"sycl_kernels.{name} is a module of the package"
    taken = _taken_in_process(name)
    if taken:
        return taken
    with (root / MANIFEST).open("rb") as f:
        if name in tomllib.load(f):
            return f"{MANIFEST} has a [{name}] table already"
    if re.search(rf"\b{name}\b", _common_code(root)):
        return "kernels/common/ uses the name in namespace sycl_kernels, where the kernel goes"
    return None


def _common_code(root: Path) -> str:
    """The shared device headers' code, without comments."""
    text = "\n".join(p.read_text() for p in sorted((root / "kernels" / "common").glob("*.hpp")))
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.DOTALL)


def _taken_in_process(name: str) -> str | None:
    """Why the package this process imported has `name` already, or None."""
    import torch

    from .specs.variants import spec_factories

    if hasattr(sys.modules[__package__], name):
        return f"sycl_kernels.{name} exists"
    if name in spec_factories():
        return f"a manifest op {name!r} exists"
    for custom in (name, f"{name}_out"):
        if hasattr(torch.ops.sycl_kernels, custom):
            return f"torch.ops.sycl_kernels.{custom} exists"
    return None


def _render(template: str, name: str) -> str:
    return string.Template((TEMPLATES / template).read_text()).substitute(name=name)


def new_op(name: str, root: Path | None = None) -> list[tuple[str, str]]:
    """Writes op `name`'s files into the checkout (module doc); returns each file written,
    relative to the checkout, and what it holds. NewOpError, with nothing written, when
    the checkout or the name does not do, or one of the files exists."""
    root = checkout_root(root)
    problem = _name_problem(name, root)
    if problem:
        raise NewOpError(f"cannot name an op {name!r}: {problem}")
    files = [(root / f.path.format(name=name), f) for f in NEW_FILES]
    existing = [str(p.relative_to(root)) for p, _ in files if p.exists()]
    if (root / "kernels" / name).exists():
        existing.append(f"kernels/{name}/")
    if existing:
        raise NewOpError(f"new-op {name}: {', '.join(existing)} exist already; nothing written")
    rendered = [(path, _render(f.template, name), f.what) for path, f in files]
    manifest_rows = _render("variants.toml.tmpl", name)
    (root / "kernels" / name).mkdir()
    for path, text, _ in rendered:
        path.write_text(text)
    manifest = root / MANIFEST
    with manifest.open("a") as f:
        f.write(manifest_rows)
    write_exports(root / OPS_INIT)
    appended = f"its manifest rows, a [{name}] table appended: the variants built ahead of time"
    written = [(str(path.relative_to(root)), what) for path, _, what in rendered]
    exported = f"its import, as sycl_kernels.ops.{name} and sycl_kernels.{name}"
    return [*written, (MANIFEST, appended), (OPS_INIT, exported)]


def _defined_ops(module: Path) -> list[str]:
    """The names of the functions `module` decorates with @op(...) (ops/_op.py)."""
    tree = ast.parse(module.read_text())
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(
            isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "op"
            for d in node.decorator_list
        )
    ]


def write_exports(init: Path) -> None:
    """Rewrites ops/__init__.py's imports and __all__ from the @op functions of the
    package's public ops modules, written out for readers and static tools."""
    text = init.read_text()
    docstring = text[: text.index('"""', 3) + 3]
    imports, names = [], []
    for module in sorted(init.parent.glob("*.py")):
        if module.name.startswith("_"):
            continue
        defined = sorted(_defined_ops(module))
        names += defined
        line = f"from .{module.stem} import {', '.join(defined)}"
        if len(line) > _LINE_LENGTH:
            line = f"from .{module.stem} import (\n" + "".join(f"    {n},\n" for n in defined) + ")"
        imports += [line] if defined else []
    listed = "".join(f'    "{n}",\n' for n in sorted(names))
    init.write_text(f"{docstring}\n\n" + "\n".join(imports) + f"\n\n__all__ = [\n{listed}]\n")


def main(name: str, root: Path | None) -> int:
    try:
        written = new_op(name, root)
    except NewOpError as e:
        print(f"new-op: {e}", file=sys.stderr)
        return 1
    print(f"new-op {name}: an element-wise op, out = {name}(x, factor) = x * factor")
    for path, what in written:
        print(f"  {path:<44} {what}")
    print(
        "\nIt joins the manifest, the bad-input matrix, opcheck, bench and demo, and the "
        "ctest label `ops` by registration, and the exports by the import written above. "
        "Next:\n"
        f"  python -m pytest tests/ops/test_{name}.py     its tests, green as written\n"
        f"  python -m sycl_kernels bench --ops {name}      its throughput against torch\n"
        "  then make it your op (docs/kernel-development.md, 'Adding an op'), "
        "document it in docs/ops.md, and give its tests a ctest label of their own"
    )
    return 0
