"""Trust boundaries (docs/jit.md#trust): what a spec file, a define, a shared cache folder
or a cache entry holds reaches no path, compiler or native load unchecked, and a refused
source never stops the op from running correctly from the next one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from sycl_kernels import _runtime, jit
from sycl_kernels.__main__ import main
from sycl_kernels._config import config
from sycl_kernels._dtypes import BY_NAME
from sycl_kernels.jit import native
from sycl_kernels.jit.cache import MAX_IMAGE_BYTES, CorruptEntry, DiskCache, read_entry
from sycl_kernels.jit.loader import cached_or_compiled
from sycl_kernels.specs.norm import rmsnorm_spec
from sycl_kernels.toolchain.compiler import request_text
from sycl_kernels.toolchain.sources import include_tree

from tests.conftest import unkept_launches
from tests.jit.test_cache import _forget_loaded, _rmsnorm_checked

HIDDEN = 4036  # outside kernels/variants.toml: served by the caches or compiled
NOBODY = 65534


def _spec_record(**changes: object) -> dict:
    spec = rmsnorm_spec(BY_NAME["fp32"], HIDDEN, "cpu")
    record = json.loads(json.dumps(spec.__dict__, default=lambda p: p.__dict__))
    return {**record, **changes}


@pytest.mark.parametrize(
    ("field", "value", "refusal"),
    [
        ("name", "../../outside", "kernel name '../../outside' is not an identifier"),
        ("name", "a/b", "kernel name 'a/b' is not an identifier"),
        ("header", "/etc/passwd", "header '/etc/passwd' is not a relative path"),
        ("header", "../../etc/passwd", "header '../../etc/passwd' is not a relative path"),
        ("function", "f(); int x", "function 'f(); int x' is not a qualified identifier"),
        ("template_args", ["float\n#include </etc/shadow>"], "template argument"),
        ("template_args", ['"a"'], "template argument"),
        ("params", [{"name": "x", "ctype": "float; int"}], "parameter 'x' has type"),
        ("params", [{"name": "x\ny", "ctype": "float"}], "parameter name"),
        ("group_size", True, "group_size True is not a work-group size"),
    ],
)
def test_a_spec_file_field_is_refused_with_one_line_and_nothing_written(
    field: str, value: object, refusal: str, tmp_path: Path, fresh_cache: Path, capsys
) -> None:
    path = tmp_path / "specs.json"
    specs = {"format": "sycl-kernels specs", "version": 1, "specs": [_spec_record()]}
    specs["specs"].append(_spec_record(**{field: value}))
    path.write_text(json.dumps(specs))
    before = set(tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as exit_info:
        main(["precompile", "--specs", str(path)])
    message = str(exit_info.value.code)
    assert message.startswith(f"precompile --specs: {path}: not a kernel spec list (spec 1: ")
    assert refusal in message and "\n" not in message.replace("\\n", "")
    assert set(tmp_path.rglob("*")) == before  # no lock, no image, no folder anywhere


def test_the_cache_refuses_entry_names_that_leave_its_folder(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / "cache")
    for name, digest in (("../x", "00"), (".hidden", "00"), ("a\\b", "00"), ("x", "../00")):
        with pytest.raises(ValueError, match="cache entry"):
            cache.entry_path(name, digest)
        with pytest.raises(ValueError, match="cache entry"), cache.lock(name, digest, 1):
            pass
    assert not (tmp_path / "x").exists()


def test_defines_and_requests_take_no_line_breaks(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"defines: DIM='1\\noption -DX'"):
        jit.load("forged", source="", defines={"DIM": "1\noption -DX"})
    with pytest.raises(ValueError, match="defines: DIM='\"s\"'"):
        jit.load("forged", source="", defines={"DIM": '"s"'})
    with pytest.raises(ValueError, match="holds a control character"):
        request_text("x", tmp_path / "s.cpp", [], ["-DA=1\noption -DB"])


def test_an_absolute_include_is_refused() -> None:
    with pytest.raises(ValueError, match="include '/etc/passwd' is an absolute path"):
        include_tree('#include "/etc/passwd"\n')


@pytest.fixture
def caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """(private, shared): an empty private cache and a shared folder, both trusted."""
    private, shared = tmp_path / "private", tmp_path / "shared"
    shared.mkdir(mode=0o755)
    monkeypatch.setenv("SYCL_KERNELS_CACHE_DIR", str(private))
    monkeypatch.setenv("SYCL_KERNELS_SHARED_CACHE_DIRS", str(shared))
    unkept_launches(monkeypatch)  # each op call looks its kernel up
    config.cache_clear()
    _forget_loaded()
    yield private, shared
    config.cache_clear()
    _forget_loaded()


def _rmsnorm_entry(private: Path) -> tuple[Path, bytes]:
    """Compiles the test's rmsnorm into the private cache: (its entry file, its image)."""
    _forget_loaded()
    _rmsnorm_checked(HIDDEN)
    inputs = jit.compile_inputs(rmsnorm_spec(BY_NAME["fp32"], HIDDEN, "cpu"))
    path = DiskCache(private).entry_path(inputs.name, inputs.digest())
    return path, read_entry(path)


