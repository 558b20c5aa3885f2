"""sycl_kernels.ops._autograd: an op's gradient, as torch's own ops have theirs.

A mutating op's version counters are bumped as torch's in-place ops bump them
(bump_versions), so autograd refuses a tensor saved for backward and changed since.

Three strategies, chosen by ops/_op.py from what the op declares:
- a functional op with a formula (``torch_form``): the gradient of the formula
  (register_gradient);
- an in-place op with a formula: the kernel writes fresh copies whose gradient is
  the formula's, copied into place (in_place_gradient); a call that writes an
  argument the formula does not give has none (below);
- any other (no formula, ``out=``): what it wrote comes from a node whose backward
  raises a RuntimeError naming the op and `why` (no_gradient), never a silently
  missing or wrong gradient.

The formula takes the op's argument record (ops/_schema.py), its tensors detached
and requiring grad where a gradient is wanted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from ._op import Op


def _redispatch(overload: Any, keyset: Any, args: tuple, kwargs: dict) -> Any:
    """The call passed on below autograd."""
    with torch._C._AutoDispatchBelowAutograd():
        return overload.redispatch(keyset & torch._C._after_autograd_keyset, *args, **kwargs)


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


def no_gradient_kernel(
    overload: Any, op_name: str, tensor_names: Sequence[str], written: Sequence[str], why: str
) -> Callable[..., Any]:
    """The Autograd kernel of the custom op `overload` for an op without a formula:
    called on a tensor that requires grad with grad mode on, it runs, and what it wrote
    (or returned) raises at backward naming `why`."""
    arguments = [a.name for a in overload._schema.arguments]
    watched = [i for i, name in enumerate(arguments) if name in (*tensor_names, *written)]
    written_positions = [arguments.index(name) for name in written]

    def autograd_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return _redispatch(overload, keyset, args, kwargs)
        values = list(args) + [kwargs.get(n) for n in arguments[len(args) :]]
        needing = [arguments[i] for i in watched if getattr(values[i], "requires_grad", False)]
        if not needing:
            return _redispatch(overload, keyset, args, kwargs)
        verb = "requires" if len(needing) == 1 else "require"
        message = (
            f"{op_name}(): backward reached {op_name}, which has no gradient ({why}); "
            f"{', '.join(needing)} {verb} grad. Call it under torch.no_grad() or "
            "torch.inference_mode(), or detach its inputs"
        )

        def run() -> Any:
            return _redispatch(overload, keyset, args, kwargs)

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


def no_gradient(
    kernels: torch.library.Library, custom: Any, op: Op, written: Sequence[str], why: str
) -> None:
    """Gives `custom` the Autograd kernel of an op without a formula (no_gradient_kernel).

    torch.library lets only functional ops register a formula, and a mutating op
    without one runs silently with a wrong gradient; so this is the op's Autograd
    kernel itself, which sees grad mode and otherwise passes the call on.
    """
    kernel = no_gradient_kernel(custom._opoverload, op.name, op.schema.tensor_names, written, why)
    kernels.impl(custom._name, kernel, "Autograd", with_keyset=True)


def register_gradient(op: Op) -> None:
    """Gives the functional op `op` the gradient of its formula."""
    schema = op.schema
    tensors = [schema.index[n] for n in schema.tensor_names]

    def setup_context(ctx, inputs, output) -> None:
        ctx.given = len(inputs)
        a = schema.complete(tuple(inputs), {})
        ctx.others = [None if i in tensors else v for i, v in enumerate(a)]
        ctx.save_for_backward(*(a[i] for i in tensors))

    def backward(ctx, grad: torch.Tensor) -> tuple:
        values = list(ctx.others)
        wanted = [i for i in tensors if ctx.needs_input_grad[i]]
        with torch.enable_grad():
            for i, t in zip(tensors, ctx.saved_tensors, strict=True):
                values[i] = None if t is None else t.detach().requires_grad_(i in wanted)
            result = op.torch_form(schema.make(tuple(values)))
            grads = torch.autograd.grad(result, [values[i] for i in wanted], grad)
        out: list[torch.Tensor | None] = [None] * len(values)
        for i, g in zip(wanted, grads, strict=True):
            out[i] = g.to(values[i].dtype)
        return tuple(out[: ctx.given])

    op.functional.register_autograd(backward, setup_context=setup_context)


class _InPlaceFormula(torch.autograd.Function):
    """An in-place op with a formula, under autograd: the kernel writes into fresh
    copies of what the op would write, whose gradient is the formula's; the caller
    copies them into place, so autograd follows the write as it follows torch's own
    in-place ops (into views too, which a function writing in place could not return
    more than one of)."""

    @staticmethod
    def forward(ctx, op: Op, a: tuple, *tensors: torch.Tensor) -> tuple:
        schema = op.schema
        written = [schema.index[n] for n in op.formula_names if getattr(a, n) is not None]
        copies = list(a)
        for i in written:
            copies[i] = a[i].clone(memory_format=torch.contiguous_format)
        copies = schema.make(tuple(copies))
        op.bound_launch(copies)(*copies)
        ctx.op = op
        ctx.tensors = [i for i, v in enumerate(a) if isinstance(v, torch.Tensor)]
        ctx.others = [None if isinstance(v, torch.Tensor) else v for v in a]
        # The written tensors' values before the call: the caller then writes them.
        ctx.written_before = {i: a[i].detach().clone() for i in written}
        ctx.save_for_backward(*(None if i in ctx.written_before else a[i] for i in ctx.tensors))
        return tuple(copies[i] for i in written)

    @staticmethod
    def backward(ctx, *grads: torch.Tensor) -> tuple:
        values = list(ctx.others)
        needs = ctx.needs_input_grad[2:]
        saved = [
            ctx.written_before.get(i, t)
            for i, t in zip(ctx.tensors, ctx.saved_tensors, strict=True)
        ]
        with torch.enable_grad():
            for i, t, need in zip(ctx.tensors, saved, needs, strict=True):
                values[i] = t.detach().requires_grad_(need)
            wanted = [values[i] for i, need in zip(ctx.tensors, needs, strict=True) if need]
            new_values = ctx.op.torch_form(ctx.op.schema.make(tuple(values)))
            results = [r for r in new_values if r is not None]
            got = iter(torch.autograd.grad(results, wanted, grads, allow_unused=True))
        return (
            None,
            None,
            *(
                _grad_like(next(got), values[i]) if need else None
                for i, need in zip(ctx.tensors, needs, strict=True)
            ),
        )


def _grad_like(grad: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
    return None if grad is None else grad.to(like.dtype)


def in_place_gradient(kernels: torch.library.Library, op: Op) -> None:
    """Gives an in-place op with a formula its Autograd kernel: called on a tensor that
    requires grad with grad mode on, what it writes gets the formula's gradient
    (_InPlaceFormula); a call that writes an argument the formula does not give gets
    no gradient (as no_gradient)."""
    overload = op.writing._opoverload
    schema = op.schema
    free = op.without_gradient
    ungradable = no_gradient_kernel(
        overload, op.name, schema.tensor_names, op.mutates, f"it writes {' or '.join(free)}"
    )

    def autograd_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        a = schema.complete(args, kwargs)
        if not torch.is_grad_enabled() or not any(
            getattr(getattr(a, n), "requires_grad", False) for n in schema.tensor_names
        ):
            return _redispatch(overload, keyset, args, kwargs)
        if any(getattr(a, n) is not None for n in free):
            return ungradable(keyset, *args, **kwargs)
        tensors = [v for v in a if isinstance(v, torch.Tensor)]
        new_values = iter(_InPlaceFormula.apply(op, a, *tensors))
        for n in op.formula_names:
            if getattr(a, n) is not None:
                getattr(a, n).copy_(next(new_values))
        return None

    kernels.impl(op.writing._name, autograd_kernel, "Autograd", with_keyset=True)


def bump_versions(
    kernels: torch.library.Library, custom: Any, mutates: Sequence[str], can_replace: bool
) -> None:
    """Gives a mutating op an ADInplaceOrView kernel that knows where its mutated
    arguments are.

    Like torch.library's own, it bumps their version counters (so autograd refuses
    a tensor saved for backward and changed since) and passes the call on; torch's
    first completes every argument with its default to find them, about 5 us of a
    call through the dispatcher (torch.ops, compiled graphs), inference mode too.
    """
    if not can_replace:
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

    kernels.impl(custom._name, kernel, "ADInplaceOrView", with_keyset=True, allow_override=True)
