"""sycl_kernels.jit.batch: many kernels into the disk cache, in a few compiles.

Starting the device compiler costs about 0.7 s; one more small kernel in the same
compile about 0.1 s, its device build included. So the kernels missing from every
cache are compiled in groups (one translation unit, one image per kernel: the
AOT build's per-kernel split), the groups in parallel, and each image is cached
under its own kernel's key, exactly where a compile of that kernel alone would
have put it. A group is compiled under its members' cross-process locks (taken in
name order, so two processes never wait on each other). A group the compiler
rejects is compiled again one kernel at a time, so each error names its kernel.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from .. import _runtime
from .._config import config
from ..specs.spec import KernelSpec
from ..toolchain.compiler import KernelCompileError
from ..toolchain.sources import CompileInputs, compile_inputs
from . import aot
from .cache import disk_cache
from .loader import compile_image, compile_images, from_shared_caches

# Kernels per compile: big enough that starting the compiler is a small part of
# it, small enough that there are groups for every core.
MAX_GROUP = 24


@dataclass(frozen=True)
class Precompiled:
    name: str
    origin: str
    """"aot" (the wheel has it), "disk" (a cache had it) or "compiled"."""


def _groups(missing: list[CompileInputs], workers: int) -> list[list[CompileInputs]]:
    """Kernels with the same headers and options together, in chunks that keep
    `workers` compiles busy."""
    by_unit: dict[tuple, list[CompileInputs]] = {}
    for inputs in missing:
        key = (tuple(name for name, _ in inputs.headers), inputs.all_options)
        by_unit.setdefault(key, []).append(inputs)
    size = max(1, min(MAX_GROUP, math.ceil(len(missing) / workers)))
    return [
        members[start : start + size]
        for members in by_unit.values()
        for start in range(0, len(members), size)
    ]


def _compile_group(group: list[CompileInputs], queue) -> tuple[list[str], list[KernelCompileError]]:
    """Compiles and caches the members of `group` not cached yet (another process may
    have meanwhile): the names compiled here, and the errors of those that failed."""
    cache = disk_cache()
    with contextlib.ExitStack() as locks:
        held = {
            m.name: locks.enter_context(cache.lock(m.name, m.digest(), config().lock_timeout))
            for m in sorted(group, key=lambda m: m.name)
        }
        todo = [m for m in group if cache.load(m.name, m.digest()) is None]
        compiled, errors = [], []
        if not todo:
            return compiled, errors
        try:
            images = compile_images(todo, queue) if len(todo) > 1 else {}
        except KernelCompileError:
            images = {}
        for inputs in todo:
            image = images.get(inputs.name)
            if image is None:
                try:
                    image = compile_image(inputs, queue)
                except KernelCompileError as e:
                    errors.append(e)
                    continue
            cache.store(inputs.name, inputs.digest(), image, held=held[inputs.name])
            compiled.append(inputs.name)
        return compiled, errors


def precompile(
    specs: Iterable[KernelSpec],
    queue=None,
    *,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Precompiled]:
    """Puts an image of each of `specs` in the disk cache, for the queue's device
    (default: the CPU device), unless the wheel or a cache has one; returns where each
    came from, in `specs`' order, without duplicates.

    Missing kernels are compiled in groups, `workers` (default: one per core) at a
    time; `progress(done, total)` is called as groups finish, counting missing
    kernels. Raises KernelCompileError, listing every kernel that did not compile,
    after caching the others; RuntimeError if the private cache cannot be written;
    ValueError, naming the kernel, if a spec's headers cannot be read.
    """
    queue = queue if queue is not None else _runtime.cpu_queue()
    cache = disk_cache()
    if not cache.usable():
        raise RuntimeError(f"precompile: the kernel cache {cache.root} cannot be written")
    workers = workers or os.cpu_count() or 1
    origins: dict[str, str] = {}
    missing = []
    for spec in specs:
        if spec.name in origins:
            continue
        try:
            inputs = compile_inputs(spec)
        except (OSError, ValueError) as e:  # a header missing, or one outside the folders
            raise ValueError(f"{spec.name}: {e}") from None
        if aot.find_image(inputs) is not None:
            origins[spec.name] = "aot"
        elif cache.load(inputs.name, inputs.digest()) is not None or from_shared_caches(
            inputs.name, inputs.digest()
        ):
            origins[spec.name] = "disk"
        else:
            origins[spec.name] = "disk"  # unless compiled below
            missing.append(inputs)
    errors: list[KernelCompileError] = []
    groups = _groups(missing, workers)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        sizes = {pool.submit(_compile_group, group, queue): len(group) for group in groups}
        done = 0
        for future in as_completed(sizes):
            compiled, failed = future.result()
            origins.update(dict.fromkeys(compiled, "compiled"))
            errors += failed
            done += sizes[future]
            if progress is not None:
                progress(done, len(missing))
    if errors:
        raise KernelCompileError(
            f"precompile: {len(errors)} kernels did not compile:\n"
            + "\n".join(str(e) for e in errors)
        )
    return [Precompiled(name, origin) for name, origin in origins.items()]