FORTY_TWO = """
#include "common/device.hpp"
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void NAME(const float* x, int64_t a, int64_t b, int64_t c, const float* w, float* out,
          int64_t d, int64_t e, int64_t f, int64_t g, int64_t rows, float eps) {
  auto item = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
  for (int64_t i = item.get_local_id(0); i < rows * HIDDEN; i += item.get_local_range(0))
    out[i] = 42.0f;
}
"""


def _planted_native(private: Path, shared: Path, image: bytes) -> Path:
    """A native binary of a kernel that writes 42.0, planted in the shared cache under
    the name and key the test's rmsnorm looks its native binary up by."""
    name = rmsnorm_spec(BY_NAME["fp32"], HIDDEN, "cpu").name
    module = jit.load("planted", source=FORTY_TWO.replace("NAME", name), defines={"HIDDEN": HIDDEN})
    queue = _runtime.cpu_queue()
    planted_image = cached_or_compiled(module.inputs, queue)[0]
    bundle = _runtime.host_module().Bundle(queue, planted_image, module.inputs.image_format)
    binary = bundle.native_binary()
    folder = shared / "native"
    folder.mkdir(mode=0o755)
    rmsnorm_key = native.native_key(image, queue)
    DiskCache(folder).store(name, rmsnorm_key, binary, held=True)
    return DiskCache(folder).entry_path(name, rmsnorm_key)


def _drop_native_binaries(private: Path) -> None:
    for binary in (private / "native").glob("*.img"):
        binary.unlink()


