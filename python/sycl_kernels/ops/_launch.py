"""sycl_kernels.ops._launch: the one way an op launches its kernel: arguments bound by name.

An op's bind (ops/_op.py) returns ``bind_kernel(spec, like, groups, **values)``: every
parameter of the spec by its name (specs/<family>.py), never by position, checked
against the parameter's C type once per metadata: scalars by value (an int for an
integer, within its C type's range; a float for a float), pointers as an ``Address``
of one of the launch's arguments (by default the argument of the parameter's own
name). The op then turns
the binding into its launch, which reads only the addresses at each call.
"""

from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import torch

from .. import _runtime
from ..jit import get_kernel
from ..specs.spec import KernelSpec

Launch = Callable[..., None]
"""An op's launch bound to one metadata (ops/_op.py): it takes the op's arguments,
reads their addresses and launches."""

_KINDS = {"p": "a pointer", "i": "int32_t", "l": "int64_t", "f": "float", "d": "double"}


@dataclass(frozen=True)
class Address:
    """A pointer parameter's value: the data of the launch's argument `argument`,
    `offset` bytes in; a null pointer where that argument is None."""

    argument: str
    offset: int = 0


# The integer parameters' ranges, by signature letter.
_RANGES = {"i": (-(2**31), 2**31 - 1), "l": (-(2**63), 2**63 - 1)}


class ParameterRangeError(ValueError):
    """An int past its kernel parameter's C type (the host module could not convert it).
    The op machinery (ops/_op.py) says it in the op's terms."""

    def __init__(self, spec: str, param: str, letter: str, value: int) -> None:
        low, high = _RANGES[letter]
        self.spec, self.param, self.ctype, self.value = spec, param, _KINDS[letter], value
        self.low, self.high = low, high
        super().__init__(
            f"binding {spec}: {param} is {self.ctype} but was given {value}; expected a "
            f"value in [{low}, {high}]"
        )

    def in_terms_of(self, op: str, arguments: Collection[str]) -> ValueError:
        """The error in the terms of the op `op` of `arguments`: its argument where one
        has the parameter's name, else the sizes that made it (an op's checks should
        have refused them first: this is the last line)."""
        expected = f"expected a value in [{self.low}, {self.high}] ({self.ctype})"
        if self.param in arguments:
            return ValueError(f"{op}(): {self.param} is {self.value}; {expected}")
        return ValueError(
            f"{op}(): the arguments make kernel {self.spec}'s {self.param} {self.value}; {expected}"
        )


def _kind_error(name: str, letter: str, value: object) -> str | None:
    """Why `value` cannot be parameter `name` of signature letter `letter`, or None."""
    if letter == "p":
        ok = isinstance(value, Address)
    elif letter in "il":
        ok = type(value) is int
    else:
        ok = type(value) is float
    if ok:
        return None
    given = f"{type(value).__name__} {value!r}"
    return f"{name} is {_KINDS[letter]} but was given {given}"


def _out_of_range(params: Sequence, values: Sequence[object]) -> tuple[str, str, int] | None:
    """The first integer parameter whose int value its C type cannot hold, or None."""
    for p, value in zip(params, values, strict=True):
        if p.letter in _RANGES and type(value) is int:
            low, high = _RANGES[p.letter]
            if not low <= value <= high:
                return p.name, p.letter, value
    return None


class KernelBinding:
    """`spec`'s kernel, as `groups` work-groups on like's device, every parameter bound
    by name; checked here, so an argument bound to the wrong parameter fails now, not
    as wrong numbers."""

    def __init__(
        self,
        spec: KernelSpec,
        like: torch.Tensor,
        groups: int,
        values: dict[str, object],
        prepare: Callable[..., tuple] | None = None,
    ) -> None:
        names = [p.name for p in spec.params]
        unknown = sorted(set(values) - set(names))
        missing = [p.name for p in spec.params if p.name not in values and p.letter != "p"]
        bound = [values.get(p.name, Address(p.name)) for p in spec.params]
        wrong = [
            error
            for p, value in zip(spec.params, bound, strict=True)
            if (error := _kind_error(p.name, p.letter, value)) is not None
        ]
        if unknown or missing or wrong:
            problems = [
                *(f"{name} is no parameter of it" for name in unknown),
                *(f"{name} is not given" for name in missing),
                *wrong,
            ]
            raise TypeError(f"binding {spec.name}: {'; '.join(problems)}")
        if (bad := _out_of_range(spec.params, bound)) is not None:
            raise ParameterRangeError(spec.name, *bad)
        self.spec = spec
        self.device = like.device
        self.groups = groups
        self.values = bound
        self.prepare = prepare

    def launcher(self, record: type) -> Launch:
        """The launch for calls whose arguments are the fields of `record`, in order (an
        op's argument record, ops/_schema.py)."""
        arguments = record._fields
        params = []
        for p, value in zip(self.spec.params, self.values, strict=True):
            if isinstance(value, Address):
                if value.argument not in arguments:
                    raise TypeError(
                        f"binding {self.spec.name}: {p.name} reads {value.argument!r}, which "
                        f"is not one of the launch's arguments ({', '.join(arguments)})"
                    )
                value = (arguments.index(value.argument), value.offset)
            params.append(value)
        global_size = self.groups * self.spec.group_size
        if self.device.type == "cpu":
            queue = _runtime.cpu_queue()
            kernel = get_kernel(self.spec, queue)._bind(
                queue, global_size, self.spec.group_size, params
            )
        else:
            kernel = _XpuLaunch(self.spec, self.device, global_size, params)
        return kernel if self.prepare is None else _Prepared(self.prepare, record, kernel)


