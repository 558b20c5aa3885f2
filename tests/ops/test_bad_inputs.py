"""The bad-input matrix: every argument of every public op gets each kind of wrong
value that applies to it, and must raise the documented exception type (TypeError
for types and dtypes, ValueError for devices, layouts, shapes, strides and values,
IndexError for out-of-range indices) with a message that starts with the op's name
and names the argument, leaving every tensor it was given untouched. Empty inputs
work; NaN and Inf propagate as they do in the float64 references.

Each op's test file registers its valid arguments and the wrong values of each
argument (tests/ops/cases.py), so a new op joins the matrix with its test file.
"""

from __future__ import annotations

import math
import re

import pytest
import sycl_kernels
import torch
from sycl_kernels.jit import stats

from tests import references
from tests.ops import cases
from tests.ops.cases import TENSOR_MUTATIONS, OpCase

# Every public op's case, registered by its test file (tests/ops/cases.py).
CASES = cases.bad_input_cases()


def _matrix() -> list[tuple[OpCase, str, str, object]]:
    """(op, argument, kind, mutation) for every wrong value of every argument."""
    rows = []
    for case in CASES:
        for name, kinds in case.tensors.items():
            rows += [(case, name, kind, TENSOR_MUTATIONS[kind]) for kind in kinds.split()]
        for name, values in case.scalars.items():
            rows += [(case, name, repr(value), (value, error)) for value, error in values]
    return rows


MATRIX = _matrix()

# Every way a user reaches an op: the public function, the registered custom op,
# and a function torch.compile traces (backend="eager": the fake implementation's
# checks run at trace time, the real ones when the graph runs).
ENTRY_POINTS = ("public", "torch_ops", "compiled")


def _call_through(entry: str, case: OpCase, args: dict[str, object]) -> object:
    if entry == "public":
        return case.call(args)
    if entry == "torch_ops":
        name = case.name if args.get("out") is None else f"{case.name}_out"
        kwargs = {k: v for k, v in args.items() if not (k == "out" and v is None)}
        return getattr(torch.ops.sycl_kernels, name)(**kwargs)
    torch._dynamo.reset()
    return torch.compile(case.call, fullgraph=True, backend="eager")(args)


def _schema_converts(entry: str, name: str, mutation: tuple[object, type[Exception]]) -> bool:
    """A bool where a number is due, an int or None where a bool is: the public function
    rejects it, while a custom op's schema converts it (True -> 1.0, 1 -> True, None ->
    False), so what runs through torch.ops or a compiled graph is a valid call."""
    value, error = mutation
    if entry == "public" or error is not TypeError:
        return False
    return isinstance(value, bool) or (name in BOOL_ARGUMENTS and value in (None, 1))


BOOL_ARGUMENTS = {
    "is_neox",
    "flip_sin_to_cos",
    "rounded_sum",
    "gemma",
    "gate_first",
    "ue8m0",
    "truncate",
    "column_major_scales",
    "rounded",
}


def _sampled(entry: str, row: tuple, compiled_kinds: set[tuple[str, str, str]]) -> bool:
    """Whether `row` runs through `entry`: every kind through the public function and
    torch.ops (microseconds each); through a compiled graph (a trace each, about 0.1 s)
    one kind of each argument of each op, so the matrix grows with the ops, not with
    ops times kinds. The compiled path runs the checks the others run (the fake
    implementation at trace time); the kind taken is the argument's last, the most
    specific (a shape, a stride, a value: what the op's own checks catch, not the
    schema)."""
    case, name, kind, _ = row
    return entry != "compiled" or (case.name, name, kind) in compiled_kinds


def _compiled_kinds() -> set[tuple[str, str, str]]:
    last: dict[tuple[str, str], str] = {}
    for case, name, kind, mutation in MATRIX:
        if not (name in case.scalars and _schema_converts("compiled", name, mutation)):
            last[(case.name, name)] = kind
    return {(op, name, kind) for (op, name), kind in last.items()}


_COMPILED_KINDS = _compiled_kinds()
ENTRY_MATRIX = [
    (entry, *row)
    for entry in ENTRY_POINTS
    for row in MATRIX
    if not (row[1] in row[0].scalars and _schema_converts(entry, row[1], row[3]))
    and _sampled(entry, row, _COMPILED_KINDS)
]


