"""sycl_kernels.jit.compiler: runs the device compiler (sycl-kernels-compile) as a process.

A compile in a process of its own cannot take the caller down: the compiler and
the device backend it drives have crashed on valid kernels before, and a crash,
a hang or a rejected source all become a KernelCompileError here. The tool also
builds the image for the device, so a backend crash shows there, before the
caller loads the image. The wheel build runs the same tool with the same request
format for the AOT variants.
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .. import _runtime
from .sources import CompileInputs

TIMEOUT_SECONDS = 600.0


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
    lines = [f"# {comment}", f"source\t{source}"]
    lines += [f"header\t{name}\t{path}" for name, path in headers]
    lines += [f"option\t{option}" for option in options]
    lines += [f"image\t{kernel}\t{path}" for kernel, path in images]
    return "\n".join(lines) + "\n"


def compile_out_of_process(
    inputs: CompileInputs, device_type: str, timeout: float = TIMEOUT_SECONDS
) -> bytes:
    """The image of `inputs`, compiled by the tool for a `device_type` (cpu or gpu) device."""
    with tempfile.TemporaryDirectory(prefix="sycl-kernels-compile-") as scratch:
        folder = Path(scratch)
        source = folder / "source.cpp"
        source.write_text(inputs.source)
        headers = []
        for index, (name, text) in enumerate(inputs.headers):
            path = folder / f"header{index}.hpp"
            path.write_text(text)
            headers.append((name, path))
        request = folder / "request"
        request.write_text(request_text(inputs.name, source, headers, inputs.all_options))
        image = folder / "image"
        executable = tool()
        try:
            result = subprocess.run(
                [str(executable), str(request), str(image), device_type],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=_runtime.compiler_env(),
            )
        except subprocess.TimeoutExpired:
            raise KernelCompileError(
                f"{inputs.name}: the device compiler did not finish in {timeout:g} s"
            ) from None
        except OSError as e:
            raise KernelCompileError(f"{inputs.name}: cannot run {executable}: {e}") from None
        if result.returncode < 0:
            raise KernelCompileError(
                f"{inputs.name}: the device compiler crashed "
                f"({signal.Signals(-result.returncode).name}); its output:\n{result.stderr}"
            )
        if result.returncode != 0:
            raise KernelCompileError(f"{inputs.name}: {result.stderr.strip()}")
        return image.read_bytes()
