"""sycl_kernels.jit.cache: the disk caches of compiled images, one file per input hash.

The private cache (SYCL_KERNELS_CACHE_DIR) is written; shared caches
(SYCL_KERNELS_SHARED_CACHE_DIRS) are only read. An entry is written to a staging
file named for this host and process in the same folder, fsynced and published
with os.replace, so readers see a whole entry or none, on NFS too; publishing an
entry removes the staging files of writers of it that died. Each entry carries the
SHA-256 of its image; a private entry that fails the check is deleted and rebuilt,
a shared one skipped. Locks are per entry (filelock, released by the OS if the
holder dies); a lock held longer than SYCL_KERNELS_LOCK_TIMEOUT (a hung process) is
passed by, with a warning; a filesystem without locks degrades to checking each
entry after publishing it, with one warning. A private cache folder that cannot be
written degrades to compiling in memory, with one warning.

Trust (docs/jit.md#trust): an entry is read only if it is a regular file (opened
without following a symbolic link, never blocking on a FIFO or device), owned by
this user or root and writable by no one else, and no larger than its header
declares (at most MAX_IMAGE_BYTES). A shared cache folder is used only if it, and
every folder above it, is owned by this user or root and writable by no one else
(a sticky folder such as /tmp excepted above it), as ssh's StrictModes asks of
~/.ssh; else it is passed by with one warning saying why. Entries are published
readable by all (0644, less the umask), so a cache one user fills serves others.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import os
import re
import secrets
import socket
import stat
import struct
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .._config import config

_MAGIC = b"SYKC"
_VERSION = 1
# magic, format version, image length, SHA-256 of the image
_HEADER = struct.Struct("<4sIQ32s")
ENTRY_HEADER_BYTES = _HEADER.size
ENTRY_SUFFIX = ".img"
# A device image or native binary is KBs to a few MB; a header declaring more is forged.
MAX_IMAGE_BYTES = 64 << 20
# In staging file names: writers on other hosts share a network folder.
_HOST = socket.gethostname()
# Entry names become file names: no separator, no leading dot; digests are hex.
_ENTRY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", re.ASCII)
_DIGEST = re.compile(r"[0-9a-f]+", re.ASCII)


class CorruptEntry(Exception):
    pass


class UntrustedEntry(CorruptEntry):
    """An entry file others could have written (see the module doc)."""


@dataclass(frozen=True)
class Entry:
    name: str
    digest: str
    path: Path
    size: int


def encode(image: bytes) -> bytes:
    return _HEADER.pack(_MAGIC, _VERSION, len(image), hashlib.sha256(image).digest()) + image


def _parse_header(header: bytes) -> tuple[int, bytes]:
    """(image length, SHA-256) from an entry's header; CorruptEntry if it is not one."""
    if len(header) < _HEADER.size:
        raise CorruptEntry(f"{len(header)} bytes, shorter than the header")
    magic, version, length, checksum = _HEADER.unpack_from(header)
    if magic != _MAGIC or version != _VERSION:
        raise CorruptEntry(f"not a version-{_VERSION} cache entry")
    if length > MAX_IMAGE_BYTES:
        raise CorruptEntry(f"the header declares {length} bytes, more than {MAX_IMAGE_BYTES}")
    return length, checksum


def _checked(image: bytes, length: int, checksum: bytes) -> bytes:
    if len(image) != length:
        raise CorruptEntry(f"image has {len(image)} bytes, the header says {length}")
    if hashlib.sha256(image).digest() != checksum:
        raise CorruptEntry("checksum mismatch")
    return image


def decode(data: bytes) -> bytes:
    length, checksum = _parse_header(data[: _HEADER.size])
    return _checked(data[_HEADER.size :], length, checksum)


def entry_file_name(name: str, digest: str) -> str:
    """The file name of an entry; ValueError for a name or digest that could leave the
    folder or hide in it."""
    if not (
        isinstance(name, str)
        and isinstance(digest, str)
        and _ENTRY_NAME.fullmatch(name)
        and _DIGEST.fullmatch(digest)
    ):
        raise ValueError(
            f"cache entry {name!r}.{digest!r}: a name is letters, digits, '_', '.' and '-' "
            "not starting with '.', a digest is hexadecimal"
        )
    return f"{name}.{digest}{ENTRY_SUFFIX}"


def _kind(error: CorruptEntry) -> str:
    return "untrusted" if isinstance(error, UntrustedEntry) else "corrupt"


def writable_by_others(st: os.stat_result) -> str:
    """Why a file or folder with this status is not trusted, or "" when it is: owned
    by this user or root, and writable by neither its group nor others."""
    if st.st_uid not in (os.geteuid(), 0):
        return f"owned by uid {st.st_uid}, not by this user or root"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by {'others' if st.st_mode & stat.S_IWOTH else 'its group'}"
    return ""


