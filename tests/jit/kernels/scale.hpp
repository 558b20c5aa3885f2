// tests/jit/kernels/scale.hpp: out = x * factor, a work-item per element (docs/jit.md's example).
#pragma once

#include "common/dtype.hpp"

template <typename T>
inline void scale(const T* x, T* out, float factor, int64_t n) {
  const int64_t i = sycl_kernels::this_nd_item().get_global_id(0);
  if (i < n) out[i] = sycl_kernels::from_float<T>(sycl_kernels::to_float(x[i]) * factor);
}

// The declarations as docs/jit.md shows them: clang-format takes the property macro
// for a call and would break them mid-type.
// clang-format off
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void scale_fp32(const float* x, float* out, float factor, int64_t n) {
  scale(x, out, factor, n);
}

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void scale_fp16(const sycl_kernels::fp16* x, sycl_kernels::fp16* out, float factor, int64_t n) {
  scale(x, out, factor, n);
}

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void scale_bf16(const sycl_kernels::bf16* x, sycl_kernels::bf16* out, float factor, int64_t n) {
  scale(x, out, factor, n);
}
// clang-format on
