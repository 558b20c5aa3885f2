"""cache export / import: a bundle carries every entry, and import publishes only
what verifies against the manifest's SHA-256 and the entry's own header."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TypeVar

import pytest
from sycl_kernels.__main__ import main
from sycl_kernels._config import config
from sycl_kernels.jit.bundle import MANIFEST, MAX_MANIFEST_BYTES, MAX_MEMBER_BYTES
from sycl_kernels.jit.cache import encode

from tests.jit.test_cache import STATS_AFTER_RMSNORM, _forget_loaded, _rmsnorm_checked, _run

HIDDEN = (4001, 4002)  # outside kernels/variants.toml


def _entry_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.img")}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """A bundle of a cache of two compiled kernels, and that cache's entry files."""
    root = tmp_path_factory.mktemp("exported")
    bundle = root / "kernels.tar.gz"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYCL_KERNELS_CACHE_DIR", str(root / "cache"))
        config.cache_clear()
        for hidden in HIDDEN:
            _forget_loaded()
            _rmsnorm_checked(hidden)
        assert main(["cache", "export", str(bundle)]) == 0
    config.cache_clear()
    return bundle, _entry_files(root / "cache")


def _import(bundle: Path, capsys: pytest.CaptureFixture) -> tuple[int, str, dict[str, str]]:
    """(exit status, stdout, {skipped file: why})."""
    capsys.readouterr()
    status = main(["cache", "import", str(bundle)])
    out, err = capsys.readouterr()
    skipped = dict(line.removeprefix("skipped ").split(": ", 1) for line in err.splitlines())
    return status, out, skipped


def test_export_import_then_run_with_the_jit_off(
    exported: tuple[Path, dict[str, bytes]], fresh_cache: Path, capsys: pytest.CaptureFixture
) -> None:
    bundle, entries = exported
    status, out, skipped = _import(bundle, capsys)
    assert (status, skipped) == (0, {})
    assert f"imported {len(entries)} entries" in out
    assert _entry_files(fresh_cache) == entries
    result = _run(STATS_AFTER_RMSNORM.format(hidden=HIDDEN[0]), {"SYCL_KERNELS_JIT": "0"})
    assert result["ok"] and result["compiles"] == 0
    status, out, _ = _import(bundle, capsys)
    assert status == 0 and f"imported 0 entries into {fresh_cache} ({len(entries)} already" in out


def _truncated(data: bytes) -> bytes:
    return data[: len(data) * 2 // 3]


def _altered(data: bytes) -> bytes:
    """The bundle repacked with one byte of its last entry flipped, its manifest unchanged."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data)) as old, tarfile.open(fileobj=out, mode="w") as new:
        members = old.getmembers()
        for member in members:
            payload = bytearray(old.extractfile(member).read())
            if member is members[-1]:
                payload[len(payload) // 2] ^= 0x01
            new.addfile(member, io.BytesIO(payload))
    return out.getvalue()


@pytest.mark.parametrize("damage", [_truncated, _altered], ids=["truncated", "altered"])
def test_a_damaged_bundle_imports_only_what_verifies(
    exported: tuple[Path, dict[str, bytes]],
    fresh_cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    damage,
) -> None:
    bundle, entries = exported
    damaged = tmp_path / "damaged.tar.gz"
    damaged.write_bytes(damage(bundle.read_bytes()))
    status, _, skipped = _import(damaged, capsys)
    imported = _entry_files(fresh_cache)
    assert status == 1 and skipped
    assert all(entries[file] == data for file, data in imported.items())
    assert set(imported) | set(skipped) == set(entries)
    assert not set(imported) & set(skipped)
    if damage is _altered:
        (file,) = skipped
        assert skipped[file] == "SHA-256 differs from the manifest's"
    assert [p for p in fresh_cache.rglob("*") if p.suffix == ".tmp"] == []


def test_a_bundle_without_a_manifest_imports_nothing(
    fresh_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    bundle = tmp_path / "odd.tar"
    with tarfile.open(bundle, "w") as tar:
        info = tarfile.TarInfo("rmsnorm_x.00.img")
        tar.addfile(info, io.BytesIO(b""))
    status, _, skipped = _import(bundle, capsys)
    assert status == 1 and list(skipped) == ["rmsnorm_x.00.img"]
    assert f"no usable {MANIFEST}" in skipped["rmsnorm_x.00.img"]
    assert _entry_files(fresh_cache) == {}


@pytest.mark.parametrize("folder", ["elsewhere/", "../", "native/deeper/"])
def test_a_bundle_cannot_place_entries_outside_the_cache_folders(
    exported: tuple[Path, dict[str, bytes]],
    fresh_cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    folder: str,
) -> None:
    # The bundle's own entries, re-filed under `folder` in its manifest and its members.
    bundle, entries = exported
    moved = tmp_path / "moved.tar"
    with tarfile.open(bundle) as old, tarfile.open(moved, "w") as new:
        for member in old.getmembers():
            payload = old.extractfile(member).read()
            if member.name == MANIFEST:
                manifest = json.loads(payload)
                for record in manifest["entries"]:
                    record["file"] = folder + record["file"]
                payload = json.dumps(manifest).encode()
            info = tarfile.TarInfo(member.name if member.name == MANIFEST else folder + member.name)
            info.size = len(payload)
            new.addfile(info, io.BytesIO(payload))
    status, _, skipped = _import(moved, capsys)
    assert status == 1 and len(skipped) == len(entries)
    assert [p for p in tmp_path.rglob("*.img")] == []
    assert _entry_files(fresh_cache) == {}


def test_export_without_native_binaries(
    exported: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    bundle, entries = exported
    assert any(file.startswith("native/") for file in entries)
    images_only = tmp_path / "images.tar.gz"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYCL_KERNELS_CACHE_DIR", str(bundle.parent / "cache"))
        config.cache_clear()
        assert main(["cache", "export", "--without-native", str(images_only)]) == 0
    config.cache_clear()
    with tarfile.open(images_only) as tar:
        files = {member.name for member in tar.getmembers()} - {MANIFEST}
    assert files == {file for file in entries if not file.startswith("native/")}


class _Zeros(io.RawIOBase):
    """Endless zero bytes, made as they are read: a member far bigger than memory."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:
        buffer[:] = bytes(len(buffer))
        return len(buffer)


def _entry(name: str) -> tuple[dict, bytes]:
    """A small valid entry file of the cache's root folder, and its manifest record."""
    data = encode(name.encode() * 100)
    sha256 = hashlib.sha256(data).hexdigest()
    record = {"file": f"{name}.00.img", "name": name, "digest": "00", "bytes": len(data)}
    return {**record, "sha256": sha256}, data


def _manifest(*records: dict) -> bytes:
    return json.dumps({"format": 1, "entries": list(records)}).encode()


def _bundle(path: Path, manifest: bytes, *members: tuple[str, int, BinaryIO]) -> Path:
    """A .tar.gz of `manifest` first, then each (name, size, contents), streamed in."""
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name, size, contents in ((MANIFEST, len(manifest), io.BytesIO(manifest)), *members):
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, contents)
    return path


