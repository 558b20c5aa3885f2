"""The bad-input matrix: every argument of every public op gets each kind of wrong
value that applies to it, and must raise the documented exception type (TypeError
for types and dtypes, ValueError for devices, layouts, shapes, strides and values,
IndexError for out-of-range indices) with a message that starts with the op's name
and names the argument, leaving every tensor it was given untouched. Empty inputs
work; NaN and Inf propagate as they do in the float64 references.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import sycl_kernels
import torch
from sycl_kernels.jit import stats

from tests import references

# Each kind of wrong tensor: how to make it from a valid one, and the error it must raise.
TENSOR_MUTATIONS: dict[str, tuple[Callable[[torch.Tensor], object], type[Exception]]] = {
    "not_a_tensor": (lambda t: t.tolist(), TypeError),
    "meta_device": (lambda t: t.to("meta"), ValueError),
    "sparse": (lambda t: t.to_sparse(), ValueError),
    "int32": (lambda t: t.to(torch.int32), TypeError),
    "float16": (lambda t: t.to(torch.float16), TypeError),
    "float32": (lambda t: t.to(torch.float32), TypeError),
    "float64": (lambda t: t.to(torch.float64), TypeError),
    "bool": (lambda t: t.to(torch.bool), TypeError),
    "complex": (lambda t: t.to(torch.complex64), TypeError),
    "extra_dim": (lambda t: t.unsqueeze(0), ValueError),
    "missing_dim": (lambda t: t[0], ValueError),
    "zero_dim": (lambda t: t.reshape(-1)[0], ValueError),
    "last_dim_plus_one": (lambda t: torch.cat([t, t[..., :1]], -1), ValueError),
    "last_stride_2": (lambda t: torch.stack([t, t], -1)[..., 0], ValueError),
    "overlapping_rows": (lambda t: t[:1].expand(t.shape), ValueError),
    "spread_heads": (lambda t: torch.cat([t, t], -1)[..., : t.shape[-1]], ValueError),
    "index_too_large": (lambda t: torch.full_like(t, 10**6), IndexError),
    "index_negative": (lambda t: torch.full_like(t, -2), IndexError),
}

COMMON = "not_a_tensor meta_device sparse"
FLOAT = f"{COMMON} int32 float64"
NOT_A_NUMBER = [("1e-6", TypeError), (None, TypeError), (True, TypeError)]
NON_NEGATIVE = [*NOT_A_NUMBER, (-1.0, ValueError), (math.nan, ValueError)]


@dataclass
class OpCase:
    name: str
    make_args: Callable[[], dict[str, object]]
    tensors: dict[str, str]
    """Argument -> the TENSOR_MUTATIONS kinds that must be rejected, space separated."""
    scalars: dict[str, list[tuple[object, type[Exception]]]] = field(default_factory=dict)

    def call(self, args: dict[str, object]) -> object:
        return getattr(sycl_kernels, self.name)(**args)


def _norm_args() -> dict[str, object]:
    x, out = torch.randn(4, 64), torch.zeros(4, 64)
    return {"x": x, "weight": torch.randn(64), "eps": 1e-6, "out": out}


def _fused_add_args() -> dict[str, object]:
    return {"x": torch.randn(4, 64), "residual": torch.randn(4, 64), "weight": torch.randn(64)}


def _qknorm_args() -> dict[str, object]:
    qkv = torch.randn(5, (4 + 2) * 32)
    return {
        "q": qkv[:, :128].view(5, 4, 32),
        "k": qkv[:, 128:].view(5, 2, 32),
        "q_weight": torch.randn(32),
        "k_weight": torch.randn(32),
        "eps": 1e-6,
    }


def _rope_args() -> dict[str, object]:
    return {
        "positions": torch.arange(5),
        "q": torch.randn(5, 4, 64),
        "k": torch.randn(5, 2, 64),
        "cos_sin_cache": references.rope_cache(16, 64),
        "is_neox": True,
        "rotary_dim": 64,
        "v": torch.randn(5, 2, 64),
        "k_cache": torch.zeros(8, 2, 64),
        "v_cache": torch.zeros(8, 2, 64),
        "out_loc": torch.tensor([0, 3, -1, 7, 1]),
    }


def _qknorm_rope_args() -> dict[str, object]:
    return {
        **{k: v for k, v in _rope_args().items() if k != "rotary_dim"},
        "q_weight": torch.randn(64),
        "k_weight": torch.randn(64),
        "eps": 1e-6,
    }


def _act_args() -> dict[str, object]:
    return {"x": torch.randn(4, 64), "gate_first": True, "out": torch.zeros(4, 32)}


def _act_and_mul_args() -> dict[str, object]:
    return {
        "gate": torch.randn(4, 32),
        "up": torch.randn(4, 32),
        "activation": "silu",
        "out": torch.zeros(4, 32),
    }


NORM_TENSORS = {
    "x": f"{FLOAT} zero_dim last_dim_plus_one last_stride_2",
    "weight": f"{FLOAT} extra_dim zero_dim last_dim_plus_one last_stride_2",
    "out": f"{FLOAT} extra_dim zero_dim last_dim_plus_one last_stride_2 overlapping_rows",
}
FUSED_ADD_TENSORS = {
    "x": f"{FLOAT} zero_dim last_dim_plus_one last_stride_2 overlapping_rows",
    "residual": f"{FLOAT} extra_dim zero_dim last_dim_plus_one last_stride_2 overlapping_rows",
    "weight": NORM_TENSORS["weight"],
}
# Heads may have any strides but the last (a padded head layout is valid).
HEADS = f"{FLOAT} zero_dim last_dim_plus_one last_stride_2 overlapping_rows"
ACT_OUT = f"{FLOAT} extra_dim zero_dim last_dim_plus_one last_stride_2 overlapping_rows"
BOOL = [(None, TypeError), (1, TypeError)]
KV_CACHE = f"{FLOAT} extra_dim missing_dim last_dim_plus_one last_stride_2 overlapping_rows"
INDEX = f"{COMMON} float32 extra_dim zero_dim last_dim_plus_one last_stride_2 index_too_large"

ROPE_TENSORS = {
    # Any strides, and a 0-d tensor broadcasts: one position for every token.
    "positions": f"{COMMON} float32 extra_dim last_dim_plus_one index_too_large index_negative",
    "q": f"{HEADS} missing_dim",
    "k": f"{HEADS} extra_dim missing_dim",
    "cos_sin_cache": f"{COMMON} float16 float64 extra_dim missing_dim last_stride_2",
    "v": f"{FLOAT} zero_dim extra_dim missing_dim last_dim_plus_one last_stride_2",
    "k_cache": KV_CACHE,
    "v_cache": KV_CACHE,
    "out_loc": f"{INDEX} int32",
}

CASES = [
    *(
        OpCase(op, _norm_args, NORM_TENSORS, {"eps": NON_NEGATIVE})
        for op in ("rmsnorm", "gemma_rmsnorm")
    ),
    *(
        OpCase(op, _fused_add_args, FUSED_ADD_TENSORS, {"rounded_sum": BOOL})
        for op in ("fused_add_rmsnorm", "gemma_fused_add_rmsnorm")
    ),
    OpCase(
        "qknorm",
        _qknorm_args,
        {
            "q": HEADS,
            "k": HEADS,
            "q_weight": NORM_TENSORS["weight"],
            "k_weight": NORM_TENSORS["weight"],
        },
        {"eps": NON_NEGATIVE, "gemma": BOOL},
    ),
    OpCase(
        "apply_rope",
        _rope_args,
        ROPE_TENSORS,
        {
            "is_neox": BOOL,
            "rotary_dim": [(32, ValueError), (0, ValueError), (64.0, TypeError), ("64", TypeError)],
            "head_size": [(32, ValueError), (0, ValueError), (64.0, TypeError)],
            "layout": [("BSHD", ValueError), (3, TypeError)],
        },
    ),
    OpCase(
        "qknorm_rope",
        _qknorm_rope_args,
        {
            "positions": ROPE_TENSORS["positions"],
            "q": ROPE_TENSORS["q"],
            "k": ROPE_TENSORS["k"],
            "q_weight": NORM_TENSORS["weight"],
            "k_weight": NORM_TENSORS["weight"],
            **{name: ROPE_TENSORS[name] for name in ("cos_sin_cache", "v", "k_cache", "v_cache")},
            "out_loc": ROPE_TENSORS["out_loc"],
        },
        {
            "eps": NON_NEGATIVE,
            "gemma": BOOL,
            "is_neox": BOOL,
            "head_size": [(32, ValueError), (0, ValueError), (64.0, TypeError)],
            "layout": [("BSHD", ValueError), (3, TypeError)],
        },
    ),
    *(
        OpCase(
            op,
            _act_args,
            {"x": f"{FLOAT} zero_dim last_dim_plus_one last_stride_2", "out": ACT_OUT},
            {"gate_first": BOOL},
        )
        for op in ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul")
    ),
    OpCase(
        "act_and_mul",
        _act_and_mul_args,
        {
            "gate": f"{FLOAT} zero_dim last_dim_plus_one last_stride_2",
            "up": f"{FLOAT} extra_dim zero_dim last_dim_plus_one last_stride_2",
            "out": ACT_OUT,
        },
        {"activation": [("relu", ValueError), (None, TypeError)]},
    ),
    OpCase(
        "timestep_embedding",
        lambda: {"t": torch.rand(6) * 1000, "dim": 64},
        {"t": f"{COMMON} bool complex extra_dim zero_dim"},
        {
            "dim": [(0, ValueError), (-8, ValueError), (8.0, TypeError), ("8", TypeError)],
            "flip_sin_to_cos": [(None, TypeError), (1, TypeError)],
            "downscale_freq_shift": [*NOT_A_NUMBER, (math.nan, ValueError)],
            "scale": [*NOT_A_NUMBER, (math.nan, ValueError)],
            "max_period": [*NON_NEGATIVE, (0, ValueError)],
        },
    ),
]


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


BOOL_ARGUMENTS = {"is_neox", "flip_sin_to_cos", "rounded_sum", "gemma", "gate_first"}


ENTRY_MATRIX = [
    (entry, *row)
    for entry in ENTRY_POINTS
    for row in MATRIX
    if not (row[1] in row[0].scalars and _schema_converts(entry, row[1], row[3]))
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
    args = _qknorm_args()
    _inject(args[where], special)
    want_q = references.rmsnorm(args["q"], args["q_weight"], 1e-6)
    want_k = references.rmsnorm(args["k"], args["k_weight"], 1e-6)
    sycl_kernels.qknorm(**args)
    _assert_same_specials(args["q"], want_q)
    _assert_same_specials(args["k"], want_k)


@pytest.mark.parametrize("special", SPECIALS, ids=str)
@pytest.mark.parametrize("where", ["q", "k", "v", "cos_sin_cache"])
def test_apply_rope_propagates_nan_and_inf(where: str, special: float) -> None:
    args = _rope_args()
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
    args = _qknorm_rope_args()
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
    token_args = {"x", "out", "residual", "q", "k", "v", "positions", "out_loc", "t", "gate", "up"}
    return {k: v[:0] if k in token_args else v for k, v in args.items()}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_zero_tokens_launch_nothing(case: OpCase) -> None:
    args = _empty(case)
    before = stats()
    result = case.call(args)
    after = stats()
    assert (after.hits, after.misses) == (before.hits, before.misses), "a kernel was looked up"
    if "out" in args:
        assert result is args["out"]
    elif isinstance(result, torch.Tensor):
        assert result.shape == (0, 64)
