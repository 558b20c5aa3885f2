"""sycl_kernels.ops._op: the one way an op is defined (the @op decorator, the Op class).

An op is written as one typed function, decorated:

    @op(bind=_bind_rmsnorm, new_output=_like_x, torch_form=_rmsnorm_form)
    def rmsnorm(x: torch.Tensor, weight: torch.Tensor | None, eps: float = 1e-6,
                out: torch.Tensor | None = None) -> Plan:
        '''The public docstring.'''
        ...every argument check; returns the plan...

Its signature is the op's: the public function's, and (keyword-only parameters made
positional, the outputs last) the custom op's schema (ops/_schema.py). Its body is
``check``: every argument check (types, dtypes, devices, shapes, strides, overlap,
scalar values), returning what the launch needs. It reads metadata only, so it also
runs on fake tensors with symbolic shapes.

Every other helper takes the op's arguments as one record, by name (``a.x``,
``a.out``; ops/_schema.py): ``bind(plan, a) -> launch`` looks up the kernel spec and
binds every launch argument that metadata fixes, by the spec's parameter names
(ops/_launch.py; a tuple of bindings launches them in order); the launch then reads
the addresses at each call. An op that returns new tensors gets them from
``new_output(a)`` as the record's outputs: by default ``out``; an op with several (a
quantized tensor and its scales) names them with ``outputs=``, and takes all of them
or none.

The decorator returns an Op, which registers ``sycl_kernels::<name>`` (and
``<name>_out`` for an op with outputs) with a real implementation that runs both and
a fake one that runs ``check``, so every entry point checks before anything
launches: the public function, ``torch.ops.sycl_kernels.*``, a ``torch.compile``d
graph (at trace time) and opcheck. Calling the Op is the eager fast path: without
autograd it runs ``check`` and the launch itself, skipping the dispatcher's per-call
cost; while compiling, or when an input requires grad with grad mode on, it calls
the custom op. Both real paths keep each bound launch by what the check reads
(metadata_key, ops/_schema.py): a repeated call skips the checks and the binding, a
changed one is checked. Gradients: ops/_autograd.py.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import _autograd
from ._launch import (
    KernelBinding,
    Launch,
    LaunchSequence,
    ParameterRangeError,
    ScratchBinding,
    TorchLaunch,
)
from ._schema import Schema, metadata_key

OP_NAMESPACE = "sycl_kernels"

# Holds the kernels registered here over torch.library's: the Autograd kernels of the
# ops without a formula, the mutating ops' ADInplaceOrView kernels (a registration
# lives as long as its Library).
_KERNELS = torch.library.Library(OP_NAMESPACE, "IMPL")

# Whether this torch lets a registered kernel be replaced (and names the keys past
# ADInplaceOrView); where it does not, torch.library's own kernels stay.
_CAN_REPLACE_KERNELS = (
    hasattr(torch._C, "_after_ADInplaceOrView_keyset")
    and "allow_override" in inspect.signature(torch.library.Library.impl).parameters
)

# The dispatch keys of the devices the ops run on (CPU tensors, XPU tensors).
_DEVICE_KEYS = ("CPU", "XPU")

# Bound launches, per op, by what the checks read (metadata_key); cleared when full, as
# a server's varying token counts would grow it without bound.
_LAUNCH_CACHE_SIZE = 4096


def op(
    *,
    bind: Callable[..., Launch],
    mutates: Sequence[str] = (),
    new_output: Callable[..., torch.Tensor | tuple] | None = None,
    torch_form: Callable[..., Any] | None = None,
    without_gradient: Sequence[str] = (),
    outputs: Sequence[str] | None = None,
) -> Callable[[Callable[..., Any]], Op]:
    """Defines an op from its check (the decorated function); see the module doc.

    bind(plan, a): the op's launch for check's plan and the argument record a.
    mutates: the arguments the op writes in place (without new_output it returns None).
    new_output(a): allocates the op's result (fake tensors included) from the record
    (its outputs None); the op returns it. With several outputs, a tuple of them, in
    the order of `outputs`.
    outputs: the parameters that take the result instead (default ``out``, if the
    function has one), each None by default; they come last in the schema, and a
    ``<name>_out`` custom op writes them.
    torch_form(a): the op's formula in torch ops, for its gradient: the result, or for
    an in-place op the new value of each of `mutates` but `without_gradient` (a
    tuple, None where the argument is None).
    without_gradient: written arguments the formula does not give (a KV cache): a
    call that writes one has no gradient.
    """

    def define(check: Callable[..., Any]) -> Op:
        return Op(check, bind, mutates, new_output, torch_form, without_gradient, outputs)

    return define


class _Body:
    """A custom op's implementation: `call` under the schema `signature` (torch.library
    infers the schema from it)."""

    def __init__(self, name: str, signature: inspect.Signature, call: Callable[..., Any]):
        self.__name__ = self.__qualname__ = name
        self.__signature__ = signature
        # Where infer_schema evaluates string annotations; the signature's are objects.
        self.__globals__ = globals()
        self._call = call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)


class Op:
    """An op: callable as its public function, registered as custom ops (module doc)."""

    def __init__(
        self,
        check: Callable[..., Any],
        bind: Callable[..., Launch],
        mutates: Sequence[str],
        new_output: Callable[..., torch.Tensor | tuple] | None,
        torch_form: Callable[..., Any] | None,
        without_gradient: Sequence[str] = (),
        outputs: Sequence[str] | None = None,
    ) -> None:
        self.schema = schema = Schema(check, outputs, new_output is not None)
        self.name = schema.name
        self.check = check
        self.bind = bind
        self.mutates = tuple(mutates)
        self.torch_form = torch_form
        self.new_output = new_output
        self.outputs = schema.outputs
        self.without_gradient = tuple(without_gradient)
        # The written arguments an in-place formula gives.
        self.formula_names = tuple(n for n in self.mutates if n not in self.without_gradient)
        self._inputs = schema.inputs
        self._tensor_positions = [schema.index[n] for n in schema.tensor_names]
        self._mutated_positions = [schema.index[n] for n in self.mutates]
        self._launches: dict[tuple, Launch] = {}

        # The public face: check's signature and docstring, returning what the op does.
        result = torch.Tensor if len(self.outputs) < 2 else tuple[(torch.Tensor,) * len(outputs)]
        self.__name__ = self.__qualname__ = self.name
        self.__module__ = check.__module__
        self.__doc__ = check.__doc__
        self.__signature__ = inspect.signature(check).replace(
            parameters=schema.params,
            return_annotation=result if self.outputs or new_output else None,
        )

        self.functional = self.writing = None
        if new_output is not None:
            self.functional = self._register(
                self.name,
                schema.signature(result),
                self._functional_body,
                self._functional_fake,
                self.mutates,
            )
            if torch_form is not None:
                _autograd.register_gradient(self)
            else:
                _autograd.no_gradient(
                    _KERNELS, self.functional, self, self.mutates, "no gradient formula"
                )
        if self.outputs:
            written = (*self.mutates, *self.outputs)
            self.writing = self._register(
                f"{self.name}_out",
                schema.signature(None, outputs_required=True),
                self._writing_body,
                self._writing_fake,
                written,
            )
            _autograd.no_gradient(
                _KERNELS, self.writing, self, written, f"it writes into {self.outputs[0]}="
            )
        elif new_output is None:
            self.writing = self._register(
                self.name,
                schema.signature(None),
                self._writing_body,
                self._writing_fake,
                self.mutates,
            )
            if torch_form is not None:
                _autograd.in_place_gradient(_KERNELS, self)
            else:
                _autograd.no_gradient(
                    _KERNELS, self.writing, self, self.mutates, "it writes in place"
                )

    def _register(
        self,
        name: str,
        signature: inspect.Signature,
        body: Callable[..., Any],
        fake: Callable[..., Any],
        mutates: Sequence[str],
    ) -> Any:
        custom = torch.library.custom_op(f"{OP_NAMESPACE}::{name}", mutates_args=tuple(mutates))(
            _Body(name, signature, body)
        )
        custom.register_fake(fake)
        # The real implementation straight at the devices' keys: custom_op's own
        # wrapper (a dynamo guard and an aliasing check, about 5 us a call through the
        # dispatcher) then serves only where no device key applies.
        for key in _DEVICE_KEYS:
            _KERNELS.impl(custom._name, body, key)
        if mutates:
            _autograd.bump_versions(_KERNELS, custom, mutates, _CAN_REPLACE_KERNELS)
        return custom

    # Launches.

    def _checked_launch(self, a: tuple) -> Launch:
        plan = self.schema.check(self.check, a)
        try:
            bound = self.bind(plan, a)
        except ParameterRangeError as error:
            raise error.in_terms_of(self.name, self.schema.index) from None
        record = self.schema.record
        if isinstance(bound, (KernelBinding, ScratchBinding, TorchLaunch)):
            return bound.launcher(record)
        if isinstance(bound, tuple):
            return LaunchSequence([b.launcher(record) for b in bound])
        return bound

    def bound_launch(self, a: tuple) -> Launch:
        """bind(check(a), a), kept by metadata_key: the checks and the binding cost
        3-5 us a call, a third of a small op's; the key about 1.3 us. Arguments that
        cannot be a key (a list, a symbolic size) are checked and bound every time."""
        key = metadata_key(a)
        if key is None:
            return self._checked_launch(a)
        try:
            return self._launches[key]
        except KeyError:
            pass
        except TypeError:  # unhashable
            return self._checked_launch(a)
        launch = self._checked_launch(a)  # raises for bad arguments: only good ones are kept
        if len(self._launches) >= _LAUNCH_CACHE_SIZE:
            self._launches.clear()
        self._launches[key] = launch
        return launch

    def _new_outputs(self, a: tuple) -> tuple:
        """new_output's tensors, as a tuple."""
        new = self.new_output(a)
        return new if isinstance(new, tuple) else (new,)

    @staticmethod
    def _result(outputs: tuple) -> Any:
        return outputs if len(outputs) > 1 else outputs[0]

    # The custom ops' implementations (the dispatcher's calls).

    def _functional_body(self, *args: Any, **kwargs: Any) -> Any:
        a = self.schema.complete(args, kwargs)
        launch = self.bound_launch(a)
        outputs = self._new_outputs(a)
        launch(*a[: self._inputs], *outputs)
        return self._result(outputs)

    def _functional_fake(self, *args: Any, **kwargs: Any) -> Any:
        a = self.schema.complete(args, kwargs)
        self.schema.check(self.check, a)
        return self._result(self._new_outputs(a))

    def _writing_body(self, *args: Any, **kwargs: Any) -> None:
        a = self.schema.complete(args, kwargs)
        self.bound_launch(a)(*a)

    def _writing_fake(self, *args: Any, **kwargs: Any) -> None:
        self.schema.check(self.check, self.schema.complete(args, kwargs))

    # The public function.

    def _through_the_op(self, a: tuple) -> Any:
        if self.schema.given_outputs(a):
            self.writing(*a)
            return self._result(a[self._inputs :])
        if self.functional is not None:
            return self.functional(*a[: self._inputs])
        return self.writing(*a)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        a = self.schema.bind(args, kwargs)
        # Inline, not a helper or any(<generator>): this runs on every eager call.
        if torch.is_grad_enabled():
            for i in self._tensor_positions:
                if getattr(a[i], "requires_grad", False):
                    return self._through_the_op(a)
        if torch.compiler.is_compiling():
            return self._through_the_op(a)
        given = self.outputs and (
            a[-1] is not None if len(self.outputs) == 1 else self.schema.given_outputs(a)
        )
        launch = self.bound_launch(a)
        # Written tensors get their version bumped, as torch's in-place ops do (and the
        # dispatcher's path does): autograd then refuses one it saved and we changed.
        for i in self._mutated_positions:
            if a[i] is not None:
                torch.autograd.graph.increment_version(a[i])
        if self.new_output is None:
            launch(*a)
            return None
        if not given:
            outputs = self._new_outputs(a)
            launch(*a[: self._inputs], *outputs)
            return self._result(outputs)
        launch(*a)
        outputs = a[self._inputs :]
        for out in outputs:
            torch.autograd.graph.increment_version(out)
        return self._result(outputs)

    def __repr__(self) -> str:
        return f"<sycl_kernels op {self.name}{self.__signature__}>"