def _assert_rejected(
    entry: str, case: OpCase, name: str, error: type[Exception], raised: BaseException
) -> None:
    """The documented error, naming the argument, from the op's own checks; through
    torch.ops or a compiled graph a value the schema cannot take (a list for a
    tensor, a str for a float) is torch's RuntimeError naming the argument instead,
    and a compiled graph reports either inside its TorchRuntimeError at trace time."""
    message = str(raised).replace("\\'", "'")  # a repr inside may escape the quotes
    schema_message = f"for argument '{name}'"
    if entry == "compiled" and not isinstance(raised, error):
        ours = re.search(rf"got {error.__name__}\(['\"]{case.name}\(\): .*\b{name}\b", message)
        sparse = "Attempted to wrap sparse Tensor" in message
        assert ours or schema_message in message or sparse, message
        return
    if entry == "torch_ops" and type(raised) is RuntimeError and schema_message in message:
        return
    assert isinstance(raised, error), f"{type(raised).__name__}: {message}"
    assert message.startswith(f"{case.name}(): "), message
    assert re.search(rf"\b{name}\b", message), f"message does not name {name}: {message}"


@pytest.mark.parametrize(
    ("entry", "case", "name", "kind", "mutation"),
    ENTRY_MATRIX,
    ids=[f"{entry}-{case.name}-{name}-{kind}" for entry, case, name, kind, _ in ENTRY_MATRIX],
)
def test_bad_input_is_rejected_by_name(
    entry: str, case: OpCase, name: str, kind: str, mutation
) -> None:
    args = case.make_args()
    if name in case.tensors:
        make_bad, error = mutation
        args[name] = make_bad(args[name])
    else:
        args[name], error = mutation
    before = {
        k: v.clone()
        for k, v in args.items()
        if isinstance(v, torch.Tensor) and v.is_cpu and v.layout == torch.strided
    }
    with pytest.raises(Exception) as info:
        _call_through(entry, case, args)
    _assert_rejected(entry, case, name, error, info.value)
    for k, t in before.items():
        assert torch.equal(args[k], t), f"{k} changed although the call failed"


def test_the_matrix_covers_every_public_op() -> None:
    ops = {case.name for case in CASES}
    assert ops == set(sycl_kernels.ops.__all__), ops ^ set(sycl_kernels.ops.__all__)


SPECIALS = [math.nan, math.inf, -math.inf]


