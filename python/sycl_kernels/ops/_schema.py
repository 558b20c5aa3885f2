"""sycl_kernels.ops._schema: an op's arguments, by name (the record every helper reads).

An op's signature is written once, as its check function's (ops/_op.py). From it
the schema derives everything positional the machinery needs, so that no op and no
helper depends on an order: the custom op's parameter order (keyword-only
parameters made positional, the outputs last), the defaults, and the *record*: a
named tuple of the op's launch arguments (the schema's, and ``out`` for a new
output the op has no parameter for). Every helper an op gives (bind, new_output,
prepare, on_flags, torch_form) takes the record and reads ``a.x``, ``a.out``; as a
tuple it is also what the host module's bound launch reads positionally.
"""

from __future__ import annotations

import inspect
from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

import torch

EMPTY = inspect.Parameter.empty

Args = Any
"""An op's argument record, as its helpers annotate it: a named tuple whose fields are
the op's parameters (``a.x``, ``a.out``), and whose ``a.op_name`` (of its type, not a
field) is the op's name for the helpers' errors; built per op by Schema (its type
exists only once the op is defined, hence this alias)."""
_new_record = tuple.__new__


class Schema:
    """The op `name`'s parameters (from `check`'s signature) and its record type."""

    def __init__(
        self, check: Callable[..., Any], outputs: Sequence[str] | None, new_output: bool
    ) -> None:
        self.name = check.__name__
        annotations = inspect.get_annotations(check, eval_str=True)
        public = inspect.signature(check)
        self.params = [
            p.replace(annotation=annotations[p.name]) for p in public.parameters.values()
        ]
        if outputs is None:
            outputs = ("out",) if "out" in public.parameters else ()
        self.outputs = tuple(outputs)
        rank = {name: i + 1 for i, name in enumerate(self.outputs)}
        # The custom op's parameters: keyword-only ones made positional, the outputs last.
        self.parameters = [
            p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for p in sorted(self.params, key=lambda p: rank.get(p.name, 0))
        ]
        self.order = tuple(p.name for p in self.parameters)
        self.index = {name: i for i, name in enumerate(self.order)}
        self.inputs = len(self.order) - len(self.outputs)
        # A new output without a parameter is the launch's last argument, `out`.
        extra = ("out",) if new_output and not self.outputs else ()
        if "op_name" in self.order:
            raise TypeError(f"{self.name}(): a parameter named op_name hides the record's")
        self.record = namedtuple(f"{self.name}_arguments", self.order + extra)
        self.record.op_name = self.name
        self.launch_outputs = self.outputs or extra
        defaults = tuple(p.default for p in self.parameters)
        self._defaults = defaults + (None,) * len(extra)
        self._positional = tuple(
            self.index[p.name]
            for p in self.params
            if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        # How many leading arguments check takes by position; the rest by keyword.
        self._by_position = next(
            (i for i, p in enumerate(self._positional) if p != i), len(self._positional)
        )
        self._by_keyword = self.order[self._by_position :]
        # Tails of defaults for the common call: leading arguments given positionally.
        self._tails = {
            n: self._defaults[n:]
            for n in range(len(self.order) + 1)
            if self._positional[:n] == tuple(range(n))
            and all(d is not EMPTY for d in self._defaults[n:])
        }
        self.tensor_names = tuple(
            p.name
            for p in self.parameters
            if p.name not in self.outputs and "Tensor" in str(p.annotation)
        )

    def make(self, values: tuple) -> tuple:
        """The record of `values`, the launch arguments in order (outputs None if short)."""
        if len(values) < len(self._defaults):
            values = values + (None,) * (len(self._defaults) - len(values))
        return _new_record(self.record, values)

    def bind(self, args: tuple, kwargs: dict) -> tuple:
        """A public call's record, defaults filled in, as Python binds a call
        (inspect's bind costs about 5 us a call)."""
        if not kwargs:
            tail = self._tails.get(len(args))
            if tail is not None:
                return _new_record(self.record, args + tail)
        if len(args) > len(self._positional):
            raise TypeError(
                f"{self.name}() takes {len(self._positional)} positional arguments "
                f"but {len(args)} were given"
            )
        values = list(self._defaults)
        for index, value in zip(self._positional, args, strict=False):
            values[index] = value
        for key, value in kwargs.items():
            index = self.index.get(key)
            if index is None:
                raise TypeError(f"{self.name}() got an unexpected keyword argument {key!r}")
            if index in self._positional[: len(args)]:
                raise TypeError(f"{self.name}() got multiple values for argument {key!r}")
            values[index] = value
        missing = [n for n, v in zip(self.order, values, strict=False) if v is EMPTY]
        if missing:
            raise TypeError(f"{self.name}() missing required arguments: {', '.join(missing)}")
        return _new_record(self.record, tuple(values))

    def complete(self, args: tuple, kwargs: dict) -> tuple:
        """A dispatcher call's record: trailing arguments equal to their defaults are
        left out of it (or passed by name), put back; outputs not in it are None."""
        if not kwargs:
            return self.make(args + self._defaults[len(args) : self.inputs])
        values = dict(zip(self.order, args, strict=False)) | kwargs
        return self.make(
            tuple(values.get(n, d) for n, d in zip(self.order, self._defaults, strict=False))
        )

    def check(self, check: Callable[..., Any], a: tuple) -> Any:
        """check's plan for the record `a` (check may take some arguments by keyword)."""
        if self._by_position == len(self.order):
            return check(*a[: len(self.order)])
        return check(
            *a[: self._by_position],
            **{n: a[i] for i, n in enumerate(self._by_keyword, self._by_position)},
        )

    def given_outputs(self, a: tuple) -> bool:
        """Whether the call gives its outputs (all of them) or not (none)."""
        given = [getattr(a, n) is not None for n in self.outputs]
        if all(given):
            return bool(given)
        if any(given):
            raise TypeError(
                f"{self.name}(): {', '.join(self.outputs)} are given together or not at all; "
                f"got only {', '.join(n for n, g in zip(self.outputs, given, strict=True) if g)}"
            )
        return False

    def signature(self, returns: Any, outputs_required: bool = False) -> inspect.Signature:
        """The custom op's signature: without the outputs, or (`outputs_required`, the
        ``<name>_out`` op's) every parameter required and the outputs tensors."""
        if not outputs_required:
            params = [p for p in self.parameters if p.name not in self.outputs]
            return inspect.Signature(params, return_annotation=returns)
        params = [
            p.replace(
                default=EMPTY,
                annotation=torch.Tensor if p.name in self.outputs else p.annotation,
            )
            for p in self.parameters
        ]
        return inspect.Signature(params, return_annotation=None)


def metadata_key(args: tuple) -> tuple | None:
    """What an op's `check` reads of its arguments, as a dict key: each tensor's type,
    device, layout, dtype, shape and strides, each other argument's type and value
    (the type too, so that 1 never finds the plan of True). The layout too: a sparse
    tensor reports strides (0, 0), those of an expanded strided one. None where
    strides cannot be read (its check raises). The checks read nothing else: no
    data, no addresses, no tensor's identity; so equal keys have equal plans, and
    equal bound launches.
    """
    try:
        # is_cpu first: building a torch.device costs ~0.25 us.
        return tuple(
            [
                (type(a), a.is_cpu or a.device, a.layout, a.dtype, a.shape, a.stride())
                if isinstance(a, torch.Tensor)
                else (type(a), a)
                for a in args
            ]
        )
    except RuntimeError:
        return None
