"""sycl_kernels.toolchain.compiler: runs the device compiler (sycl-kernels-compile) as a process.

A compile in a process of its own cannot take the caller down: the compiler and
the device backend it drives have crashed on valid kernels before, and a crash,
a hang or a rejected source all become a KernelCompileError here. The tool also
builds the image for the device, so a backend crash shows there, before the
caller loads the image. compile_group_out_of_process runs it once for many kernels
(jit/batch.py), one image each; the wheel build runs that form, with the same
request format, for the AOT variants.
"""

from __future__ import annotations

import re
import signal
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from .. import _runtime
from .sources import CompileInputs

TIMEOUT_SECONDS = 600.0
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class KernelCompileError(RuntimeError):
    """The device compiler rejected a kernel, crashed or hung; the message carries its log."""


def tool() -> Path:
    """The compile tool of the active runtime line."""
    return _runtime.line_dir() / "sycl-kernels-compile"


def request_text(
    comment: str,
    source: Path,
    headers: Iterable[tuple[str, Path]],
    options: Iterable[str],
    images: Iterable[tuple[str, Path]] = (),
) -> str:
    """A request file for the tool: the source, each header by include name, each flag,
    and for `sycl-kernels-compile --per-kernel` where each kernel's image goes."""
    headers, options, images = list(headers), list(options), list(images)
    # One line a field, tab-separated: a control character in a value would forge another.
    values = [comment, str(source), *options, *(str(v) for pair in headers + images for v in pair)]
    forged = next((v for v in values if _CONTROL.search(v)), None)
    if forged is not None:
        raise ValueError(f"compile request: {forged!r} holds a control character")
    lines = [f"# {comment}", f"source\t{source}"]
    lines += [f"header\t{name}\t{path}" for name, path in headers]
    lines += [f"option\t{option}" for option in options]
    lines += [f"image\t{kernel}\t{path}" for kernel, path in images]
    return "\n".join(lines) + "\n"


def _write_unit(
    folder: Path, source: str, headers: Iterable[tuple[str, str]]
) -> tuple[Path, list[tuple[str, Path]]]:
    """Writes a translation unit and its headers into `folder`: (source path, headers)."""
    source_path = folder / "source.cpp"
    source_path.write_text(source)
    written = []
    for index, (name, text) in enumerate(headers):
        path = folder / f"header{index}.hpp"
        path.write_text(text)
        written.append((name, path))
    return source_path, written


def _run_tool(args: list[str], what: str, timeout: float) -> None:
    """Runs the tool; a rejection, crash or hang is a KernelCompileError about `what`."""
    executable = tool()
    try:
        result = subprocess.run(
            [str(executable), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_runtime.compiler_env(),
        )
    except subprocess.TimeoutExpired:
        raise KernelCompileError(
            f"{what}: the device compiler did not finish in {timeout:g} s"
        ) from None
    except OSError as e:
        raise KernelCompileError(f"{what}: cannot run {executable}: {e}") from None
    if result.returncode < 0:
        raise KernelCompileError(
            f"{what}: the device compiler crashed "
            f"({signal.Signals(-result.returncode).name}); its output:\n{result.stderr}"
        )
    if result.returncode != 0:
        raise KernelCompileError(f"{what}: {result.stderr.strip()}")


def compile_out_of_process(
    inputs: CompileInputs, device_type: str, timeout: float = TIMEOUT_SECONDS
) -> bytes:
    """The image of `inputs`, compiled by the tool for a `device_type` (cpu or gpu) device."""
    with tempfile.TemporaryDirectory(prefix="sycl-kernels-compile-") as scratch:
        folder = Path(scratch)
        source, headers = _write_unit(folder, inputs.source, inputs.headers)
        request = folder / "request"
        request.write_text(request_text(inputs.name, source, headers, inputs.all_options))
        image = folder / "image"
        _run_tool([str(request), str(image), device_type], inputs.name, timeout)
        return image.read_bytes()


def compile_group_out_of_process(
    members: Sequence[CompileInputs], device_type: str, timeout: float = TIMEOUT_SECONDS
) -> dict[str, bytes]:
    """The images of `members` from one compile of their units together: name -> image.

    Each image holds its one kernel, built for a `device_type` device, as
    compile_out_of_process would give it (-fsycl-device-code-split=per_kernel).
    The members must share their options.
    """
    options = {m.all_options for m in members}
    if len(options) != 1:
        raise ValueError("a compile group's members must share their options")
    names = [m.name for m in members]
    headers = {name: text for m in members for name, text in m.headers}
    with tempfile.TemporaryDirectory(prefix="sycl-kernels-compile-") as scratch:
        folder = Path(scratch)
        source, header_paths = _write_unit(
            folder, "".join(m.source for m in members), sorted(headers.items())
        )
        images = [(name, folder / f"{name}.spv") for name in names]
        request = folder / "request"
        request.write_text(
            request_text(f"{len(members)} kernels", source, header_paths, options.pop(), images)
        )
        _run_tool(
            ["--per-kernel", str(request), "--device-build", device_type],
            f"the group of {', '.join(names)}",
            timeout,
        )
        return {name: path.read_bytes() for name, path in images}
