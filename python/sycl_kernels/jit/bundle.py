"""sycl_kernels.jit.bundle: the private cache's entries in one file, exported and imported.

A bundle is a gzip-compressed tar: `manifest.json` first (each entry's file name,
kernel name, digest, size and SHA-256), then every entry file of the cache, byte for
byte: device images, and the native binaries of its `native/` folder (jit/native.py),
each imported into the same place; no other path is taken. Import
checks each file against the manifest's SHA-256 and the entry's own header before
publishing it through DiskCache.store, so a truncated or altered bundle imports only
what verifies. The hashes detect damage, not forgery: import bundles you trust.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .._config import config
from .cache import ENTRY_SUFFIX, CorruptEntry, DiskCache, ReadOnlyCache, decode, staged
from .native import NATIVE_FOLDER

FORMAT = 1
MANIFEST = "manifest.json"
# The folders of a cache that hold entries, relative to its root.
FOLDERS = ((), (NATIVE_FOLDER,))


@dataclass
class Report:
    done: list[str] = field(default_factory=list)
    """Entry files exported, or imported."""
    present: list[str] = field(default_factory=list)
    """Entry files the cache already held (import)."""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """(file, why) of each entry left out."""


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def export_bundle(cache: DiskCache, path: Path, native: bool = True) -> Report:
    """Writes every entry of `cache` that passes its check into a bundle at `path`;
    `native=False` leaves the native binaries out (they serve one device and driver)."""
    report = Report()
    records, files = [], []
    folders = [cache.root.joinpath(*folder) for folder in FOLDERS[: None if native else 1]]
    for entry in (e for folder in folders for e in ReadOnlyCache(folder).entries()):
        file = entry.path.relative_to(cache.root).as_posix()
        try:
            data = entry.path.read_bytes()
            decode(data)
        except (OSError, CorruptEntry) as e:
            report.skipped.append((file, str(e)))
            continue
        records.append(
            {
                "file": file,
                "name": entry.name,
                "digest": entry.digest,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
        files.append(data)
    manifest = json.dumps({"format": FORMAT, "entries": records}, indent=1).encode()
    # Staged and renamed: an interrupted export leaves no half bundle.
    with staged(path, f".{path.name}.") as f, tarfile.open(fileobj=f, mode="w:gz") as tar:
        _add(tar, MANIFEST, manifest)
        for record, data in zip(records, files, strict=True):
            _add(tar, record["file"], data)
    report.done = [record["file"] for record in records]
    return report


def _read_members(path: Path) -> tuple[dict[str, bytes], str]:
    """The whole files of the bundle up to any damage: ({name: bytes}, what stopped it)."""
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                reader = tar.extractfile(member) if member.isfile() else None
                if reader is not None:
                    found.setdefault(member.name, reader.read())
    except (OSError, EOFError, tarfile.TarError, zlib.error) as e:
        return found, f"{type(e).__name__}: {e}"
    return found, ""


def _checked_records(manifest: bytes | None) -> list[dict]:
    """The manifest's entry records; ValueError when it is missing or malformed."""
    if manifest is None:
        raise ValueError(f"no {MANIFEST}")
    parsed = json.loads(manifest)
    if parsed["format"] != FORMAT:
        raise ValueError(f"format {parsed['format']!r}, this version reads {FORMAT}")
    records = parsed["entries"]
    for r in records:
        file, name, digest = r["file"], r["name"], r["digest"]
        # Paths come from the bundle: an entry lands only in one of FOLDERS.
        path = PurePosixPath(file) if isinstance(file, str) else PurePosixPath("/")
        parts = path.parts
        if (
            not all(isinstance(v, str) for v in (name, digest, r["sha256"]))
            or not parts
            or parts[:-1] not in FOLDERS
            or parts[-1] != f"{name}.{digest}{ENTRY_SUFFIX}"
            or any(part.startswith(".") or "\\" in part or "\0" in part for part in parts)
            or "/" in name
            or "." in digest
        ):
            raise ValueError(f"malformed record {r!r}")
    return records


def import_bundle(cache: DiskCache, path: Path) -> Report:
    """Publishes into `cache` every entry of the bundle at `path` that verifies."""
    report = Report()
    members, damage = _read_members(path)
    if not members and damage:
        report.skipped = [(str(path), f"cannot read it ({damage})")]
        return report
    try:
        records = _checked_records(members.pop(MANIFEST, None))
    except (ValueError, KeyError, TypeError) as e:
        why = f"the bundle has no usable {MANIFEST} ({e}{'; ' + damage if damage else ''})"
        report.skipped = [(name, why) for name in members] or [(path.name, why)]
        return report
    for r in records:
        data = members.pop(r["file"], None)
        if data is None:
            why = "missing from the bundle" + (f" (it ends early: {damage})" if damage else "")
            report.skipped.append((r["file"], why))
            continue
        if hashlib.sha256(data).hexdigest() != r["sha256"]:
            report.skipped.append((r["file"], "SHA-256 differs from the manifest's"))
            continue
        try:
            image = decode(data)
        except CorruptEntry as e:
            report.skipped.append((r["file"], str(e)))
            continue
        target = DiskCache(cache.root.joinpath(*PurePosixPath(r["file"]).parts[:-1]))
        if not target.usable():  # it warned why
            report.skipped.append((r["file"], f"{target.root} is not writable"))
            continue
        with target.lock(r["name"], r["digest"], config().lock_timeout) as held:
            if target.load(r["name"], r["digest"]) == image:
                report.present.append(r["file"])
                continue
            try:
                target.store(r["name"], r["digest"], image, held=held)
            except OSError as e:
                report.skipped.append((r["file"], f"could not publish it ({e})"))
                continue
        report.done.append(r["file"])
    report.skipped += [(name, f"not in {MANIFEST}") for name in members]
    return report
