"""sycl_kernels.jit.cache: the disk cache of compiled images, one file per input hash.

An entry is written to a temporary file in the same folder, fsynced and published
with os.replace, so readers see a whole entry or none; publishing an entry removes
the temporary files of writers of it that died. Each entry carries the
SHA-256 of its image; an entry that fails the check is deleted and rebuilt. Locks
are per entry (filelock, released by the OS if the holder dies); a lock held longer
than SYCL_KERNELS_LOCK_TIMEOUT (a hung process) is passed by, with a warning. A
cache folder that cannot be written degrades to compiling in memory, with one warning.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import struct
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .._config import config

_MAGIC = b"SYKC"
_VERSION = 1
# magic, format version, image length, SHA-256 of the image
_HEADER = struct.Struct("<4sIQ32s")
ENTRY_SUFFIX = ".img"


class CorruptEntry(Exception):
    pass


@dataclass(frozen=True)
class Entry:
    name: str
    digest: str
    path: Path
    size: int


def encode(image: bytes) -> bytes:
    return _HEADER.pack(_MAGIC, _VERSION, len(image), hashlib.sha256(image).digest()) + image


def decode(data: bytes) -> bytes:
    if len(data) < _HEADER.size:
        raise CorruptEntry(f"{len(data)} bytes, shorter than the header")
    magic, version, length, checksum = _HEADER.unpack_from(data)
    if magic != _MAGIC or version != _VERSION:
        raise CorruptEntry(f"not a version-{_VERSION} cache entry")
    image = data[_HEADER.size :]
    if len(image) != length:
        raise CorruptEntry(f"image has {len(image)} bytes, the header says {length}")
    if hashlib.sha256(image).digest() != checksum:
        raise CorruptEntry("checksum mismatch")
    return image


class DiskCache:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._usable: bool | None = None

    def entry_path(self, name: str, digest: str) -> Path:
        return self.root / f"{name}.{digest}{ENTRY_SUFFIX}"

    def usable(self) -> bool:
        """Whether entries can be written here; warns once when not."""
        if self._usable is None:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryFile(dir=self.root):
                    pass
                self._usable = True
            except OSError as e:
                warnings.warn(
                    f"sycl_kernels: kernel cache {self.root} is not writable ({e}); "
                    "compiled kernels are kept in memory only "
                    "(set SYCL_KERNELS_CACHE_DIR to a writable folder)",
                    RuntimeWarning,
                    stacklevel=4,
                )
                self._usable = False
        return self._usable

    def load(self, name: str, digest: str) -> bytes | None:
        """The cached image, or None; a corrupt entry is deleted with a warning."""
        path = self.entry_path(name, digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            warnings.warn(f"sycl_kernels: cannot read {path} ({e})", RuntimeWarning, stacklevel=4)
            return None
        try:
            return decode(data)
        except CorruptEntry as e:
            warnings.warn(
                f"sycl_kernels: deleting corrupt cache entry {path} ({e}); rebuilding {name}",
                RuntimeWarning,
                stacklevel=4,
            )
            with contextlib.suppress(OSError):
                path.unlink()
            return None

    def store(self, name: str, digest: str, image: bytes) -> None:
        path = self.entry_path(name, digest)
        fd, temp = tempfile.mkstemp(dir=self.root, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(encode(image))
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        # Called under the entry's lock: any other temporary file of this entry was
        # left by a writer that died before publishing.
        for leftover in self.root.glob(f".{glob.escape(path.name)}.*.tmp"):
            with contextlib.suppress(OSError):
                leftover.unlink()

    @contextlib.contextmanager
    def lock(self, name: str, digest: str, timeout: float) -> Iterator[None]:
        """Holds this entry's cross-process lock (other entries stay free).

        After `timeout` seconds of waiting it goes on without the lock: the holder is
        alive (a dead one's lock is released by the OS) but stuck, and a duplicate
        compile costs less than waiting forever.
        """
        # Imported here: only a compile takes a lock, and filelock costs ~45 ms
        # of `import sycl_kernels` otherwise.
        import filelock

        lock = filelock.FileLock(self.root / f"{name}.{digest}.lock")
        try:
            lock.acquire(timeout=timeout)
        except filelock.Timeout:
            warnings.warn(
                f"sycl_kernels: {name} has been locked by another process for {timeout:g} s "
                "(SYCL_KERNELS_LOCK_TIMEOUT); compiling it here too",
                RuntimeWarning,
                stacklevel=4,
            )
            yield
            return
        try:
            yield
        finally:
            lock.release()

    def entries(self) -> list[Entry]:
        if not self.root.is_dir():
            return []
        found = []
        for path in sorted(self.root.glob(f"*{ENTRY_SUFFIX}")):
            name, _, digest = path.name.removesuffix(ENTRY_SUFFIX).rpartition(".")
            found.append(Entry(name, digest, path, path.stat().st_size))
        return found

    def clear(self) -> int:
        """Deletes every entry and leftover temporary file; returns the entry count.

        Lock files stay: deleting one another process holds would void its lock.
        """
        count = len(self.entries())
        if self.root.is_dir():
            for path in self.root.iterdir():
                if path.suffix in (ENTRY_SUFFIX, ".tmp") and path.is_file():
                    with contextlib.suppress(OSError):
                        path.unlink()
        return count


_caches: dict[Path, DiskCache] = {}


def disk_cache() -> DiskCache:
    """The cache at SYCL_KERNELS_CACHE_DIR (or the user cache folder)."""
    root = config().cache_dir
    cache = _caches.get(root)
    if cache is None:
        cache = _caches[root] = DiskCache(root)
    return cache