def _outputs(hidden: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rmsnorm's output, x, weight), the kernel looked up afresh."""
    import sycl_kernels

    _forget_loaded()
    x, weight = torch.randn(2, hidden), torch.randn(hidden)
    return sycl_kernels.rmsnorm(x, weight, 1e-6), x, weight


def test_a_native_binary_in_an_untrusted_shared_folder_is_never_loaded(caches) -> None:
    private, shared = caches
    _, image = _rmsnorm_entry(private)
    planted = _planted_native(private, shared, image)
    _drop_native_binaries(private)  # the honest one: the lookup must choose

    # A folder only root writes is trusted: its binary is used (it is root's to plant).
    start = jit.stats()
    assert bool((_outputs(HIDDEN)[0] == 42.0).all())
    assert jit.stats().shared_native_loads - start.shared_native_loads == 1
    _drop_native_binaries(private)

    for untrust, why in (
        (lambda: shared.chmod(0o777), "writable by others"),
        (lambda: shared.chmod(0o775), "writable by its group"),
        (lambda: os.chown(shared, NOBODY, -1), f"owned by uid {NOBODY}"),
        (lambda: planted.parent.chmod(0o777), "native: it is writable by others"),
        (lambda: planted.chmod(0o666), "writable by others"),
        (lambda: os.chown(planted, NOBODY, -1), f"owned by uid {NOBODY}"),
    ):
        untrust()
        config.cache_clear()
        native._shared.clear()
        jit.cache._shared.clear()
        with pytest.warns(RuntimeWarning, match=why):
            out, x, weight = _outputs(HIDDEN)
        assert not bool((out == 42.0).any())
        torch.testing.assert_close(out, torch.nn.functional.rms_norm(x, (HIDDEN,), weight, 1e-6))
        os.chown(shared, 0, -1), os.chown(planted, 0, -1)
        shared.chmod(0o755), planted.parent.chmod(0o755), planted.chmod(0o644)
        _drop_native_binaries(private)


def test_cache_ls_lists_shared_native_binaries_with_their_origin(caches, capsys) -> None:
    private, shared = caches
    _, image = _rmsnorm_entry(private)
    _planted_native(private, shared, image)
    shared.chmod(0o777)
    capsys.readouterr()
    assert main(["cache", "ls"]) == 0
    listing = capsys.readouterr().out
    name = rmsnorm_spec(BY_NAME["fp32"], HIDDEN, "cpu").name
    assert f"shared native binary (not used: {shared} is writable by others)" in listing
    assert f"in {shared} (shared; not used: it is writable by others)" in listing
    assert any(line.startswith(name) and "private" in line for line in listing.splitlines())


def test_an_untrusted_folder_above_the_shared_cache_is_refused(tmp_path: Path) -> None:
    parent = tmp_path / "open"
    (parent / "cache").mkdir(parents=True)
    parent.chmod(0o777)
    assert "open is writable by others" in jit.cache.folder_distrust(parent / "cache")
    parent.chmod(0o1777)  # sticky, as /tmp: others cannot rename the cache away
    assert jit.cache.folder_distrust(parent / "cache") == ""


@pytest.mark.parametrize("kind", ["fifo", "symlink to /dev/zero", "huge header", "longer"])
def test_a_shared_entry_that_is_no_regular_entry_is_refused_unread(caches, kind: str) -> None:
    private, shared = caches
    entry, _ = _rmsnorm_entry(private)
    _forget_loaded()
    target = shared / entry.name
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink to /dev/zero":
        target.symlink_to("/dev/zero")
    else:
        data = entry.read_bytes()
        if kind == "huge header":
            data = data[:8] + (MAX_IMAGE_BYTES + 1).to_bytes(8, "little") + data[16:]
        target.write_bytes(data + (b"\0" * 4096 if kind == "longer" else b""))
    entry.unlink()
    start = time.perf_counter()
    with pytest.raises(CorruptEntry):
        read_entry(target)
    with pytest.warns(RuntimeWarning, match="skipping (corrupt|untrusted) shared cache entry"):
        _rmsnorm_checked(HIDDEN)  # compiled afresh, correct
    assert time.perf_counter() - start < 60  # a FIFO read would never return


def test_entries_are_published_readable_by_all(fresh_cache: Path) -> None:
    entry, _ = _rmsnorm_entry(fresh_cache)
    assert entry.stat().st_mode & 0o777 == 0o644 & ~_umask()
    bundle = fresh_cache.parent / "bundle.tar.gz"
    assert main(["cache", "export", str(bundle)]) == 0
    assert bundle.stat().st_mode & 0o777 == 0o644 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv"
)
def test_a_shared_cache_root_filled_serves_another_user(fresh_cache: Path) -> None:
    # Outside pytest's own 0700 folders, so the other user can reach it.
    with tempfile.TemporaryDirectory(dir="/tmp") as scratch:
        shared, private = Path(scratch) / "shared", Path(scratch) / "private"
        Path(scratch).chmod(0o755)
        env = {**os.environ, "SYCL_KERNELS_CACHE_DIR": str(shared)}
        script = (
            "import json, torch, sycl_kernels\n"
            f"x, w = torch.randn(2, {HIDDEN}), torch.randn({HIDDEN})\n"
            "ref = torch.nn.functional.rms_norm(x, x.shape[-1:], w, 1e-6)\n"
            "torch.testing.assert_close(sycl_kernels.rmsnorm(x, w, 1e-6), ref)\n"
            "print(json.dumps(vars(sycl_kernels.jit.stats())))\n"
        )
        run = [sys.executable, "-c", script]
        as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        reach = subprocess.run([*as_nobody, sys.executable, "-c", "import torch"], cwd="/")
        if reach.returncode != 0:
            pytest.skip(f"uid {NOBODY} cannot run {sys.executable} with torch from this checkout")
        filled = subprocess.run(run, env=env, capture_output=True, text=True, timeout=300)
        assert filled.returncode == 0, filled.stderr
        private.mkdir()
        os.chown(private, NOBODY, -1)
        env.update(SYCL_KERNELS_CACHE_DIR=str(private), SYCL_KERNELS_SHARED_CACHE_DIRS=str(shared))
        served = subprocess.run(
            as_nobody + run, env=env, capture_output=True, text=True, timeout=300, cwd="/"
        )
        assert served.returncode == 0, served.stderr
        stats = json.loads(served.stdout.strip().splitlines()[-1])
        assert (stats["shared_hits"], stats["compiles"]) == (1, 0)
        assert stats["shared_native_loads"] == 1
