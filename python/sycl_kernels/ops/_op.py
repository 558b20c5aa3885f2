"""sycl_kernels.ops._op: the one way an op is defined (define_op).

An op is two functions:

- ``check(*args) -> plan``: every argument check (types, dtypes, devices, shapes,
  strides, overlap, scalar values), returning what the launch needs (the dtype
  entry, row views). It reads metadata only, so it also runs on fake tensors with
  symbolic shapes. Its annotated signature is the custom op's schema.
- ``bind(plan, *args) -> launch``: the kernel spec and the loaded kernel, and
  every launch argument that metadata fixes (strides, sizes, scalars), bound into
  ``launch(*args)``, which reads the addresses (and runs the checks that need the
  data: index ranges on CPU tensors) and launches. An op that returns a new
  tensor gets it as launch's last argument, ``out``.

define_op registers ``sycl_kernels::<name>`` (and ``<name>_out`` for an op whose
check ends with an ``out`` parameter) with a real implementation that runs both
and a fake one that runs ``check`` on metadata, so every entry point checks before
anything launches: the public function, ``torch.ops.sycl_kernels.*``, a
``torch.compile``d graph (at trace time) and opcheck. It returns the dispatcher
the public function forwards to: in eager mode without autograd it runs ``check``
and the launch itself, skipping the dispatcher's per-call cost; while compiling,
or when an input requires grad with grad mode on, it calls the custom op. Both
real paths keep each bound launch by what the check reads (_metadata_key): a
repeated call skips the checks and the binding, a changed one is checked.

Autograd: an op given a ``torch_form`` (its formula in torch ops, float32 math)
gets the gradient of that formula; any other op raises a RuntimeError when called
on a tensor that requires grad with grad mode on, never a silently missing or
wrong gradient. ``out=`` variants and in-place ops are of the second kind.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ._launch import Launch

OP_NAMESPACE = "sycl_kernels"


def _signature(
    check: Callable[..., Any], drop: str | None, returns: object, required: str | None
) -> inspect.Signature:
    """check's signature as a custom op's: without `drop`, `required` made a plain Tensor
    (and then no parameter keeps a default: none may precede it), annotations evaluated
    (the schema is inferred from them)."""
    annotations = inspect.get_annotations(check, eval_str=True)
    params = []
    for p in inspect.signature(check).parameters.values():
        if p.name == drop:
            continue
        p = p.replace(annotation=annotations[p.name])
        if required is not None:
            p = p.replace(default=inspect.Parameter.empty)
        if p.name == required:
            p = p.replace(annotation=torch.Tensor)
        params.append(p)
    return inspect.Signature(params, return_annotation=returns)


def _custom_op(
    name: str,
    body: Callable[..., Any],
    signature: inspect.Signature,
    mutates: Sequence[str],
    fake: Callable[..., Any],
) -> Any:
    body.__signature__ = signature
    body.__name__ = body.__qualname__ = name
    op = torch.library.custom_op(f"{OP_NAMESPACE}::{name}", mutates_args=tuple(mutates))(body)
    op.register_fake(fake)
    if mutates:
        _bump_versions(op, mutates)
    return op


# Holds the kernels registered here over torch.library's: the Autograd kernels of the
# ops that refuse gradients, the mutating ops' ADInplaceOrView kernels (a
# registration lives as long as its Library).
_KERNELS = torch.library.Library(OP_NAMESPACE, "IMPL")

# Whether this torch lets a registered kernel be replaced (and names the keys past
# ADInplaceOrView); where it does not, torch.library's own kernels stay.
_CAN_REPLACE_KERNELS = (
    hasattr(torch._C, "_after_ADInplaceOrView_keyset")
    and "allow_override" in inspect.signature(torch.library.Library.impl).parameters
)


def _bump_versions(op: Any, mutates: Sequence[str]) -> None:
    """Gives a mutating op an ADInplaceOrView kernel that knows where its mutated
    arguments are.

    Like torch.library's own, it bumps their version counters (so autograd refuses
    a tensor saved for backward and changed since) and passes the call on; torch's
    first completes every argument with its default to find them, about 5 us of a
    call through the dispatcher (torch.ops, compiled graphs), inference mode too.
    """
    if not _CAN_REPLACE_KERNELS:
        return
    overload = op._opoverload
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

    _KERNELS.impl(op._name, kernel, "ADInplaceOrView", with_keyset=True, allow_override=True)


def _refuse_gradient(op: Any, op_name: str, tensor_names: Sequence[str], why: str) -> None:
    """Makes `op` raise when called on a tensor that requires grad with grad mode on.

    torch.library lets only functional ops register a formula, and a mutating op
    without one runs silently with a wrong gradient; so this is the op's Autograd
    kernel itself, which sees grad mode and otherwise passes the call on.
    """
    overload = op._opoverload
    arguments = [a.name for a in overload._schema.arguments]
    positions = [i for i, name in enumerate(arguments) if name in tensor_names]

    def autograd_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if torch.is_grad_enabled():
            needing = [
                arguments[i]
                for i in positions
                if i < len(args) and getattr(args[i], "requires_grad", False)
            ]
            needing += [n for n, a in kwargs.items() if getattr(a, "requires_grad", False)]
            if needing:
                verb = "requires" if len(needing) == 1 else "require"
                raise RuntimeError(
                    f"{op_name}(): {', '.join(needing)} {verb} grad, but {op_name} has no "
                    f"gradient ({why}); call it under torch.no_grad() or "
                    "torch.inference_mode(), or pass tensors that do not require grad"
                )
        with torch._C._AutoDispatchBelowAutograd():
            return overload.redispatch(keyset & torch._C._after_autograd_keyset, *args, **kwargs)

    _KERNELS.impl(op._name, autograd_kernel, "Autograd", with_keyset=True)


def _register_gradient(
    op: Any,
    torch_form: Callable[..., torch.Tensor],
    tensor_positions: Sequence[int],
    full: Callable[[tuple, dict], tuple],
) -> None:
    """Gives `op` the gradient of `torch_form`, its formula in torch ops."""

    def setup_context(ctx, inputs, output) -> None:
        ctx.given = len(inputs)
        inputs = full(tuple(inputs), {})
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

    op.register_autograd(backward, setup_context=setup_context)


# Bound launches, per op, by what the checks read (_metadata_key); cleared when
# full, as a server's varying token counts would grow it without bound.
_LAUNCH_CACHE_SIZE = 4096


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


def define_op(
    name: str,
    check: Callable[..., Any],
    bind: Callable[..., Launch],
    *,
    mutates: Sequence[str] = (),
    new_output: Callable[..., torch.Tensor] | None = None,
    torch_form: Callable[..., torch.Tensor] | None = None,
) -> Callable[..., Any]:
    """Registers sycl_kernels::<name> from `check` and `bind`; returns the dispatcher.

    mutates: the arguments the op writes in place (it then returns None).
    new_output(*args): allocates the op's result (fake tensors included); the op
    then returns it, and launch gets it as its last argument. If check's last
    parameter is ``out``, sycl_kernels::<name>_out is registered too, writing there.
    torch_form(*args): the op's formula in torch ops, for its gradient.
    """
    signature = inspect.signature(check)
    params = list(signature.parameters)
    has_out = params[-1] == "out"
    tensor_positions = [
        i for i, p in enumerate(params) if p != "out" and "Tensor" in str(signature.parameters[p])
    ]
    tensor_names = [params[i] for i in tensor_positions]
    mutated_positions = [params.index(name) for name in mutates]
    bump_version = torch.autograd.graph.increment_version
    functional = None
    writing = None

    op_signature = _signature(check, "out" if has_out else None, None, None)

    defaults = tuple(p.default for p in op_signature.parameters.values())

    def full(args: tuple, kwargs: dict) -> tuple:
        """The dispatcher leaves out trailing arguments equal to their defaults: put them
        back (without inspect's bind, which costs about 5 us a call)."""
        if not kwargs:
            if len(args) == len(defaults):
                return args
            tail = defaults[len(args) :]
            if inspect.Parameter.empty not in tail:
                return args + tail
        bound = op_signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return tuple(bound.arguments.values())

    def checked_launch(args: tuple) -> Launch:
        return bind(check(*args), *args)

    launches: dict[tuple, Launch] = {}

    def bound_launch(args: tuple) -> Launch:
        """bind(check(*args), *args), kept by _metadata_key: the checks and the
        binding cost 3-5 us a call, a third of a small op's; the key about 1.3 us.
        Arguments that cannot be a key (a list, a symbolic size) are checked and
        bound every time."""
        key = _metadata_key(args)
        if key is None:
            return checked_launch(args)
        try:
            return launches[key]
        except KeyError:
            pass
        except TypeError:  # unhashable
            return checked_launch(args)
        launch = checked_launch(args)  # raises for bad arguments: only good ones are kept
        if len(launches) >= _LAUNCH_CACHE_SIZE:
            launches.clear()
        launches[key] = launch
        return launch

    if new_output is not None:

        def functional_body(*args: Any, **kwargs: Any) -> torch.Tensor:
            args = full(args, kwargs)
            launch = bound_launch(args)
            out = new_output(*args)
            launch(*args, out)
            return out

        def functional_fake(*args: Any, **kwargs: Any) -> torch.Tensor:
            args = full(args, kwargs)
            check(*args)
            return new_output(*args)

        functional = _custom_op(
            name,
            functional_body,
            op_signature.replace(return_annotation=torch.Tensor),
            (),
            functional_fake,
        )
        if torch_form is not None:
            _register_gradient(functional, torch_form, tensor_positions, full)
        else:
            _refuse_gradient(functional, name, tensor_names, "no gradient formula")

    if has_out:
        out_signature = _signature(check, None, None, "out")

        out_arity = len(out_signature.parameters)

        def out_args(args: tuple, kwargs: dict) -> tuple:
            """Every parameter is required: the dispatcher passes them all."""
            if not kwargs and len(args) == out_arity:
                return args
            return out_signature.bind(*args, **kwargs).args

        def out_body(*args: Any, **kwargs: Any) -> None:
            args = out_args(args, kwargs)
            bound_launch(args)(*args)

        def out_fake(*args: Any, **kwargs: Any) -> None:
            check(*out_args(args, kwargs))

        writing = _custom_op(f"{name}_out", out_body, out_signature, ("out",), out_fake)
        _refuse_gradient(writing, name, [*tensor_names, "out"], "it writes into out=")
    elif new_output is None:

        def writing_body(*args: Any, **kwargs: Any) -> None:
            args = full(args, kwargs)
            bound_launch(args)(*args)

        def writing_fake(*args: Any, **kwargs: Any) -> None:
            check(*full(args, kwargs))

        writing = _custom_op(name, writing_body, op_signature, mutates, writing_fake)
        _refuse_gradient(writing, name, tensor_names, "it writes in place")

    def through_the_op(args: tuple) -> Any:
        if has_out and args[-1] is not None:
            writing(*args)
            return args[-1]
        if functional is not None:
            return functional(*(args[:-1] if has_out else args))
        return writing(*args)

    def run(*args: Any) -> Any:
        # Inline, not a helper or any(<generator>): this runs on every eager call.
        if torch.is_grad_enabled():
            for i in tensor_positions:
                if getattr(args[i], "requires_grad", False):
                    return through_the_op(args)
        if torch.compiler.is_compiling():
            return through_the_op(args)
        launch = bound_launch(args)
        # Written tensors get their version bumped, as torch's in-place ops do (and the
        # dispatcher's path does): autograd then refuses one it saved and we changed.
        if new_output is None:
            launch(*args)
            for i in mutated_positions:
                if args[i] is not None:
                    bump_version(args[i])
            return None
        if not has_out:
            out = new_output(*args)
            launch(*args, out)
            return out
        out = args[-1]
        if out is None:
            inputs = args[:-1]
            out = new_output(*inputs)
            launch(*inputs, out)
            return out
        launch(*args)
        bump_version(out)
        return out

    run.__name__ = run.__qualname__ = name
    # The parts of a call, for the bench's breakdown: the checks, the binding, and
    # what a repeated call takes instead of both.
    run.check = check
    run.bind = bind
    run.bound_launch = bound_launch
    return run
