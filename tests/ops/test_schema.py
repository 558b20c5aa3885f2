"""ops/_schema.py: an op's helpers read its arguments by name, so the order of its
keyword-only parameters is the op's own business.

Each op with two or more keyword-only parameters (besides its outputs) is copied with
them in reverse order, the same check, bind, new_output and formula; the copy then
passes the op's run-once case (tests/ops/cases.py, registered by the op's test
file: the float64 reference), and gives what the op gives through the dispatcher too.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import sycl_kernels
import torch
from sycl_kernels.ops._op import Op

from tests.ops import cases
from tests.ops.test_every_op_once import EXPORTED

ALL_CASES = cases.once_cases()

KEYWORD_ONLY = inspect.Parameter.KEYWORD_ONLY


def _op(name: str) -> Any:
    return getattr(sycl_kernels.ops, name, None) or getattr(sycl_kernels, name)


def _keyword_only(op: Op) -> list[str]:
    return [
        p.name
        for p in inspect.signature(op.check).parameters.values()
        if p.kind is KEYWORD_ONLY and p.name not in op.outputs
    ]


REORDERABLE = [
    name
    for name in EXPORTED
    if isinstance(_op(name), Op) and name in ALL_CASES and len(_keyword_only(_op(name))) >= 2
]
_COPIES: dict[str, Op] = {}


def _reordered(op: Op) -> Op:
    """op with its keyword-only parameters (but the outputs) in reverse order, as a new
    op `<name>_reordered` (registered once a process)."""
    if op.name in _COPIES:
        return _COPIES[op.name]
    signature = inspect.signature(op.check)
    params = list(signature.parameters.values())
    moved = [p for p in params if p.kind is KEYWORD_ONLY and p.name not in op.outputs]
    kept = [p for p in params if p not in moved]
    # The moved parameters go where the first of them was (before any output).
    at = params.index(moved[0])
    reordered = kept[:at] + moved[::-1] + kept[at:]

    def check(*args: object, **kwargs: object) -> object:
        return op.check(*args, **kwargs)

    check.__name__ = f"{op.name}_reordered"
    check.__module__ = op.check.__module__
    check.__signature__ = signature.replace(parameters=reordered)  # type: ignore[attr-defined]
    check.__annotations__ = inspect.get_annotations(op.check, eval_str=True)
    copy = Op(
        check,
        op.bind,
        op.mutates,
        op.new_output,
        op.torch_form,
        op.without_gradient,
        op.outputs,
    )
    _COPIES[op.name] = copy
    return copy


def test_the_matrix_covers_ops_of_every_kind() -> None:
    """In place, one output, several outputs: each kind has an op here."""
    ops = [_op(name) for name in REORDERABLE]
    assert any(op.new_output is None for op in ops), REORDERABLE
    assert any(len(op.outputs) == 1 for op in ops), REORDERABLE
    assert any(len(op.outputs) > 1 for op in ops), REORDERABLE


@pytest.mark.parametrize("name", REORDERABLE)
def test_reordered_keyword_parameters_pass_the_op_case(name: str) -> None:
    op = _op(name)
    copy = _reordered(op)
    assert copy.schema.order != op.schema.order
    assert [n for n in copy.schema.order if n in _keyword_only(op)] == _keyword_only(op)[::-1]
    case = ALL_CASES[name]
    case.run(copy, case.dtypes[0])


@pytest.mark.parametrize("name", REORDERABLE)
def test_reordered_keyword_parameters_through_the_dispatcher(name: str) -> None:
    """The copy's custom op (its schema in the new order) computes what the op's does:
    the run-once case's call, through torch.ops, gives the same tensors."""
    op = _op(name)
    copy = _reordered(op)
    calls: list[tuple[tuple, dict]] = []

    def recording(*args: object, **kwargs: object) -> object:
        calls.append((args, kwargs))
        return op(*args, **kwargs)

    case = ALL_CASES[name]
    case.run(recording, case.dtypes[0])
    assert calls, f"{name}'s case called nothing"
    args, kwargs = calls[0]
    expected, got = (_through_the_dispatcher(each, args, kwargs) for each in (op, copy))
    assert expected.keys() == got.keys()
    for key, want in expected.items():
        assert torch.equal(want, got[key]) or (want.isnan() == got[key].isnan()).all(), key


def _through_the_dispatcher(op: Op, args: tuple, kwargs: dict) -> dict[str, torch.Tensor]:
    """The tensors op's custom op writes or returns for (args, kwargs) on fresh clones
    of the tensor arguments, by argument name (the returned ones by position)."""
    a = op.schema.bind(_clones(args), _clones(kwargs))
    torch.manual_seed(0)  # a sampling op draws its seed from the default generator
    if op.schema.given_outputs(a) or op.functional is None:
        returned = op.writing(*a)
    else:
        returned = op.functional(*a[: op.schema.inputs])
    returned = returned if isinstance(returned, tuple) else (returned,)
    named = {n: v for n, v in zip(a._fields, a, strict=True) if isinstance(v, torch.Tensor)}
    named |= {f"returned {i}": t for i, t in enumerate(returned) if isinstance(t, torch.Tensor)}
    return named


def _clones(values: Any) -> Any:
    def clone(v: object) -> object:
        return v.clone() if isinstance(v, torch.Tensor) else v

    if isinstance(values, dict):
        return {k: clone(v) for k, v in values.items()}
    return tuple(clone(v) for v in values)
