"""sycl_kernels.jit.bundle: the private cache's entries in one file, exported and imported.

A bundle is a gzip-compressed tar: `manifest.json` first (each entry's file name,
kernel name, digest, size and SHA-256; import takes no bundle without it as its first
member), then every entry file of the cache, byte for byte: device images, and the
native binaries of its `native/` folder (jit/native.py), each imported into the same
place; no other path is taken. Import reads the bundle once, as a stream, and only
the files the manifest names, each checked against the manifest's size and SHA-256
and the entry's own header before it is published through DiskCache.store, so a
truncated or altered bundle imports only what verifies. It holds an entry or two at a
time and stops at what the manifest does not account for (the limits below), so a
compressed bomb costs little memory or time. The hashes detect damage, not forgery:
import bundles you trust.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from .._config import config
from .cache import (
    ENTRY_HEADER_BYTES,
    MAX_IMAGE_BYTES,
    CorruptEntry,
    DiskCache,
    ReadOnlyCache,
    decode,
    entry_file_name,
    staged,
)
from .native import NATIVE_FOLDER

FORMAT = 1
MANIFEST = "manifest.json"
# The folders of a cache that hold entries, relative to its root.
FOLDERS = ((), (NATIVE_FOLDER,))
# Limits on what import reads of a bundle; see _walk.
# A manifest holds a short record per entry: 4 MiB holds tens of thousands of them.
MAX_MANIFEST_BYTES = 4 << 20
# An entry file: its header and an image no larger than the cache reads.
MAX_MEMBER_BYTES = ENTRY_HEADER_BYTES + MAX_IMAGE_BYTES
# Each named file's tar header, a pax header for a long name, and its padding to a block.
MEMBER_OVERHEAD = 4 * tarfile.BLOCKSIZE
# What a bundle may unpack to beyond its manifest and the files it names: the end of
# the tar, the padding of its last record, and members the manifest does not name.
SLACK_BYTES = 1 << 20
# The size of the reads that hash a file.
_CHUNK = 1 << 16


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


class _Overrun(Exception):
    """The bundle unpacks to more bytes than its manifest accounts for."""


class _Counted:
    """The unpacked bytes of a bundle, at most `limit` of them: a read past it raises
    _Overrun, so what a bomb unpacks to beyond the limit is never even unpacked."""

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        self.stream = stream
        self.limit = limit
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        room = self.limit - self.count
        # One byte past the room tells a stream that ends there from one that holds more.
        data = self.stream.read(size if 0 <= size <= room else room + 1)
        self.count += len(data)
        if self.count > self.limit:
            raise _Overrun(
                f"the bundle holds more than its manifest declares (over {self.limit} bytes "
                "unpacked); the rest is not read"
            )
        return data


def _unpacked(raw: BinaryIO) -> BinaryIO:
    """The tar in a bundle file: gunzipped (the format), or as is (a tar repacked plain)."""
    gzipped = raw.read(2) == b"\x1f\x8b"
    raw.seek(0)
    return gzip.GzipFile(fileobj=raw) if gzipped else raw


def _checked_records(manifest: bytes) -> dict[str, dict]:
    """The manifest's entry records by file; ValueError, KeyError, TypeError or
    RecursionError (nesting too deep for the parser) when it is malformed."""
    parsed = json.loads(manifest)
    if parsed["format"] != FORMAT:
        raise ValueError(f"format {parsed['format']!r}, this version reads {FORMAT}")
    records = parsed["entries"]
    for r in records:
        file, name, digest, size = r["file"], r["name"], r["digest"], r["bytes"]
        # Paths come from the bundle: an entry lands only in one of FOLDERS.
        path = PurePosixPath(file) if isinstance(file, str) else PurePosixPath("/")
        parts = path.parts
        if (
            not isinstance(r["sha256"], str)
            or type(size) is not int
            or not 0 <= size <= MAX_MEMBER_BYTES
            or not parts
            or parts[:-1] not in FOLDERS
            or parts[-1] != entry_file_name(name, digest)  # ValueError for a bad one
        ):
            raise ValueError(f"malformed record {r!r}")
    by_file = {r["file"]: r for r in records}
    if len(by_file) != len(records):
        raise ValueError("a file listed twice")
    return by_file


def _manifest_records(tar: tarfile.TarFile, first: tarfile.TarInfo | None) -> dict[str, dict]:
    """The records of the manifest, the bundle's first member `first`: ValueError when
    it is not there or too big, the errors of _checked_records when it is malformed."""
    if first is None or first.name != MANIFEST:
        raise ValueError(f"no {MANIFEST} as its first member")
    if first.size > MAX_MANIFEST_BYTES:
        raise ValueError(f"{MANIFEST} has {first.size} bytes, more than {MAX_MANIFEST_BYTES}")
    return _checked_records(tar.extractfile(first).read())


def _read_hashed(tar: tarfile.TarFile, member: tarfile.TarInfo) -> tuple[bytes, str]:
    """The member's bytes and their SHA-256, in one pass over the stream."""
    reader = tar.extractfile(member)
    sha256, chunks = hashlib.sha256(), []
    while chunk := reader.read(_CHUNK):
        sha256.update(chunk)
        chunks.append(chunk)
    return b"".join(chunks), sha256.hexdigest()


