"""sycl_kernels.compat._args: the compat functions' arguments in the engines' terms.

``engine_names`` says a core op's errors in the engine's argument names; the checks
below are those of arguments the compat layer reads or re-views itself, before any
core op sees them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from .. import ops
from ..ops._checks import check_own_memory as check_own_memory
from ..ops._checks import check_same_device
from ..ops._op import Op

F = TypeVar("F", bound=Callable[..., Any])

# "<name>(): " begins every core op's error (ops/_checks.py, ops/_op.py); torch's own
# errors ("as_strided(): ...") look alike, so the name must be a core op's.
_PREFIX = re.compile(r"(\w+)\(\): ")
_CORE_OPS = frozenset(v.name for v in vars(ops).values() if isinstance(v, Op))


def engine_names(**names: str) -> Callable[[F], F]:
    """Decorates a compat function so that a core op's ValueError, TypeError or
    IndexError raised under it reads in the engine's terms: the function's own prefix
    ("vllm.topk_softmax(): ") for the core op's, and each core argument name given here
    (a keyword) replaced, as a whole word, by the engine's (its value):
    ``@engine_names(slot_mapping="indices")``. The exception is re-raised as it is (its
    type and traceback), its message changed; the function's own errors, already in the
    engine's terms, and torch's are left alone."""
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\b") if names else None

    def wrap(function: F) -> F:
        prefix = f"{function.__module__.rsplit('.', 1)[-1]}.{function.__name__}(): "

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except (TypeError, ValueError, IndexError) as error:
                message = error.args[0] if len(error.args) == 1 else None
                core = _PREFIX.match(message) if isinstance(message, str) else None
                if core is not None and core.group(1) in _CORE_OPS:
                    body = message[core.end() :]
                    if pattern is not None:
                        body = pattern.sub(lambda m: names[m.group()], body)
                    error.args = (prefix + body,)
                raise

        return call  # type: ignore[return-value]

    return wrap


def check_group_size(op: str, group_size: object, hidden: int) -> int:
    """group_size an int (not bool) >= 1 dividing the rows' `hidden` values."""
    if isinstance(group_size, bool) or not isinstance(group_size, int):
        raise TypeError(f"{op}(): group_size must be an int, got {type(group_size).__name__}")
    if group_size < 1 or hidden % group_size:
        raise ValueError(
            f"{op}(): group_size is {group_size}; expected a positive int dividing the "
            f"last dimension, {hidden}"
        )
    return group_size


def check_output(
    op: str,
    name: str,
    t: object,
    dtypes: tuple[torch.dtype, ...] | None,
    like: torch.Tensor,
    like_name: str = "input",
) -> torch.Tensor:
    """An output the compat layer re-views or writes itself: a strided tensor of one of
    `dtypes` (None: any) on like's device (a core op given it checks it again, under its
    own name for it)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}(): {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.layout is not torch.strided:
        raise ValueError(f"{op}(): {name} has layout {t.layout}; expected torch.strided")
    if dtypes is not None and t.dtype not in dtypes:
        names = " or ".join(str(d) for d in dtypes)
        raise TypeError(f"{op}(): {name} has dtype {t.dtype}; expected {names}")
    check_same_device(op, name, t, like_name, like)
    return t


def check_strides(op: str, name: str, t: torch.Tensor, expected: tuple, layout: str) -> None:
    """t's strides where its sizes exceed 1 are `expected` (an entry None: any that
    keeps t's elements apart, checked by the caller's layout): the engines' kernels
    address t by that layout whatever its strides, and here it is written through them,
    so an expanded tensor (strides 0) or another view of a buffer is refused rather than
    written past its elements."""
    strides = t.stride()
    if any(
        size > 1 and want is not None and stride != want
        for size, stride, want in zip(t.shape, strides, expected, strict=True)
    ):
        shown = ", ".join("any" if want is None else str(want) for want in expected)
        raise ValueError(
            f"{op}(): {name} has shape {tuple(t.shape)} and strides {strides}; expected "
            f"strides ({shown}) ({layout}, where a size exceeds 1)"
        )


def check_dense(op: str, name: str, t: torch.Tensor, layout: str) -> None:
    """t's elements are the t.numel() from its first one on, in any order of dimensions:
    the engines' kernels address t by `layout` whatever its strides, and here it is
    re-viewed so, which stays within t's elements only for such a tensor (an expanded,
    sliced or overlapping view is refused)."""
    extent = 1
    for stride, size in sorted((s, n) for s, n in zip(t.stride(), t.shape, strict=True) if n > 1):
        if stride != extent:
            raise ValueError(
                f"{op}(): {name} has shape {tuple(t.shape)} and strides {t.stride()}; "
                f"expected a dense tensor, addressed as {layout} (call .contiguous())"
            )
        extent *= size
