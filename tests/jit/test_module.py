"""jit.load(): one's own SYCL kernels from files and text, checked against torch."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from sycl_kernels import jit
from sycl_kernels._dtypes import DTYPES
from sycl_kernels.jit.module import parse_signatures

KERNELS = Path(__file__).parent / "kernels"

ROW_SUM = """
#include "common/reduce.hpp"

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void row_sum(const float* x, float* out, int64_t rows) {
  const auto item = sycl_kernels::this_nd_item();
  const int64_t row = item.get_group(0);
  const int tid = static_cast<int>(item.get_local_id(0));
  float acc = 0.0f;
  for (int i = tid; i < DIM; i += static_cast<int>(item.get_local_range(0))) {
    acc += x[row * DIM + i];
  }
  const float total = sycl_kernels::group_sum(item, acc);
  if (tid == 0 && row < rows) out[row] = total;
}
"""


@pytest.mark.parametrize("dtype", [d.torch_dtype for d in DTYPES], ids=str)
def test_scale_example(dtype: torch.dtype) -> None:
    mod = jit.load("scale", [KERNELS / "scale.hpp"])
    assert mod.signatures == {"scale_fp32": "ppfl", "scale_fp16": "ppfl", "scale_bf16": "ppfl"}
    x = torch.randn(1000).to(dtype)
    out = torch.empty_like(x)
    kernel = {torch.float32: "scale_fp32", torch.float16: "scale_fp16"}.get(dtype, "scale_bf16")
    mod.launch(kernel, (x.numel() + 255) // 256, 256, x, out, 2.5, x.numel())
    torch.testing.assert_close(out, x * 2.5, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dim", [128, 1000])
def test_work_group_reduction_with_a_define(dim: int) -> None:
    mod = jit.load("row_sum", source=ROW_SUM, defines={"DIM": dim})
    x = torch.randn(37, dim)
    out = torch.zeros(37)
    mod.launch("row_sum", 37, 64, x, out, 37)
    torch.testing.assert_close(out.double(), x.double().sum(-1), rtol=1e-4, atol=1e-4)


def test_macro_kernels_take_explicit_signatures() -> None:
    source = """
#include "common/device.hpp"
#define AXPY(NAME, T)                                                                       \\
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY(                                             \\
      (sycl::ext::oneapi::experimental::nd_range_kernel<1>))                                \\
  void NAME(T* y, const T* x, T a, int32_t n) {                                              \\
    const int i = static_cast<int>(sycl_kernels::this_nd_item().get_global_id(0));           \\
    if (i < n) y[i] += a * x[i];                                                             \\
  }
AXPY(axpy_f32, float)
AXPY(axpy_f64, double)
"""
    with pytest.raises(ValueError, match="defines no extern"):
        jit.load("axpy", source=source)
    mod = jit.load("axpy", source=source, signatures={"axpy_f32": "ppfi", "axpy_f64": "ppdi"})
    x, y = torch.randn(100, dtype=torch.float64), torch.randn(100, dtype=torch.float64)
    expected = y + 0.5 * x
    mod.launch("axpy_f64", 2, 64, y, x, 0.5, 100)
    torch.testing.assert_close(y, expected)
    with pytest.raises(KeyError, match="has no kernel 'axpy_f16'"):
        mod.launch("axpy_f16", 1, 64, y, x, 0.5, 100)


def test_compile_error_carries_the_log() -> None:
    source = '#include "common/device.hpp"\n' + ROW_SUM.split("\n", 2)[2].replace("acc +=", "acc +")
    with pytest.raises(jit.KernelCompileError) as info:
        jit.load("row_sum_broken", source=source + "\n#error deliberately broken\n")
    assert str(info.value).startswith("row_sum_broken: device compilation failed")
    assert "error: deliberately broken" in str(info.value)
    assert "use of undeclared identifier 'DIM'" in str(info.value)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(FileNotFoundError, match=r"no_such\.hpp does not exist"):
        jit.load("x", ["no_such.hpp"])
    with pytest.raises(ValueError, match="'1DIM' is not a macro name"):
        jit.load("x", source=ROW_SUM, defines={"1DIM": 2})
    with pytest.raises(ValueError, match="name 'a b' must be"):
        jit.load("a b", source=ROW_SUM)
    mod = jit.load("row_sum", source=ROW_SUM, defines={"DIM": 128})
    with pytest.raises(TypeError, match="no tensor argument"):
        mod.launch("row_sum", 1, 64, 1, 2, 3)
    x = torch.randn(1, 128)
    with pytest.raises(TypeError, match=r"argument 1 must be a tensor \(DLPack\), got int"):
        mod.launch("row_sum", 1, 64, x, torch.empty(1).data_ptr(), 1)


def test_signature_parsing() -> None:
    text = """
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::work_group_size<64>))
void k(const sycl::half* __restrict__ a, unsigned int n, std::int64_t m, double d, float* o) {}
"""
    assert parse_signatures(text) == {"k": "pildp"}
    with pytest.raises(ValueError, match="parameter 'sycl::half h'"):
        parse_signatures(text.replace("double d", "sycl::half h"))


def test_editing_an_included_header_recompiles(tmp_path: Path, fresh_cache: Path) -> None:
    folder = tmp_path / "user"
    shutil.copytree(KERNELS, folder)
    (folder / "factor.hpp").write_text("#pragma once\nconstexpr float kExtra = 1.0f;\n")
    main = folder / "scale.hpp"
    main.write_text(
        main.read_text()
        .replace(
            '#include "common/dtype.hpp"', '#include "common/dtype.hpp"\n#include "factor.hpp"'
        )
        .replace("* factor)", "* factor * kExtra)")
    )
    x = torch.randn(64)

    def run() -> torch.Tensor:
        out = torch.empty_like(x)
        jit.load("scale_user", [main]).launch("scale_fp32", 1, 64, x, out, 2.0, 64)
        return out

    before = jit.stats().compiles
    torch.testing.assert_close(run(), x * 2.0)
    assert jit.stats().compiles == before + 1

    (folder / "unrelated.hpp").write_text("// not included\n")
    torch.testing.assert_close(run(), x * 2.0)
    assert jit.stats().compiles == before + 1, "an unrelated file must not recompile"

    (folder / "factor.hpp").write_text("#pragma once\nconstexpr float kExtra = 3.0f;\n")
    torch.testing.assert_close(run(), x * 6.0)
    assert jit.stats().compiles == before + 2, "an edited include must recompile"
