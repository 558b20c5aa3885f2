"""sycl_kernels.compat._namespaces: an engine's own op names (``torch.ops._C.rms_norm``)
defined on the compat functions, for an engine that calls its kernels through torch.ops.

Nothing here runs at import: an engine module's ``register()`` calls ``define_ops`` with
its table. Each op is defined under the engine's namespace with the engine's schema (so
its graph passes, which match ``torch.ops._C.rms_norm.default``, find it), with the
compat function as its CPU and XPU kernel and a fake kernel for tracing. An op whose
name is already taken (the engine's own kernels are loaded) is left as it is: its
schema and kernels are someone else's, and replacing them would change what the engine
runs.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger("sycl_kernels")

# The dispatch keys of the devices the compat functions run on.
_DEVICE_KEYS = ("CPU", "XPU")

# A definition lives as long as its Library: these are never dropped.
_LIBRARIES: list[torch.library.Library] = []


@dataclass(frozen=True)
class EngineOp:
    """One op of an engine: its namespace, its schema as the engine writes it (the name
    first), the compat function run for it, and for an op that returns tensors a fake
    that allocates them (an op that only writes its arguments has a fake that does
    nothing)."""

    namespace: str
    schema: str
    function: Callable[..., Any]
    fake: Callable[..., Any] | None = None

    @property
    def name(self) -> str:
        return self.schema.split("(", 1)[0].strip()

    @property
    def qualname(self) -> str:
        return f"{self.namespace}::{self.name}"


@dataclass(frozen=True)
class Registration:
    """What ``register()`` did: ``registered``, per namespace, the ops defined here (in
    the table's order); ``left_alone``, per ``"namespace::name"``, where the op that
    already had the name was registered (torch's record of it), untouched."""

    registered: dict[str, tuple[str, ...]]
    left_alone: dict[str, str]


def _writes_only(*args: Any, **kwargs: Any) -> None:
    """The fake kernel of an op that returns nothing: what it writes keeps its metadata."""


def _registered_at(qualname: str) -> str:
    """Where torch says the op's schema was registered ("registered at <file>:<line>")."""
    for line in torch._C._dispatch_dump(qualname).splitlines():
        if line.startswith("debug: "):
            return line.removeprefix("debug: ")
    return "registered elsewhere"


def define_ops(caller: str, table: Sequence[EngineOp]) -> Registration:
    """Defines each op of `table` whose name is free, and leaves the others alone
    (warning once, under `caller`'s name, that it did)."""
    registered: dict[str, list[str]] = {}
    left_alone: dict[str, str] = {}
    libraries: dict[str, torch.library.Library] = {}
    for entry in table:
        if torch._C._jit_get_schemas_for_operator(entry.qualname):
            left_alone[entry.qualname] = _registered_at(entry.qualname)
            continue
        lib = libraries.get(entry.namespace)
        if lib is None:
            lib = libraries[entry.namespace] = torch.library.Library(entry.namespace, "FRAGMENT")
            _LIBRARIES.append(lib)
        lib.define(entry.schema)
        for key in _DEVICE_KEYS:
            lib.impl(entry.name, entry.function, key)
        torch.library.register_fake(entry.qualname, entry.fake or _writes_only, lib=lib)
        registered.setdefault(entry.namespace, []).append(entry.name)
    if registered:
        log.info(
            "%s: defined %s",
            caller,
            ", ".join(f"{len(names)} ops in {ns}" for ns, names in registered.items()),
        )
    if left_alone:
        warnings.warn(
            f"{caller}: {len(left_alone)} of its {len(table)} ops are already registered "
            f"and left as they are: {', '.join(left_alone)}",
            stacklevel=3,
        )
    return Registration({ns: tuple(names) for ns, names in registered.items()}, left_alone)
