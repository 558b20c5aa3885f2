"""sycl_kernels.ops._op: the one way an op is defined (the @op decorator, the Op class).

An op is written as one typed function, decorated:

    @op(bind=_bind_rmsnorm, new_output=_like_x, torch_form=_rmsnorm_form)
    def rmsnorm(x: torch.Tensor, weight: torch.Tensor | None, eps: float = 1e-6,
                out: torch.Tensor | None = None) -> Plan:
        '''The public docstring.'''
        ...every argument check; returns the plan...

Its signature is the op's: the public function's, and (keyword-only parameters made
positional, ``out`` last) the custom op's schema. Its body is ``check``: every
argument check (types, dtypes, devices, shapes, strides, overlap, scalar values),
returning what the launch needs. It reads metadata only, so it also runs on fake
tensors with symbolic shapes.

``bind(plan, *args) -> launch`` looks up the kernel spec and the loaded kernel and
binds every launch argument that metadata fixes, by the spec's parameter names
(ops/_launch.py; a tuple of bindings launches them in order); ``launch(*args)``
reads the addresses and launches. An op that returns new tensors gets them as
launch's last arguments, named as its outputs: by default ``out``; an op with
several (a quantized tensor and its scales) names them with ``outputs=``, and takes
all of them or none.

The decorator returns an Op, which registers ``sycl_kernels::<name>`` (and
``<name>_out`` for an op with an ``out`` parameter) with a real implementation that
runs both and a fake one that runs ``check``, so every entry point checks before
anything launches: the public function, ``torch.ops.sycl_kernels.*``, a
``torch.compile``d graph (at trace time) and opcheck. Calling the Op is the eager
fast path: without autograd it runs ``check`` and the launch itself, skipping the
dispatcher's per-call cost; while compiling, or when an input requires grad with
grad mode on, it calls the custom op. Both real paths keep each bound launch by
what the check reads (_metadata_key): a repeated call skips the checks and the
binding, a changed one is checked.

Autograd, as torch's own ops: every op runs forward under grad mode. An op given a
``torch_form`` (its formula in torch ops, float32 math) gets the gradient of that
formula; any other (in-place ops, ``out=``) marks what it wrote as coming from a node
whose backward raises a RuntimeError naming the op, never a silently missing or
wrong gradient.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ._launch import KernelBinding, Launch, LaunchSequence, ParameterRangeError, ScratchBinding

OP_NAMESPACE = "sycl_kernels"
_EMPTY = inspect.Parameter.empty

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

# Bound launches, per op, by what the checks read (_metadata_key); cleared when
# full, as a server's varying token counts would grow it without bound.
_LAUNCH_CACHE_SIZE = 4096


def op(
    *,
    bind: Callable[..., Launch],
    mutates: Sequence[str] = (),
    new_output: Callable[..., torch.Tensor] | None = None,
    torch_form: Callable[..., Any] | None = None,
    without_gradient: Sequence[str] = (),
    outputs: Sequence[str] | None = None,
) -> Callable[[Callable[..., Any]], Op]:
    """Defines an op from its check (the decorated function); see the module doc.

    mutates: the arguments the op writes in place (without new_output it returns None).
    new_output(*args): allocates the op's result (fake tensors included), args in
    schema order without the outputs; the op returns it, and launch gets it last. With
    several outputs, a tuple of them, in the order of `outputs`.
    outputs: the parameters that take the result instead (default ``out``, if the
    function has one), each None by default; they come last in the schema, and a
    ``<name>_out`` custom op writes them.
    torch_form(*args): the op's formula in torch ops, for its gradient: the result,
    or for an in-place op the new value of each of `mutates` but `without_gradient`
    (a tuple, None where the argument is None).
    without_gradient: written arguments the formula does not give (a KV cache): a
    call that writes one has no gradient.
    """

    def define(check: Callable[..., Any]) -> Op:
        return Op(check, bind, mutates, new_output, torch_form, without_gradient, outputs)

    return define


def _metadata_key(args: tuple) -> tuple | None:
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
        new_output: Callable[..., torch.Tensor] | None,
        torch_form: Callable[..., Any] | None,
        without_gradient: Sequence[str] = (),
        outputs: Sequence[str] | None = None,
    ) -> None:
        self.name = check.__name__
        self.check = check
        self.bind = bind
        self.mutates = tuple(mutates)
        self.torch_form = torch_form
        self.new_output = new_output
        annotations = inspect.get_annotations(check, eval_str=True)
        public = inspect.signature(check)
        params = [p.replace(annotation=annotations[p.name]) for p in public.parameters.values()]
        if outputs is None:
            outputs = ("out",) if "out" in public.parameters else ()
        self.outputs = tuple(outputs)
        self.has_out = bool(self.outputs)
        # The schema: keyword-only parameters made positional, the outputs last.
        rank = {name: i + 1 for i, name in enumerate(self.outputs)}
        schema = [
            p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for p in sorted(params, key=lambda p: rank.get(p.name, 0))
        ]
        self._order = tuple(p.name for p in schema)
        result = torch.Tensor if len(self.outputs) < 2 else tuple[(torch.Tensor,) * len(outputs)]
        returns = None if new_output is None else result
        self._defaults = tuple(p.default for p in schema)
        self._index = {name: i for i, name in enumerate(self._order)}
        self._positional = tuple(
            self._order.index(p.name)
            for p in params
            if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        # How many leading schema arguments check takes by position.
        self._by_position = next(
            (i for i, p in enumerate(self._positional) if p != i), len(self._positional)
        )
        # Tails of defaults for the common call: leading schema arguments positionally.
        self._tails = {
            n: self._defaults[n:]
            for n in range(len(self._order) + 1)
            if self._positional[:n] == tuple(range(n))
            and all(d is not _EMPTY for d in self._defaults[n:])
        }
        self.tensor_positions = [
            i
            for i, p in enumerate(schema)
            if p.name not in self.outputs and "Tensor" in str(p.annotation)
        ]
        self._mutated_positions = [self._order.index(name) for name in self.mutates]
        # The written arguments an in-place formula gives, and those it does not.
        self.formula_positions = [
            self._order.index(n) for n in self.mutates if n not in without_gradient
        ]
        self.formula_free_positions = [self._order.index(n) for n in without_gradient]
        # A launch's arguments: the schema's, and a new output last.
        self.launch_names = self._order + (("out",) if new_output and not self.has_out else ())
        self._launches: dict[tuple, Launch] = {}

        # The public face: check's signature and docstring, returning what the op does.
        self.__name__ = self.__qualname__ = self.name
        self.__module__ = check.__module__
        self.__doc__ = check.__doc__
        self.__signature__ = public.replace(
            parameters=params,
            return_annotation=result if self.has_out or new_output else None,
        )

        op_schema = inspect.Signature(
            [p for p in schema if p.name not in self.outputs], return_annotation=returns
        )
        self.functional = self.writing = None
        tensor_names = [self._order[i] for i in self.tensor_positions]
        if new_output is not None:
            self.functional = self._register(
                self.name, op_schema, self._functional_body, self._functional_fake, self.mutates
            )
            if torch_form is not None:
                _register_gradient(self, torch_form)
            else:
                _no_gradient(
                    self.functional, self.name, tensor_names, self.mutates, "no gradient formula"
                )
        if self.has_out:
            out_schema = inspect.Signature(
                [
                    p.replace(
                        default=_EMPTY,
                        annotation=torch.Tensor if p.name in self.outputs else p.annotation,
                    )
                    for p in schema
                ],
                return_annotation=None,
            )
            written = (*self.mutates, *self.outputs)
            self.writing = self._register(
                f"{self.name}_out", out_schema, self._out_body, self._out_fake, written
            )
            _no_gradient(
                self.writing, self.name, tensor_names, written, f"it writes into {self.outputs[0]}="
            )
        elif new_output is None:
            self.writing = self._register(
                self.name, op_schema, self._writing_body, self._writing_fake, self.mutates
            )
            if torch_form is not None:
                _in_place_gradient(self)
            else:
                _no_gradient(
                    self.writing, self.name, tensor_names, self.mutates, "it writes in place"
                )

    def _register(
        self,
        name: str,
        schema: inspect.Signature,
        body: Callable[..., Any],
        fake: Callable[..., Any],
        mutates: Sequence[str],
    ) -> Any:
        custom = torch.library.custom_op(f"{OP_NAMESPACE}::{name}", mutates_args=tuple(mutates))(
            _Body(name, schema, body)
        )
        custom.register_fake(fake)
        # The real implementation straight at the devices' keys: custom_op's own
        # wrapper (a dynamo guard and an aliasing check, about 5 us a call through the
        # dispatcher) then serves only where no device key applies.
        for key in _DEVICE_KEYS:
            _KERNELS.impl(custom._name, body, key)
        if mutates:
            _bump_versions(custom, mutates)
        return custom

    # Arguments, in schema order.

    def arguments(self, args: tuple, kwargs: dict) -> tuple:
        """A public call's arguments in schema order, defaults filled in, as Python
        binds them (inspect's bind costs about 5 us a call)."""
        if not kwargs:
            tail = self._tails.get(len(args))
            if tail is not None:
                return args + tail
        if len(args) > len(self._positional):
            raise TypeError(
                f"{self.name}() takes {len(self._positional)} positional arguments "
                f"but {len(args)} were given"
            )
        values = list(self._defaults)
        for index, value in zip(self._positional, args, strict=False):
            values[index] = value
        for key, value in kwargs.items():
            index = self._index.get(key)
            if index is None:
                raise TypeError(f"{self.name}() got an unexpected keyword argument {key!r}")
            if index in self._positional[: len(args)]:
                raise TypeError(f"{self.name}() got multiple values for argument {key!r}")
            values[index] = value
        missing = [n for n, v in zip(self._order, values, strict=True) if v is _EMPTY]
        if missing:
            raise TypeError(f"{self.name}() missing required arguments: {', '.join(missing)}")
        return tuple(values)

    def _full(self, args: tuple, kwargs: dict) -> tuple:
        """The dispatcher's call of a schema without the outputs: trailing arguments equal
        to their defaults left out, put back."""
        if not kwargs:
            tail = self._defaults[len(args) : len(self._order) - len(self.outputs)]
            if all(d is not _EMPTY for d in tail):
                return args + tail
        names = self._order[: len(self._order) - len(self.outputs)]
        values = dict(zip(names, args, strict=False)) | kwargs
        return tuple(values.get(n, d) for n, d in zip(names, self._defaults, strict=False))

    # Launches.

    def checked(self, args: tuple) -> Any:
        """check's plan for arguments in schema order (check may take some by keyword)."""
        if self._by_position == len(args):
            return self.check(*args)
        names = self._order[self._by_position :]
        return self.check(
            *args[: self._by_position], **dict(zip(names, args[self._by_position :], strict=False))
        )

    def _checked_launch(self, args: tuple) -> Launch:
        plan = self.checked(args)
        try:
            bound = self.bind(plan, *args)
        except ParameterRangeError as error:
            raise self._range_error(error) from None
        if isinstance(bound, (KernelBinding, ScratchBinding)):
            return bound.launcher(self.launch_names)
        if isinstance(bound, tuple):
            return LaunchSequence([b.launcher(self.launch_names) for b in bound])
        return bound

    def _range_error(self, error: ParameterRangeError) -> ValueError:
        """A kernel parameter past its C type, in the op's terms: its argument where one
        has the parameter's name, else the sizes that made it (an op's checks should
        have refused them first: this is the last line)."""
        expected = f"expected a value in [{error.low}, {error.high}] ({error.ctype})"
        if error.param in self._index:
            return ValueError(f"{self.name}(): {error.param} is {error.value}; {expected}")
        return ValueError(
            f"{self.name}(): the arguments make kernel {error.spec}'s {error.param} "
            f"{error.value}; {expected}"
        )

    def bound_launch(self, args: tuple) -> Launch:
        """bind(check(*args), *args), kept by _metadata_key: the checks and the binding
        cost 3-5 us a call, a third of a small op's; the key about 1.3 us. Arguments
        that cannot be a key (a list, a symbolic size) are checked and bound every time."""
        key = _metadata_key(args)
        if key is None:
            return self._checked_launch(args)
        try:
            return self._launches[key]
        except KeyError:
            pass
        except TypeError:  # unhashable
            return self._checked_launch(args)
        launch = self._checked_launch(args)  # raises for bad arguments: only good ones are kept
        if len(self._launches) >= _LAUNCH_CACHE_SIZE:
            self._launches.clear()
        self._launches[key] = launch
        return launch

    # The custom ops' implementations.

    def _new_outputs(self, inputs: tuple) -> tuple:
        """new_output's tensors, as a tuple."""
        new = self.new_output(*inputs)
        return new if isinstance(new, tuple) else (new,)

    def _result(self, outputs: tuple) -> Any:
        return outputs if len(outputs) > 1 else outputs[0]

    def _given_outputs(self, args: tuple) -> bool:
        """Whether a call in schema order gives its outputs (all of them) or not (none)."""
        given = [a is not None for a in args[len(args) - len(self.outputs) :]]
        if all(given):
            return True
        if any(given):
            raise TypeError(
                f"{self.name}(): {', '.join(self.outputs)} are given together or not at all; "
                f"got only {', '.join(n for n, g in zip(self.outputs, given, strict=True) if g)}"
            )
        return False

    def _functional_body(self, *args: Any, **kwargs: Any) -> Any:
        args = self._full(args, kwargs)
        launch = self.bound_launch(args)
        outputs = self._new_outputs(args)
        launch(*args, *outputs)
        return self._result(outputs)

    def _functional_fake(self, *args: Any, **kwargs: Any) -> Any:
        args = self._full(args, kwargs)
        self.checked(args)
        return self._result(self._new_outputs(args))

    def _out_args(self, args: tuple, kwargs: dict) -> tuple:
        """Every parameter of <name>_out is required: the dispatcher passes them all."""
        if kwargs:
            args = (*args, *(kwargs[n] for n in self._order[len(args) :]))
        return args

    def _out_body(self, *args: Any, **kwargs: Any) -> None:
        args = self._out_args(args, kwargs)
        self.bound_launch(args)(*args)

    def _out_fake(self, *args: Any, **kwargs: Any) -> None:
        self.checked(self._out_args(args, kwargs))

    def _writing_body(self, *args: Any, **kwargs: Any) -> None:
        args = self._full(args, kwargs)
        self.bound_launch(args)(*args)

    def _writing_fake(self, *args: Any, **kwargs: Any) -> None:
        self.checked(self._full(args, kwargs))

    # The public function.

    def _through_the_op(self, args: tuple) -> Any:
        if self.has_out and self._given_outputs(args):
            self.writing(*args)
            return self._result(args[len(args) - len(self.outputs) :])
        if self.functional is not None:
            return self.functional(*args[: len(args) - len(self.outputs)])
        return self.writing(*args)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args = self.arguments(args, kwargs)
        # Inline, not a helper or any(<generator>): this runs on every eager call.
        if torch.is_grad_enabled():
            for i in self.tensor_positions:
                if getattr(args[i], "requires_grad", False):
                    return self._through_the_op(args)
        if torch.compiler.is_compiling():
            return self._through_the_op(args)
        given = self.has_out and (
            args[-1] is not None if len(self.outputs) == 1 else self._given_outputs(args)
        )
        launch = self.bound_launch(args)
        # Written tensors get their version bumped, as torch's in-place ops do (and the
        # dispatcher's path does): autograd then refuses one it saved and we changed.
        for i in self._mutated_positions:
            if args[i] is not None:
                torch.autograd.graph.increment_version(args[i])
        if self.new_output is None:
            launch(*args)
            return None
        if not given:
            inputs = args[: len(args) - len(self.outputs)]
            outputs = self._new_outputs(inputs)
            launch(*inputs, *outputs)
            return self._result(outputs)
        launch(*args)
        outputs = args[len(args) - len(self.outputs) :]
        for out in outputs:
            torch.autograd.graph.increment_version(out)
        return self._result(outputs)

    def __repr__(self) -> str:
        return f"<sycl_kernels op {self.name}{self.__signature__}>"


def _bump_versions(custom: Any, mutates: Sequence[str]) -> None:
    """Gives a mutating op an ADInplaceOrView kernel that knows where its mutated
    arguments are.

    Like torch.library's own, it bumps their version counters (so autograd refuses
    a tensor saved for backward and changed since) and passes the call on; torch's
    first completes every argument with its default to find them, about 5 us of a
    call through the dispatcher (torch.ops, compiled graphs), inference mode too.
    """
    if not _CAN_REPLACE_KERNELS:
        return
    overload = custom._opoverload
    arguments = [a.name for a in overload._schema.arguments]
    mutated = [(arguments.index(name), name) for name in mutates]
    after = torch._C._after_ADInplaceOrView_keyset
    bump = torch.autograd.graph.increment_version

    def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        for position, name in mutated:
            # Left out by the dispatcher when it equals its default (None).
            t = args[position] if position < len(args) else kwargs.get(name)
            if t is not None:
                bump(t)
        return overload.redispatch(keyset & after, *args, **kwargs)

    _KERNELS.impl(custom._name, kernel, "ADInplaceOrView", with_keyset=True, allow_override=True)


class _Ungradable(torch.autograd.Function):
    """Runs an op without a gradient under autograd: what it wrote (or returned) comes
    from this node, whose backward raises naming the op. One node per written tensor:
    autograd lets a function that writes a view in place return that tensor only."""

    @staticmethod
    def forward(ctx, why: str, run: Callable[[], Any], written: torch.Tensor | None, *inputs):
        ctx.why = why
        result = run()
        if written is None:
            return result
        ctx.mark_dirty(written)
        return written

    @staticmethod
    def backward(ctx, *grads: torch.Tensor) -> tuple:
        raise RuntimeError(ctx.why)


def _nothing() -> None:
    """The run of the nodes after the first of a call that wrote several tensors."""


def _no_gradient(
    custom: Any, op_name: str, tensor_names: Sequence[str], written: Sequence[str], why: str
) -> None:
    """Gives `custom` an Autograd kernel for an op without a formula: called on a tensor
    that requires grad with grad mode on, it runs, and what it wrote (or returned)
    raises at backward.

    torch.library lets only functional ops register a formula, and a mutating op
    without one runs silently with a wrong gradient; so this is the op's Autograd
    kernel itself, which sees grad mode and otherwise passes the call on.
    """
    kernel = _no_gradient_kernel(custom._opoverload, op_name, tensor_names, written, why)
    _KERNELS.impl(custom._name, kernel, "Autograd", with_keyset=True)


def _no_gradient_kernel(
    overload: Any, op_name: str, tensor_names: Sequence[str], written: Sequence[str], why: str
) -> Callable[..., Any]:
    """_no_gradient's Autograd kernel for the custom op `overload`."""
    arguments = [a.name for a in overload._schema.arguments]
    positions = [i for i, name in enumerate(arguments) if name in (*tensor_names, *written)]
    written_positions = [arguments.index(name) for name in written]

    def autograd_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        def run() -> Any:
            with torch._C._AutoDispatchBelowAutograd():
                return overload.redispatch(
                    keyset & torch._C._after_autograd_keyset, *args, **kwargs
                )

        if not torch.is_grad_enabled():
            return run()
        values = list(args) + [kwargs.get(n) for n in arguments[len(args) :]]
        needing = [arguments[i] for i in positions if getattr(values[i], "requires_grad", False)]
        if not needing:
            return run()
        verb = "requires" if len(needing) == 1 else "require"
        message = (
            f"{op_name}(): backward reached {op_name}, which has no gradient ({why}); "
            f"{', '.join(needing)} {verb} grad. Call it under torch.no_grad() or "
            "torch.inference_mode(), or detach its inputs"
        )
        inputs = [v for v in values if isinstance(v, torch.Tensor)]
        if overload._schema.returns:
            return _Ungradable.apply(message, run, None, *inputs)
        for i in written_positions:
            if isinstance(values[i], torch.Tensor):
                _Ungradable.apply(message, run, values[i], *inputs)
                run = _nothing
        run()  # when it wrote no tensor (every written argument None)
        return None

    return autograd_kernel


def _register_gradient(op: Op, torch_form: Callable[..., torch.Tensor]) -> None:
    """Gives `op` the gradient of `torch_form`, its formula in torch ops."""
    tensor_positions = op.tensor_positions

    def setup_context(ctx, inputs, output) -> None:
        ctx.given = len(inputs)
        inputs = op._full(tuple(inputs), {})
        ctx.scalars = [None if i in tensor_positions else a for i, a in enumerate(inputs)]
        ctx.save_for_backward(*(inputs[i] for i in tensor_positions))

    def backward(ctx, grad: torch.Tensor) -> tuple:
        inputs = list(ctx.scalars)
        wanted = [i for i in tensor_positions if ctx.needs_input_grad[i]]
        with torch.enable_grad():
            for i, t in zip(tensor_positions, ctx.saved_tensors, strict=True):
                inputs[i] = None if t is None else t.detach().requires_grad_(i in wanted)
            result = torch_form(*inputs)
            grads = torch.autograd.grad(result, [inputs[i] for i in wanted], grad)
        out: list[torch.Tensor | None] = [None] * len(inputs)
        for i, g in zip(wanted, grads, strict=True):
            out[i] = g.to(inputs[i].dtype)
        return tuple(out[: ctx.given])

    op.functional.register_autograd(backward, setup_context=setup_context)


class _InPlaceFormula(torch.autograd.Function):
    """An in-place op with a formula, under autograd: the kernel writes into fresh
    copies of what the op would write, whose gradient is the formula's; the caller
    copies them into place, so autograd follows the write as it follows torch's own
    in-place ops (into views too, which a function writing in place could not return
    more than one of)."""

    @staticmethod
    def forward(ctx, op: Op, args: tuple, *tensors: torch.Tensor) -> tuple:
        copies = list(args)
        for i in op.formula_positions:
            if args[i] is not None:
                copies[i] = args[i].clone(memory_format=torch.contiguous_format)
        copies = tuple(copies)
        op.bound_launch(copies)(*copies)
        ctx.op = op
        ctx.tensor_positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        ctx.others = [None if isinstance(a, torch.Tensor) else a for a in args]
        # The written tensors' values before the call: the caller then writes them.
        ctx.written_before = {
            i: args[i].detach().clone() for i in op.formula_positions if args[i] is not None
        }
        ctx.save_for_backward(
            *(None if i in ctx.written_before else args[i] for i in ctx.tensor_positions)
        )
        return tuple(copies[i] for i in op.formula_positions if args[i] is not None)

    @staticmethod
    def backward(ctx, *grads: torch.Tensor) -> tuple:
        inputs = list(ctx.others)
        wanted = []
        saved = [
            ctx.written_before.get(i, t)
            for i, t in zip(ctx.tensor_positions, ctx.saved_tensors, strict=True)
        ]
        with torch.enable_grad():
            for i, t, need in zip(
                ctx.tensor_positions, saved, ctx.needs_input_grad[2:], strict=True
            ):
                inputs[i] = t.detach().requires_grad_(need)
                if need:
                    wanted.append(inputs[i])
            results = [r for r in ctx.op.torch_form(*inputs) if r is not None]
            got = torch.autograd.grad(results, wanted, grads, allow_unused=True)
        given = iter(got)
        return (
            None,
            None,
            *(
                _grad_like(next(given), inputs[i]) if need else None
                for i, need in zip(ctx.tensor_positions, ctx.needs_input_grad[2:], strict=True)
            ),
        )


def _grad_like(grad: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
    return None if grad is None else grad.to(like.dtype)


def _in_place_gradient(op: Op) -> None:
    """Gives an in-place op with a formula an Autograd kernel: called on a tensor that
    requires grad with grad mode on, what it writes gets the formula's gradient
    (_InPlaceFormula); a call that writes an argument the formula does not give gets
    no gradient (as _no_gradient)."""
    overload = op.writing._opoverload
    tensor_names = [op._order[i] for i in op.tensor_positions]
    ungradable = _no_gradient_kernel(
        overload, op.name, tensor_names, op.mutates, "it writes a KV cache"
    )

    def autograd_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        values = op._full(args, kwargs)
        if not torch.is_grad_enabled() or not any(
            getattr(values[i], "requires_grad", False) for i in op.tensor_positions
        ):
            with torch._C._AutoDispatchBelowAutograd():
                return overload.redispatch(
                    keyset & torch._C._after_autograd_keyset, *args, **kwargs
                )
        if any(values[i] is not None for i in op.formula_free_positions):
            return ungradable(keyset, *args, **kwargs)
        tensors = [v for v in values if isinstance(v, torch.Tensor)]
        new_values = iter(_InPlaceFormula.apply(op, values, *tensors))
        for i in op.formula_positions:
            if values[i] is not None:
                values[i].copy_(next(new_values))
        return None

    _KERNELS.impl(op.writing._name, autograd_kernel, "Autograd", with_keyset=True)
