"""cmake/sycl_runtime.py: locates a SYCL runtime line's headers and libsycl for CMake.

    python cmake/sycl_runtime.py installed            the intel-sycl-rt of this environment
    python cmake/sycl_runtime.py fetch VERSION DEST   intel-sycl-rt==VERSION from the index
    python cmake/sycl_runtime.py cpu-device           the OpenCL CPU runtime, or nothing

`installed` and `fetch` print "<include dir>;<libsycl.so.N>;<N>;<version>" (a CMake list).
Under pip's build isolation the wheel's data files are not under sys.prefix, so an
installed runtime is found through its distribution's file list. `fetch` downloads
the wheel with pip (no dependencies) and unpacks only the headers and the library
into DEST; an unpacked DEST is reused, and a half-unpacked one is never taken.
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

LIBSYCL = re.compile(r"libsycl\.so\.(\d+)$")


def _report(include_dir: Path, libsycl: Path, version: str) -> int:
    major = LIBSYCL.match(libsycl.name).group(1)
    print(f"{include_dir};{libsycl};{major};{version}", end="")
    return 0


def installed() -> int:
    try:
        dist = metadata.distribution("intel-sycl-rt")
    except metadata.PackageNotFoundError:
        print("intel-sycl-rt is not installed", file=sys.stderr)
        return 1
    header = libsycl = None
    for f in dist.files or []:
        if f.as_posix().endswith("include/sycl/sycl.hpp"):
            header = Path(str(dist.locate_file(f))).resolve()
        elif LIBSYCL.match(f.name):
            libsycl = Path(str(dist.locate_file(f))).resolve()
    if header is None or libsycl is None:
        print(f"intel-sycl-rt {dist.version} lacks sycl/sycl.hpp or libsycl.so.N", file=sys.stderr)
        return 1
    return _report(header.parent.parent, libsycl, dist.version)


def _unpack(wheel: Path, dest: Path) -> Path:
    """Unpacks the wheel's include/ and libsycl.so.N into dest; returns the library."""
    libsycl = None
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            _, _, data_path = member.partition(".data/data/")
            name = Path(data_path).name
            if data_path.startswith("include/") or (
                data_path.startswith("lib/") and LIBSYCL.match(name)
            ):
                target = dest / data_path
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as src, target.open("wb") as out:
                    shutil.copyfileobj(src, out)
                if LIBSYCL.match(name):
                    libsycl = target
    if libsycl is None or not (dest / "include" / "sycl" / "sycl.hpp").is_file():
        raise RuntimeError(f"{wheel.name} has no include/sycl/sycl.hpp or lib/libsycl.so.N")
    return libsycl


def fetch(version: str, dest: Path) -> int:
    done = dest / "version"
    if done.is_file() and done.read_text() == version:
        (libsycl,) = (p for p in (dest / "lib").iterdir() if LIBSYCL.match(p.name))
        return _report(dest / "include", libsycl, version)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{dest.name}-") as scratch:
        scratch = Path(scratch)
        download = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--dest",
                str(scratch / "wheel"),
                f"intel-sycl-rt=={version}",
            ],
            stdout=sys.stderr,
        )
        if download.returncode != 0:
            print(f"pip could not download intel-sycl-rt=={version}", file=sys.stderr)
            return 1
        (wheel,) = (scratch / "wheel").glob("*.whl")
        unpacked = scratch / "unpacked"
        _unpack(wheel, unpacked)
        (unpacked / "version").write_text(version)
        shutil.rmtree(dest, ignore_errors=True)
        unpacked.rename(dest)
    return fetch(version, dest)


def cpu_device() -> int:
    try:
        files = metadata.distribution("intel-opencl-rt").files or []
    except metadata.PackageNotFoundError:
        return 0
    for f in files:
        if f.name == "libintelocl.so":
            print(Path(str(f.locate())).resolve(), end="")
            break
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["installed"] and len(argv) == 1:
        return installed()
    if argv[:1] == ["fetch"] and len(argv) == 3:
        return fetch(argv[1], Path(argv[2]))
    if argv[:1] == ["cpu-device"] and len(argv) == 1:
        return cpu_device()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
