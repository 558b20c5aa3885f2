"""Every repository path the docs and the sources' comments name exists.

A file moved or split leaves its old path in prose nobody runs; this finds it. Read:
docs/*.md and README.md whole; the comments and docstrings of python/, kernels/ and
cmake/ (and of the top-level CMakeLists.txt). A path counts when it has a slash and
its first component is one of this repository's top-level folders or one of the
package's subpackages (python/sycl_kernels/*/), so that another project's path
(vLLM's `vllm/_custom_ops.py`) is not taken for ours; UPSTREAM lists the few of other
projects that begin like ours. A path is found when it exists relative to the
repository root, to python/sycl_kernels/ or to the folder of the file naming it. The
docs' relative links are checked too, from the folder of the file they are in.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from sycl_kernels._new_op import NEW_FILES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "sycl_kernels"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Other projects' paths that begin with one of our folders' names: the engines'
# sources the compat modules were read against.
UPSTREAM = (
    "csrc/cache.cpp",  # vllm-xpu-kernels
    "csrc/layernorm_quant.cpp",
    "csrc/moe/",
    "csrc/quantization/",
    "csrc/torch_bindings.cpp",  # vLLM's and vllm-xpu-kernels'
    "python/sgl_kernel/",  # sgl-kernel
    "python/sglang/",  # SGLang
)

# What `new-op scale` writes, the walkthrough's example in docs/kernel-development.md.
EXAMPLES = frozenset(f.path.format(name="scale") for f in NEW_FILES) | {"kernels/scale/"}

# Folders at the top level that are no part of the tracked tree.
UNTRACKED = {".git", ".venv", ".venvs", ".pytest_cache", ".ruff_cache", ".hypothesis"}
UNTRACKED |= {"build", "dist", "__pycache__"}

OWN_FIRST_COMPONENTS = frozenset(
    {p.name for p in ROOT.iterdir() if p.is_dir() and p.name not in UNTRACKED}
    | {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name not in UNTRACKED}
)

# A path-like token: components of word characters, dots and dashes (or a
# placeholder such as `<family>`, or a glob's `*`), joined by slashes.
PATH_TOKEN = re.compile(r"(?<![\w./<>*-])[\w.<>*-]+(?:/[\w.<>*-]+)+/?")
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _python_prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of each comment and docstring of a Python file."""
    source = path.read_text()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(ast.parse(source)):
        doc = ast.get_docstring(node, clean=False) if isinstance(node, documented) else None
        for offset, line in enumerate((doc or "").splitlines()):
            yield node.body[0].lineno + offset, line


C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _cpp_prose(path: Path) -> Iterator[tuple[int, str]]:
    source = path.read_text()
    for match in C_COMMENT.finditer(source):
        start = source.count("\n", 0, match.start()) + 1
        for offset, line in enumerate(match.group().splitlines()):
            yield start + offset, line


def _hash_comments(path: Path) -> Iterator[tuple[int, str]]:
    """Comments of CMake and TOML files: from a `#` to the line's end."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if "#" in line:
            yield number, line[line.index("#") :]


def _whole(path: Path) -> Iterator[tuple[int, str]]:
    yield from enumerate(path.read_text().splitlines(), 1)


def _prose() -> Iterator[tuple[Path, int, str]]:
    """Every file this test reads, with the text of it that names paths, by line."""
    readers = {
        ".py": _python_prose,
        ".hpp": _cpp_prose,
        ".cpp": _cpp_prose,
        ".cmake": _hash_comments,
        ".toml": _hash_comments,
    }
    documents = {path: _whole for path in DOCS}
    documents[ROOT / "CMakeLists.txt"] = _hash_comments
    for folder in ("python", "kernels", "cmake"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in readers:
                documents[path] = readers[path.suffix]
    for path, read in documents.items():
        for line, text in read(path):
            yield path, line, text


def _candidates(text: str) -> Iterator[str]:
    """The tokens of `text` that name a path of this repository."""
    for token in PATH_TOKEN.findall(URL.sub(" ", text)):
        token = token.rstrip(".")
        if token.split("/", 1)[0] not in OWN_FIRST_COMPONENTS:
            continue
        if token.startswith(UPSTREAM) or token in EXAMPLES:
            continue
        yield token


def _exists(token: str, referrer: Path) -> bool:
    # A placeholder (`kernels/<family>/<op>.hpp`) or a glob stands for any match.
    pattern = re.sub(r"<[^>]*>", "*", token).rstrip("/")
    for base in (ROOT, PACKAGE, referrer.parent):
        if "*" in pattern:
            if next(base.glob(pattern), None) is not None:
                return True
        elif (base / pattern).exists():
            return True
    return False


def test_every_named_repository_path_exists() -> None:
    missing = [
        f"{path.relative_to(ROOT)}:{line}: {token}"
        for path, line, text in _prose()
        for token in _candidates(text)
        if not _exists(token, path)
    ]
    assert not missing, "paths named that the repository does not have:\n" + "\n".join(missing)


def test_every_relative_link_of_the_docs_exists() -> None:
    missing = []
    for path in DOCS:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for target in MARKDOWN_LINK.findall(line):
                target = target.split("#", 1)[0]
                if target and not URL.match(target) and not (path.parent / target).exists():
                    missing.append(f"{path.relative_to(ROOT)}:{number}: {target}")
    assert not missing, "links to files the repository does not have:\n" + "\n".join(missing)


def test_a_moved_file_is_found() -> None:
    # The check itself: the norm specs' old place in jit/ is reported, their place is not.
    referrer = ROOT / "kernels" / "norm" / "rmsnorm.hpp"
    assert list(_candidates("// (jit/norm.py norm_vec_width)")) == ["jit/norm.py"]
    assert not _exists("jit/norm.py", referrer)
    assert _exists("specs/norm.py", referrer)
    assert _exists("kernels/<family>/<op>.hpp", referrer)
    assert not _exists("kernels/<family>/<op>.cpp", referrer)
    assert list(_candidates("see https://github.com/x/y/blob/main/ops/_op.py.")) == []
    assert list(_candidates("vllm/_custom_ops.py, csrc/moe/torch_bindings.cpp")) == []
    assert list(_candidates("`csrc/module.cpp`, `docs/ops.md`.")) == [
        "csrc/module.cpp",
        "docs/ops.md",
    ]