def _clipped(text: str, limit: int = 200) -> str:
    """`text` cut to `limit` characters: a hostile record makes no megabyte message,
    repeated for each member."""
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass
class _Progress:
    """How far the reading of a bundle got: what import reports once it stops."""

    unusable: str | None = None
    """Why the manifest cannot be used, once known."""
    names: list[str] = field(default_factory=list)
    """The members met besides an unusable manifest."""
    unmet: dict[str, dict] | None = None
    """The manifest's records whose file the bundle has not shown yet, once it is read."""


def _walk(
    tar: tarfile.TarFile, stream: _Counted, progress: _Progress, report: Report
) -> Iterator[tuple[dict, bytes]]:
    """Each file the manifest names, in bundle order, read once and yielded when its size
    and SHA-256 match its record; other members are skipped unread. The stream may
    unpack to the manifest, SLACK_BYTES, and for each named file met, its declared size
    and MEMBER_OVERHEAD: a file the manifest declares but the bundle lacks makes no
    room for members it does not name."""
    members = (member for member in tar if member.isfile())
    first = next(members, None)
    try:
        records = _manifest_records(tar, first)
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        progress.unusable = _clipped(str(e))
        if first is not None and first.name != MANIFEST:
            progress.names.append(first.name)
        for member in members:
            progress.names.append(member.name)
        return
    progress.unmet = dict(records)
    stream.limit = stream.count + SLACK_BYTES
    for member in members:
        record = progress.unmet.pop(member.name, None)
        if record is None:
            why = "a second copy, not read" if member.name in records else f"not in {MANIFEST}"
            report.skipped.append((member.name, why))
            continue
        stream.limit += record["bytes"] + MEMBER_OVERHEAD
        if member.size != record["bytes"]:
            why = f"{member.size} bytes in the bundle, {record['bytes']} in {MANIFEST}"
            report.skipped.append((member.name, why))
            continue
        data, sha256 = _read_hashed(tar, member)
        if sha256 != record["sha256"]:
            report.skipped.append((member.name, "SHA-256 differs from the manifest's"))
            continue
        yield record, data


def _report_unread(
    progress: _Progress, path: Path, stop: str, overrun: bool, report: Report
) -> None:
    """Adds to `report.skipped` what the reading of the bundle at `path` left: the
    manifest's files not met, or, with no usable manifest, every member. `stop`: what
    ended the reading early, if anything; `overrun`: whether that was an _Overrun."""
    if progress.unmet is not None:
        if overrun:
            report.skipped.append((str(path), stop))
            why = f"not reached ({stop})"
        else:
            why = "missing from the bundle" + (f" (it ends early: {stop})" if stop else "")
        report.skipped += [(file, why) for file in progress.unmet]
    elif progress.unusable is not None:
        why = f"{progress.unusable}; {stop}" if stop else progress.unusable
        why = f"the bundle has no usable {MANIFEST} ({why})"
        report.skipped += [(name, why) for name in progress.names] or [(path.name, why)]
    else:  # it stopped before the manifest was read
        report.skipped.append((str(path), f"cannot read it ({stop})"))


def _verified_files(path: Path, report: Report) -> Iterator[tuple[dict, bytes]]:
    """The files of the bundle at `path` that match its manifest (_walk); what else it
    holds, what it lacks and what stopped the reading go to `report.skipped`. Only
    reading errors are caught here: the caller's publishing runs outside this frame."""
    progress, stop, overrun = _Progress(), "", False
    try:
        with path.open("rb") as raw:
            stream = _Counted(_unpacked(raw), MAX_MANIFEST_BYTES + SLACK_BYTES)
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                yield from _walk(tar, stream, progress, report)
    except _Overrun as e:
        stop, overrun = str(e), True
    except (OSError, EOFError, tarfile.TarError, zlib.error) as e:
        stop = f"{type(e).__name__}: {e}"
    _report_unread(progress, path, stop, overrun, report)


def _publish(cache: DiskCache, record: dict, data: bytes, report: Report) -> None:
    """Publishes a verified file into its folder of `cache`, under the entry's lock,
    unless the entry's own header fails or the cache holds it already."""
    file, name, digest = record["file"], record["name"], record["digest"]
    try:
        image = decode(data)
    except CorruptEntry as e:
        report.skipped.append((file, str(e)))
        return
    target = DiskCache(cache.root.joinpath(*PurePosixPath(file).parts[:-1]))
    if not target.usable():  # it warned why
        report.skipped.append((file, f"{target.root} is not writable"))
        return
    with target.lock(name, digest, config().lock_timeout) as held:
        if target.load(name, digest) == image:
            report.present.append(file)
            return
        try:
            target.store(name, digest, image, held=held)
        except OSError as e:
            report.skipped.append((file, f"could not publish it ({e})"))
            return
    report.done.append(file)


def import_bundle(cache: DiskCache, path: Path) -> Report:
    """Publishes into `cache` every entry of the bundle at `path` that verifies."""
    report = Report()
    for record, data in _verified_files(path, report):
        _publish(cache, record, data, report)
    return report