T = TypeVar("T")


def _with_peak(call: Callable[[], T]) -> tuple[T, int]:
    """What `call` returns, and the most memory it held at once (Python's allocations:
    every bytes object a bundle's content is read into)."""
    tracemalloc.start()
    try:
        return call(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_gzip_bomb_costs_little_memory(
    fresh_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    record, data = _entry("rmsnorm_a")
    bomb = _bundle(
        tmp_path / "bomb.tar.gz",
        _manifest(record),
        (record["file"], len(data), io.BytesIO(data)),
        ("filler", 512 << 20, _Zeros()),
    )
    assert bomb.stat().st_size < 4 << 20
    (status, _, skipped), peak = _with_peak(lambda: _import(bomb, capsys))
    assert peak < 16 << 20
    assert status == 1 and skipped["filler"] == f"not in {MANIFEST}"
    assert skipped[str(bomb)].startswith("the bundle holds more than its manifest declares")
    # What verified before the bomb stays published.
    assert _entry_files(fresh_cache) == {record["file"]: data}


def test_a_file_bigger_than_its_record_is_skipped_unread(
    fresh_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    first, first_data = _entry("rmsnorm_a")
    record, data = _entry("rmsnorm_b")
    padded = data + bytes(32 << 20)
    bundle = _bundle(
        tmp_path / "padded.tar.gz",
        _manifest(first, record),
        (first["file"], len(first_data), io.BytesIO(first_data)),
        (record["file"], len(padded), io.BytesIO(padded)),
    )
    (status, _, skipped), peak = _with_peak(lambda: _import(bundle, capsys))
    assert peak < 8 << 20
    why = f"{len(padded)} bytes in the bundle, {len(data)} in {MANIFEST}"
    assert status == 1 and skipped[record["file"]] == why
    # Its 32 MiB past what the manifest declares end the reading too.
    assert skipped[str(bundle)].startswith("the bundle holds more than its manifest declares")
    assert _entry_files(fresh_cache) == {first["file"]: first_data}


def test_a_deeply_nested_manifest_is_reported(
    fresh_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    record, data = _entry("rmsnorm_a")
    nested = b"[" * 100_000 + b"]" * 100_000
    bundle = _bundle(
        tmp_path / "nested.tar.gz", nested, (record["file"], len(data), io.BytesIO(data))
    )
    status, _, skipped = _import(bundle, capsys)
    assert status == 1 and list(skipped) == [record["file"]]
    assert f"no usable {MANIFEST}" in skipped[record["file"]]
    assert "recursion depth" in skipped[record["file"]]
    assert _entry_files(fresh_cache) == {}


def test_an_oversized_manifest_is_refused(
    fresh_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    record, data = _entry("rmsnorm_a")
    oversized = _manifest(record) + b" " * MAX_MANIFEST_BYTES  # valid JSON all the same
    bundle = _bundle(
        tmp_path / "big.tar.gz", oversized, (record["file"], len(data), io.BytesIO(data))
    )
    status, _, skipped = _import(bundle, capsys)
    assert status == 1 and list(skipped) == [record["file"]]
    assert f"more than {MAX_MANIFEST_BYTES}" in skipped[record["file"]]
    assert _entry_files(fresh_cache) == {}


@pytest.mark.parametrize("size", [-1, True, 1.0, "1", MAX_MEMBER_BYTES + 1])
def test_a_record_of_a_bad_size_makes_the_manifest_malformed(
    fresh_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture, size: object
) -> None:
    record, data = _entry("rmsnorm_a")
    manifest = _manifest({**record, "bytes": size})
    bundle = _bundle(
        tmp_path / "sized.tar.gz", manifest, (record["file"], len(data), io.BytesIO(data))
    )
    status, _, skipped = _import(bundle, capsys)
    assert status == 1 and "malformed record" in skipped[record["file"]]
    assert _entry_files(fresh_cache) == {}