def _inject(t: torch.Tensor, special: float) -> None:
    """Puts `special` at two places of `t` (in different rows, heads and halves)."""
    t[(0,) * (t.dim() - 1) + (3,)] = special
    t[(t.shape[0] // 2,) + (-1,) * (t.dim() - 1)] = special


def _assert_same_specials(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal up to rounding, with NaN, +Inf and -Inf at exactly the reference's places."""
    torch.testing.assert_close(got.double(), want, equal_nan=True, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("special", SPECIALS, ids=str)
@pytest.mark.parametrize("where", ["x", "weight"])
@pytest.mark.parametrize("op", ["rmsnorm", "gemma_rmsnorm"])
def test_rmsnorm_propagates_nan_and_inf(op: str, where: str, special: float) -> None:
    args = {"x": torch.randn(4, 64), "weight": torch.randn(64)}
    _inject(args[where], special)
    got = getattr(sycl_kernels, op)(args["x"], args["weight"])
    _assert_same_specials(got, references.rmsnorm(**args, eps=1e-6, gemma=op.startswith("gemma")))


@pytest.mark.parametrize("special", SPECIALS, ids=str)
@pytest.mark.parametrize("where", ["x", "residual", "weight"])
@pytest.mark.parametrize("op", ["fused_add_rmsnorm", "gemma_fused_add_rmsnorm"])
def test_fused_add_rmsnorm_propagates_nan_and_inf(op: str, where: str, special: float) -> None:
    args = {"x": torch.randn(4, 64), "residual": torch.randn(4, 64), "weight": torch.randn(64)}
    _inject(args[where], special)
    want_x, want_residual = references.fused_add_rmsnorm(
        **args, eps=1e-6, gemma=op.startswith("gemma")
    )
    getattr(sycl_kernels, op)(**args)
    _assert_same_specials(args["residual"], want_residual)
    _assert_same_specials(args["x"], want_x)


@pytest.mark.parametrize("special", SPECIALS, ids=str)
@pytest.mark.parametrize("where", ["q", "k", "q_weight", "k_weight"])
def test_qknorm_propagates_nan_and_inf(where: str, special: float) -> None:
    args = cases.bad_input_case("qknorm").make_args()
    _inject(args[where], special)
    want_q = references.rmsnorm(args["q"], args["q_weight"], 1e-6)
    want_k = references.rmsnorm(args["k"], args["k_weight"], 1e-6)
    sycl_kernels.qknorm(**args)
    _assert_same_specials(args["q"], want_q)
    _assert_same_specials(args["k"], want_k)


@pytest.mark.parametrize("special", SPECIALS, ids=str)
@pytest.mark.parametrize("where", ["q", "k", "v", "cos_sin_cache"])
def test_apply_rope_propagates_nan_and_inf(where: str, special: float) -> None:
    args = cases.rope_args()
    _inject(args[where], special)
    cos_sin_cache, positions = args["cos_sin_cache"], args["positions"]
    want_q = references.rope(positions, args["q"], cos_sin_cache, is_neox=True)
    want_k = references.rope(positions, args["k"], cos_sin_cache, is_neox=True)
    want_v = args["v"].clone()
    sycl_kernels.apply_rope(**args)
    _assert_same_specials(args["q"], want_q)
    _assert_same_specials(args["k"], want_k)
    stored = args["out_loc"] >= 0
    slots = args["out_loc"][stored]
    _assert_same_specials(args["k_cache"][slots], want_k[stored])
    _assert_same_specials(args["v_cache"][slots], want_v[stored].double())


@pytest.mark.parametrize("special", SPECIALS, ids=str)
@pytest.mark.parametrize("where", ["q", "k", "q_weight", "cos_sin_cache"])
def test_qknorm_rope_propagates_nan_and_inf(where: str, special: float) -> None:
    args = cases.bad_input_case("qknorm_rope").make_args()
    _inject(args[where], special)
    cos_sin_cache, positions = args["cos_sin_cache"], args["positions"]
    want_q, want_k = (
        references.rope(positions, references.rmsnorm(args[x], args[w], 1e-6), cos_sin_cache, True)
        for x, w in (("q", "q_weight"), ("k", "k_weight"))
    )
    sycl_kernels.qknorm_rope(**args)
    _assert_same_specials(args["q"], want_q)
    _assert_same_specials(args["k"], want_k)
    slots = args["out_loc"][args["out_loc"] >= 0]
    _assert_same_specials(args["k_cache"][slots], want_k[args["out_loc"] >= 0])


@pytest.mark.parametrize("special", SPECIALS, ids=str)
@pytest.mark.parametrize("op", ["silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"])
def test_act_and_mul_propagates_nan_and_inf(op: str, special: float) -> None:
    # Column 3 is in the activated half, the last column in the multiplier half.
    x = torch.randn(4, 64)
    _inject(x, special)
    _assert_same_specials(getattr(sycl_kernels, op)(x), references.act_and_mul(op, x))


@pytest.mark.parametrize("special", SPECIALS, ids=str)
def test_timestep_embedding_propagates_nan_and_inf(special: float) -> None:
    t = torch.rand(6) * 10  # small arguments: float32 sin/cos stay within 1e-5
    t[2] = special
    want = references.timestep_embedding(t, 65)
    _assert_same_specials(sycl_kernels.timestep_embedding(t, 65), want)


def _empty(case: OpCase) -> dict[str, object]:
    """The op's valid arguments with zero tokens (rows)."""
    args = case.make_args()
    token_args = {"x", "out", "scales", "residual", "q", "k", "v", "positions", "out_loc", "t"}
    token_args |= {"gate", "up", "topk_ids", "gating_output"}
    token_args |= {"probs", "top_k_per_row", "top_p_per_row", "min_p_per_row"}
    token_args |= {"logits", "prompt_mask", "output_counts", "input_ids"}
    token_args |= {f"{kind}_penalties" for kind in ("repetition", "frequency", "presence")}
    return {k: v[:0] if k in token_args else v for k, v in args.items()}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_zero_tokens_launch_nothing(case: OpCase) -> None:
    args = _empty(case)
    before = stats()
    result = case.call(args)
    after = stats()
    assert (after.hits, after.misses) == (before.hits, before.misses), "a kernel was looked up"
    if "out" in args:  # returned, first of the outputs of an op with several
        assert (result[0] if isinstance(result, tuple) else result) is args["out"]
    elif isinstance(result, torch.Tensor):
        assert result.shape == (0, 64)