def read_entry(path: Path) -> bytes:
    """The image of the entry file at `path`, read no further than its header declares.

    FileNotFoundError if there is none; CorruptEntry if it is anything but a trusted
    regular file holding a whole entry (a symbolic link, a FIFO or a device is refused
    without being read or waited on).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise CorruptEntry("a symbolic link, not an entry file") from None
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CorruptEntry("not a regular file")
        distrust = writable_by_others(st)
        if distrust:
            raise UntrustedEntry(distrust)
        length, checksum = _parse_header(f.read(_HEADER.size))
        if st.st_size != _HEADER.size + length:
            raise CorruptEntry(f"{st.st_size} bytes, the header says {_HEADER.size + length}")
        return _checked(f.read(length), length, checksum)


def folder_distrust(root: Path) -> str:
    """Why a shared cache folder is not used, or "" when it is (see the module doc).

    Every folder from the root of the filesystem down to `root` is checked: one that
    others may write could have `root` renamed away and replaced, unless it is sticky.
    """
    try:
        resolved = root.resolve(strict=True)
    except OSError as e:
        return f"it cannot be read ({e.strerror or e})"
    for folder in (resolved, *resolved.parents):
        st = folder.stat()
        if not stat.S_ISDIR(st.st_mode):
            return f"{folder} is not a folder"
        distrust = writable_by_others(st)
        if folder != resolved and st.st_mode & stat.S_ISVTX and st.st_uid in (os.geteuid(), 0):
            distrust = ""
        if distrust:
            return f"{folder} is {distrust}" if folder != resolved else f"it is {distrust}"
    return ""


@contextlib.contextmanager
def staged(path: Path, prefix: str) -> Iterator[BinaryIO]:
    """A staging file beside `path` (named `prefix`...`.tmp`), fsynced and renamed onto
    `path` when the block ends: readers see the whole file or none. Removed on error.

    Created 0644 less the umask (mkstemp's 0600 would keep a cache one user fills
    from serving others); O_EXCL on a random name, so no other file is written.
    """
    staging = path.parent / f"{prefix}{secrets.token_hex(8)}.tmp"
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(staging, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staging)
        raise


def _process_is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


class ReadOnlyCache:
    """A cache folder that is read, never written, locked or healed: a shared cache.

    Used only while folder_distrust() finds nothing wrong with it; else every lookup
    misses, after one warning.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._distrust: str | None = None

    def problem(self) -> str:
        """Why this folder is not used, or "" when it is (or is absent), checked now."""
        return folder_distrust(self.root) if self.root.exists() else ""

    def distrust(self) -> str:
        """problem(), checked once and warned once."""
        if self._distrust is None:
            self._distrust = self.problem()
            if self._distrust:
                warnings.warn(
                    f"sycl_kernels: not using shared cache {self.root}: {self._distrust} "
                    "(docs/jit.md#trust)",
                    RuntimeWarning,
                    stacklevel=5,
                )
        return self._distrust

    def entry_path(self, name: str, digest: str) -> Path:
        return self.root / entry_file_name(name, digest)

    def load(self, name: str, digest: str) -> bytes | None:
        """The cached image, or None; a corrupt entry is reported (see _corrupt)."""
        path = self.entry_path(name, digest)
        if self.distrust():
            return None
        try:
            return read_entry(path)
        except FileNotFoundError:
            return None
        except CorruptEntry as e:
            self._corrupt(path, name, e)
        except OSError as e:
            warnings.warn(f"sycl_kernels: cannot read {path} ({e})", RuntimeWarning, stacklevel=4)
        return None

    def _corrupt(self, path: Path, name: str, error: CorruptEntry) -> None:
        warnings.warn(
            f"sycl_kernels: skipping {_kind(error)} shared cache entry {path} ({error}); "
            f"looking further for {name}, else compiling it into the private cache",
            RuntimeWarning,
            stacklevel=5,
        )

    def entries(self) -> list[Entry]:
        """Every entry file, device images and any other entry stored under a digest alike."""
        if not self.root.is_dir():
            return []
        found = []
        for path in sorted(self.root.glob(f"*{ENTRY_SUFFIX}")):
            name, _, digest = path.name.removesuffix(ENTRY_SUFFIX).rpartition(".")
            with contextlib.suppress(OSError):
                st = path.lstat()
                if stat.S_ISREG(st.st_mode):
                    found.append(Entry(name, digest, path, st.st_size))
        return found


