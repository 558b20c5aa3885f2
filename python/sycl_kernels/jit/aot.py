"""sycl_kernels.jit.aot: looks up the device images the wheel was built with (sycl_kernels/aot/)."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import warnings
from pathlib import Path

from ..toolchain.sources import (
    IMAGE_FORMAT,
    MANIFEST_NAME,
    PACKAGE_DIR,
    SPIRV_TARGET,
    CompileInputs,
)

AOT_DIR = PACKAGE_DIR / "aot"

log = logging.getLogger("sycl_kernels")


@functools.cache
def manifest(aot_dir: Path | None = None) -> dict[str, dict]:
    """{variant name: entry} of the bundled images; empty for a build without AOT."""
    path = (aot_dir or AOT_DIR) / MANIFEST_NAME
    try:
        return {entry["name"]: entry for entry in json.loads(path.read_text())["variants"]}
    except FileNotFoundError:
        return {}
    except (ValueError, KeyError, TypeError) as e:
        warnings.warn(
            f"sycl_kernels: ignoring unreadable {path} ({e})", RuntimeWarning, stacklevel=2
        )
        return {}


def _current_entry(inputs: CompileInputs, aot_dir: Path) -> dict | None:
    """The manifest entry of an image compiled from exactly `inputs` that loads here."""
    entry = manifest(aot_dir).get(inputs.name)
    if entry is None:
        return None
    if entry["format"] != IMAGE_FORMAT or entry["target"] != SPIRV_TARGET:
        log.debug(
            "%s: AOT image is %s/%s, not loadable here",
            inputs.name,
            entry["format"],
            entry["target"],
        )
        return None
    if entry["input_hash"] != inputs.portable_digest():
        log.debug("%s: AOT image was built from other inputs; compiling instead", inputs.name)
        return None
    return entry


def is_bundled(inputs: CompileInputs, aot_dir: Path | None = None) -> bool:
    """Whether the build bundles an image of exactly `inputs` (its bytes are not read)."""
    return _current_entry(inputs, aot_dir or AOT_DIR) is not None


def find_image(inputs: CompileInputs, aot_dir: Path | None = None) -> bytes | None:
    """The bundled image compiled from exactly `inputs`, or None (the JIT then compiles)."""
    aot_dir = aot_dir or AOT_DIR
    entry = _current_entry(inputs, aot_dir)
    if entry is None:
        return None
    path = aot_dir / entry["image"]
    try:
        image = path.read_bytes()
    except OSError as e:
        warnings.warn(
            f"sycl_kernels: AOT image {path} unreadable ({e}); compiling {inputs.name}",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    if hashlib.sha256(image).hexdigest() != entry["sha256"]:
        warnings.warn(
            f"sycl_kernels: AOT image {path} is corrupt (checksum mismatch); "
            f"compiling {inputs.name}",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return image
