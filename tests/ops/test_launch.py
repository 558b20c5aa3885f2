"""ops/_launch.py binds every kernel argument by its spec parameter's name and kind, and
the host module checks each argument's kind: an argument given to the wrong parameter
fails when it is bound, never as wrong numbers."""

from __future__ import annotations

from collections import namedtuple

import pytest
import torch
from sycl_kernels import _runtime
from sycl_kernels._dtypes import BY_NAME
from sycl_kernels.jit import get_kernel
from sycl_kernels.ops._launch import Address, ParameterRangeError, bind_kernel
from sycl_kernels.specs.norm import rmsnorm_spec

from tests import references

SPEC = rmsnorm_spec(BY_NAME["fp32"], 64, "cpu")
# The launch's arguments: an op's argument record (ops/_schema.py).
ARGUMENTS = namedtuple("rmsnorm_arguments", ("x", "weight", "eps", "out"))
# rmsnorm_spec's parameters for 3 contiguous rows of 64 (kernels/common/rows.hpp).
ROWS = {
    "x_outer": 0,
    "x_middle": 0,
    "x_inner": 64,
    "out_outer": 0,
    "out_middle": 0,
    "out_inner": 64,
    "middle_size": 1,
    "inner_size": 3,
    "eps": 1e-6,
}


def _rmsnorm_by_name(values: dict[str, object]) -> tuple[torch.Tensor, torch.Tensor]:
    x, weight = torch.randn(3, 64), torch.randn(64)
    out = torch.empty_like(x)
    launch = bind_kernel(SPEC, x, 3, **values).launcher(ARGUMENTS)
    launch(x, weight, 1e-6, out)
    return out, references.rmsnorm(x, weight, 1e-6)


def test_arguments_bound_by_name_in_any_order_launch_right() -> None:
    out, want = _rmsnorm_by_name(dict(reversed(ROWS.items())))
    torch.testing.assert_close(out.double(), want, **references.tolerance(torch.float32))


def test_two_arguments_of_different_kinds_swapped_fail_at_binding_naming_both() -> None:
    swapped = ROWS | {"inner_size": ROWS["eps"], "eps": ROWS["inner_size"]}
    with pytest.raises(TypeError) as failure:
        bind_kernel(SPEC, torch.empty(3, 64), 3, **swapped)
    message = str(failure.value)
    assert message.startswith(f"binding {SPEC.name}: ")
    assert "inner_size is int64_t but was given float 1e-06" in message
    assert "eps is float but was given int 3" in message


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"x_inner": True}, "x_inner is int64_t but was given bool True"),
        ({"middle_size": 1.0}, "middle_size is int64_t but was given float 1.0"),
        ({"weight": 0}, "weight is a pointer but was given int 0"),
        ({"eps": Address("x")}, "eps is float but was given Address"),
        ({"rows": 3}, "rows is no parameter of it"),
    ],
)
def test_a_value_of_the_wrong_kind_or_name_is_refused(change: dict, refusal: str) -> None:
    with pytest.raises(TypeError, match=rf"^binding {SPEC.name}: .*{refusal}"):
        bind_kernel(SPEC, torch.empty(3, 64), 3, **(ROWS | change))


def test_a_missing_value_or_argument_is_refused() -> None:
    missing = {k: v for k, v in ROWS.items() if k != "middle_size"}
    with pytest.raises(TypeError, match="middle_size is not given"):
        bind_kernel(SPEC, torch.empty(3, 64), 3, **missing)
    binding = bind_kernel(SPEC, torch.empty(3, 64), 3, **(ROWS | {"weight": Address("w")}))
    with pytest.raises(TypeError, match="weight reads 'w', which is not one of the launch's"):
        binding.launcher(ARGUMENTS)


def test_the_host_module_checks_each_arguments_kind() -> None:
    queue = _runtime.cpu_queue()
    kernel = get_kernel(SPEC, queue)
    x, out = torch.randn(3, 64), torch.empty(3, 64)
    good = [x, 0, 0, 64, torch.ones(64), out, 0, 0, 64, 1, 3, 1e-6]
    for index, bad, kind in ((3, 64.0, "an int"), (9, True, "an int"), (11, "1e-6", "a float")):
        args = list(good)
        args[index] = bad
        with pytest.raises(TypeError, match=rf"argument {index} must be {kind}"):
            kernel.launch(queue, 3 * SPEC.group_size, SPEC.group_size, *args)
    params = [(0, 0), 0, 0, 64, (1, 0), (3, 0), 0, 0, 64, 1, 3, 1e-6]
    params[11], params[10] = params[10], params[11]
    with pytest.raises(TypeError, match="argument 10 must be an int"):
        kernel._bind(queue, 3 * SPEC.group_size, SPEC.group_size, params)
    params[10], params[11] = params[11], params[10]
    params[0] = 0
    with pytest.raises(TypeError, match=r"parameter 0 is a pointer; expected \(argument index"):
        kernel._bind(queue, 3 * SPEC.group_size, SPEC.group_size, params)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 2**70])
def test_an_int_past_its_parameters_c_type_is_refused_at_binding(value: int) -> None:
    # The host module would raise std::bad_cast at the call; the binding says which.
    with pytest.raises(ParameterRangeError, match=r"inner_size is int64_t but was given"):
        bind_kernel(SPEC, torch.empty(3, 64), 3, **(ROWS | {"inner_size": value}))


def test_a_range_error_at_binding_names_the_ops_argument() -> None:
    from sycl_kernels.ops import moe_align_block_size

    error = ParameterRangeError("moe_align_scan", "block_size", "i", 2**31)
    arguments = moe_align_block_size.schema.index
    message = str(error.in_terms_of("moe_align_block_size", arguments))
    assert message.startswith("moe_align_block_size(): block_size is 2147483648; ")
    assert "[-2147483648, 2147483647] (int32_t)" in message
    error = ParameterRangeError("moe_align_scan", "chunks", "i", 2**31)
    assert "make kernel moe_align_scan's chunks 2147483648" in str(
        error.in_terms_of("moe_align_block_size", arguments)
    )