class DiskCache(ReadOnlyCache):
    """The private cache: written, locked and healed."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._usable: bool | None = None
        self._lockless = False

    def problem(self) -> str:
        """The private folder is the user's own; each entry is still checked as it is read."""
        return ""

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

    def _corrupt(self, path: Path, name: str, error: CorruptEntry) -> None:
        warnings.warn(
            f"sycl_kernels: deleting {_kind(error)} cache entry {path} ({error}); "
            f"rebuilding {name}",
            RuntimeWarning,
            stacklevel=5,
        )
        with contextlib.suppress(OSError):
            path.unlink()

    def store(self, name: str, digest: str, image: bytes, *, held: bool) -> None:
        """Publishes an entry; `held`: whether the caller holds its lock (from lock()).

        Without the lock the entry is read back and checked after publishing: other
        writers of it write the same bytes, so whichever rename lands last is right,
        and a check that fails means the filesystem lost or tore the write.
        """
        path = self.entry_path(name, digest)
        with staged(path, f".{path.name}.{_HOST}.{os.getpid()}.") as f:
            f.write(encode(image))
        self._remove_dead_staging(path, held)
        if not held:
            try:
                problem = "" if read_entry(path) == image else "it holds another image"
            except CorruptEntry as e:
                problem = str(e)
            if problem:
                raise OSError(f"{path} failed its check after publishing ({problem})")

    def _remove_dead_staging(self, path: Path, held: bool) -> None:
        """Removes staging files of this entry whose writers died.

        A writer on this host is dead when its pid is; one on another host (or a
        name not of this form) can be judged only under the entry's lock, when no
        writer of the entry is running.
        """
        prefix = f".{path.name}."
        for staging in self.root.glob(f"{glob.escape(prefix)}*.tmp"):
            writer = staging.name[len(prefix) : -len(".tmp")].rpartition(".")[0]
            host, _, pid = writer.rpartition(".")
            if host == _HOST and pid.isdecimal():
                dead = int(pid) != os.getpid() and not _process_is_alive(int(pid))
            else:
                dead = held
            if dead:
                with contextlib.suppress(OSError):
                    staging.unlink()

    @contextlib.contextmanager
    def lock(self, name: str, digest: str, timeout: float) -> Iterator[bool]:
        """Holds this entry's cross-process lock (other entries stay free); yields
        whether it is held.

        After `timeout` seconds of waiting it goes on without the lock: the holder is
        alive (a dead one's lock is released by the OS) but stuck, and a duplicate
        compile costs less than waiting forever. On a filesystem that refuses locks
        (NFS without lockd) it goes on without them, warning once.
        """
        if self._lockless:
            yield False
            return
        # Imported here: only a compile takes a lock, and filelock costs ~45 ms
        # of `import sycl_kernels` otherwise.
        import filelock

        lock = filelock.FileLock(self.entry_path(name, digest).with_suffix(".lock"))
        held = False
        try:
            lock.acquire(timeout=timeout)
            held = True
        except filelock.Timeout:
            warnings.warn(
                f"sycl_kernels: {name} has been locked by another process for {timeout:g} s "
                "(SYCL_KERNELS_LOCK_TIMEOUT); compiling it here too",
                RuntimeWarning,
                stacklevel=4,
            )
        # NotImplementedError: older filelock releases on a filesystem without flock.
        except (OSError, NotImplementedError) as e:
            self._lockless = True
            warnings.warn(
                f"sycl_kernels: cannot lock cache entries in {self.root} ({e}); "
                "publishing them without locks and checking each after publishing",
                RuntimeWarning,
                stacklevel=4,
            )
        try:
            yield held
        finally:
            if held:
                lock.release()

    def get_or_create(
        self, name: str, digest: str, create: Callable[[], bytes]
    ) -> tuple[bytes, bool]:
        """The entry's image, else `create()`'s, stored: (image, whether create ran).

        Looked up again under the entry's lock, so of the processes that miss an entry
        at once one creates it and the others load it. An image that cannot be stored
        is returned all the same, with a warning: the caller needs it more than the
        cache does.
        """
        image = self.load(name, digest)
        if image is not None:
            return image, False
        with self.lock(name, digest, config().lock_timeout) as held:
            image = self.load(name, digest)
            if image is not None:
                return image, False
            image = create()
            try:
                self.store(name, digest, image, held=held)
            except OSError as e:
                warnings.warn(
                    f"sycl_kernels: could not cache {name} ({e})",
                    RuntimeWarning,
                    stacklevel=3,  # the caller's caller: the code that wanted the image
                )
            return image, True

    def clear(self) -> int:
        """Deletes every entry and leftover staging file; returns the entry count.

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


_shared: dict[tuple[Path, ...], tuple[ReadOnlyCache, ...]] = {}


def shared_caches() -> tuple[ReadOnlyCache, ...]:
    """The caches at SYCL_KERNELS_SHARED_CACHE_DIRS, in the order they are consulted."""
    roots = config().shared_cache_dirs
    caches = _shared.get(roots)
    if caches is None:
        caches = _shared[roots] = tuple(ReadOnlyCache(root) for root in roots)
    return caches