class _XpuLaunch:
    """A binding on an XPU: the queue is the current stream's, looked up at each call."""

    def __init__(self, spec: KernelSpec, device: torch.device, global_size: int, params: list):
        self.spec, self.device, self.global_size, self.params = spec, device, global_size, params

    def __call__(self, *args: object) -> None:
        queue = _runtime.queue_for(self.device)
        kernel = get_kernel(self.spec, queue)
        kernel._bind(queue, self.global_size, self.spec.group_size, self.params)(*args)


class _Prepared:
    """A launch whose arguments pass through `prepare(a)` first (a: their record):
    checks that read data (an index range on CPU tensors), or a conversion (it
    returns the record to launch, `a._replace(...)`)."""

    def __init__(self, prepare: Callable[[tuple], tuple], record: type, launch: Launch) -> None:
        self.prepare, self.record, self.launch = prepare, record, launch

    def __call__(self, *args: object) -> None:
        self.launch(*self.prepare(tuple.__new__(self.record, args)))


class LaunchSequence:
    """Launches one after another on the same queue: an op of several kernels (its bind
    returns a tuple of bindings)."""

    def __init__(self, launches: Sequence[Launch]) -> None:
        self.launches = tuple(launches)

    def __call__(self, *args: object) -> None:
        for launch in self.launches:
            launch(*args)


class ScratchBinding:
    """Kernels launched one after another that share a scratch: an int32 tensor of
    `size` elements allocated at each call (so concurrent calls never share one), the
    launch's last argument, named "scratch". Its first element is the kernels' flags
    word: on CPU tensors, where the launch has waited, a nonzero one after the kernels
    calls `on_flags(flags, a)` (a: the op's argument record), which raises (checks
    that read data found by the kernels themselves, in the same pass). On an XPU the
    flags are not read: that would wait for the device."""

    def __init__(
        self,
        bindings: Sequence[KernelBinding],
        size: int,
        on_flags: Callable[..., None] | None = None,
    ) -> None:
        self.bindings, self.size, self.on_flags = tuple(bindings), size, on_flags

    def launcher(self, record: type) -> Launch:
        launches = [b.launcher(_with_scratch(record)) for b in self.bindings]
        device = self.bindings[0].device
        on_flags = self.on_flags if device.type == "cpu" else None
        return _ScratchLaunch(launches, self.size, device, record, on_flags)


@functools.cache
def _with_scratch(record: type) -> type:
    """The record of an op's arguments and the scratch after them."""
    return namedtuple(f"{record.__name__}_and_scratch", (*record._fields, "scratch"))


class _ScratchLaunch:
    def __init__(
        self,
        launches: Sequence[Launch],
        size: int,
        device: torch.device,
        record: type,
        on_flags: Callable[..., None] | None,
    ) -> None:
        self.launches, self.size, self.device = launches, size, device
        self.record, self.on_flags = record, on_flags

    def __call__(self, *args: object) -> None:
        scratch = torch.empty(self.size, dtype=torch.int32, device=self.device)
        for launch in self.launches:
            launch(*args, scratch)
        if self.on_flags is not None:
            flags = int(scratch[0])
            if flags:
                self.on_flags(flags, tuple.__new__(self.record, args))


def bind_kernel(
    spec: KernelSpec,
    like: torch.Tensor,
    groups: int,
    *,
    prepare: Callable[..., tuple] | None = None,
    **values: object,
) -> KernelBinding:
    """`spec`'s kernel as `groups` work-groups of the size it was compiled for, on
    like's device, with `values` by parameter name (module doc). `prepare(a)` runs
    at each call on the op's argument record and returns the record the launch
    reads: for checks that read data, or a conversion.

    CPU tensors have one queue, so the kernel is looked up once, at binding; an XPU's
    is the current stream's, looked up at each launch. Pointer arguments are taken
    unchecked: only the ops bind kernels, after their checks (ops/_op.py runs them
    on every entry point).
    """
    return KernelBinding(spec, like, groups, values, prepare)


class TorchLaunch:
    """A launch in torch ops instead of a kernel, for a call with nothing for a kernel
    to compute but outputs to fill: `run(a)` on the op's argument record."""

    def __init__(self, run: Callable[[tuple], None]) -> None:
        self.run = run

    def launcher(self, record: type) -> Launch:
        run = self.run
        return lambda *args: run(tuple.__new__(record, args))


def skip(*args: object) -> None:
    """The launch of a call with nothing to compute (no rows)."""
