"""`python -m sycl_kernels new-op`: the op it writes compiles and passes its tests at once,
joining the bad-input matrix, opcheck, bench and demo, in a copy of the parts of a
checkout it needs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sycl_kernels
from sycl_kernels import _new_op
from sycl_kernels.__main__ import main
from sycl_kernels.toolchain.sources import KERNELS_DIR

CHECKOUT = Path(__file__).resolve().parent.parent
PACKAGE = Path(sycl_kernels.__file__).resolve().parent
# Never an op of the package: the test writes it into a copy only.
NAME = "new_op_example"
# The package's built parts: linked into the copy, not copied.
_LINKED = ("_sycl*", "_build_config.json", "aot")
# What the new op's tests and the suite-wide ones read of tests/.
_TEST_FILES = (
    "__init__.py",
    "conftest.py",
    "references.py",
    "ops/__init__.py",
    "ops/cases.py",
    "ops/test_bad_inputs.py",
    "ops/test_library.py",
    "ops/test_every_op_once.py",
)


def _copy_tree(root: Path) -> None:
    """A checkout's parts new-op and the tests need, the package under test's own."""
    shutil.copytree(KERNELS_DIR, root / "kernels")
    package = root / "python" / "sycl_kernels"
    ignored = shutil.ignore_patterns(*_LINKED, "kernels", "csrc", "__pycache__")
    shutil.copytree(PACKAGE, package, ignore=ignored)
    for built in PACKAGE.iterdir():
        if any(built.match(pattern) for pattern in _LINKED):
            (package / built.name).symlink_to(built.resolve())
    (package / "kernels").symlink_to(Path("..", "..", "kernels"))
    shutil.copy(CHECKOUT / "pyproject.toml", root)
    for name in _TEST_FILES:
        (root / "tests" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CHECKOUT / "tests" / name, root / "tests" / name)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    _copy_tree(root)
    return root


def test_new_op_passes_its_tests_as_written(tree: Path) -> None:
    assert main(["new-op", NAME, "--root", str(tree)]) == 0
    for f in _new_op.NEW_FILES:
        assert (tree / f.path.format(name=NAME)).is_file(), f.path
    assert f"\n[{NAME}]\n" in (tree / _new_op.MANIFEST).read_text()
    # A temporary kernel cache (conftest.py): the new kernels compile, and the kept
    # cache gets no record of a copy that is gone after the test.
    env = {k: v for k, v in os.environ.items() if k != "SYCL_KERNELS_TEST_CACHE_DIR"}
    env["PYTHONPATH"] = str(tree / "python")
    # Its own tests, and its rows of the bad-input matrix and opcheck: -k selects them
    # (the copy has no other op's tests, so the matrix holds this op only).
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-k", NAME, "tests"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    suite_wide = ("test_bad_inputs.py", "test_library.py", "test_every_op_once.py")
    for test_file in (f"test_{NAME}.py", *suite_wide):
        assert f"tests/ops/{test_file}::" in run.stdout, f"none of {test_file} ran"
    # Its bench case (bench/<name>.py) joins bench, and demo as a family of its own.
    script = (
        "from sycl_kernels.__main__ import demo_entries; "
        "from sycl_kernels.bench.ops import ALL_OPS; "
        f"print({NAME!r} in ALL_OPS, demo_entries().get({NAME!r}))"
    )
    bench = subprocess.run(
        [sys.executable, "-c", script], cwd=tree, env=env, capture_output=True, text=True
    )
    assert bench.stdout.split() == ["True", NAME], bench.stdout + bench.stderr[-2000:]


def test_new_op_refuses_without_writing(tree: Path, tmp_path: Path) -> None:
    manifest = (tree / _new_op.MANIFEST).read_text()
    for name, why in (
        ("Scale", "an op name is an identifier"),
        ("2x", "an op name is an identifier"),
        ("class", "keyword"),
        ("rmsnorm", "sycl_kernels.rmsnorm exists"),
        ("rmsnorm_out", "torch.ops.sycl_kernels.rmsnorm_out exists"),
        ("jit", "is a module of the package"),
    ):
        with pytest.raises(_new_op.NewOpError, match=why):
            _new_op.new_op(name, tree)
    (tree / "tests" / "ops" / f"test_{NAME}.py").write_text("")
    with pytest.raises(_new_op.NewOpError, match=f"tests/ops/test_{NAME}.py exist already"):
        _new_op.new_op(NAME, tree)
    assert not (tree / "kernels" / NAME).exists()
    assert (tree / _new_op.MANIFEST).read_text() == manifest
    with pytest.raises(_new_op.NewOpError, match="is not a sycl_kernels checkout"):
        _new_op.new_op(NAME, tmp_path / "elsewhere")
