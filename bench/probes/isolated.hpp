// bench/probes/isolated.hpp: one piece of an op's work at a time, to find what bounds it.
//
// Every probe runs over 4096 rows of 4096 outputs, one work-group of 256 work-items
// per row, with the loop and conversions the ops use (kernels/common/): a copy, a
// load-convert-scale-store round trip, a gated multiply of two inputs, the gated
// activations, and exp alone. Compared against each other they split an op's cost
// into memory traffic, bf16 conversion and the transcendental.
#pragma once

#include "activation/gated.hpp"
#include "common/dtype.hpp"
#include "common/loop.hpp"

namespace probes {

using namespace sycl_kernels;

constexpr int kWidth = 4096;
constexpr int kThreads = 256;

enum Unary : int { kCopy = 0, kScale = 1 };
enum Binary : int { kMul = -1, kSilu = 0, kGelu = 1, kGeluTanh = 2 };

template <typename T, int kOp>
inline void unary(const T* x, T* out) {
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0) * kWidth;
  const int tid = static_cast<int>(item.get_local_id(0));
  for_each_strided<kWidth, kThreads>(tid, [&](int i) {
    if constexpr (kOp == kCopy) {
      out[row + i] = x[row + i];
    } else {
      out[row + i] = from_float<T>(to_float(x[row + i]) * 1.5f);
    }
  });
}

// x is [rows, 2 * kWidth] = [gate, up], as silu_and_mul takes it.
template <typename T, int kOp>
inline void binary(const T* x, T* out) {
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  const int tid = static_cast<int>(item.get_local_id(0));
  const T* gate = x + row * 2 * kWidth;
  const T* up = gate + kWidth;
  for_each_strided<kWidth, kThreads>(tid, [&](int i) {
    const float g = to_float(gate[i]);
    float a = g;
    if constexpr (kOp != kMul) a = activate<static_cast<Activation>(kOp)>(g);
    out[row * kWidth + i] = from_float<T>(a * to_float(up[i]));
  });
}

// bf16 pairs read and written as one uint32: 32-bit lanes instead of 16-bit ones.
inline uint32_t round_pair(float lo, float hi) {
  return static_cast<uint32_t>(from_float<bf16>(lo).bits) |
         (static_cast<uint32_t>(from_float<bf16>(hi).bits) << 16);
}

inline void mul_bf16_pairs(const uint32_t* x, uint32_t* out) {
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  const int tid = static_cast<int>(item.get_local_id(0));
  const uint32_t* gate = x + row * kWidth;
  const uint32_t* up = gate + kWidth / 2;
  for_each_strided<kWidth / 2, kThreads>(tid, [&](int i) {
    const uint32_t g = gate[i];
    const uint32_t u = up[i];
    const float lo = ::sycl::bit_cast<float>(g << 16) * ::sycl::bit_cast<float>(u << 16);
    const float hi =
        ::sycl::bit_cast<float>(g & 0xffff0000u) * ::sycl::bit_cast<float>(u & 0xffff0000u);
    out[row * kWidth / 2 + i] = round_pair(lo, hi);
  });
}

// exp alone, one input: what silu's and gelu_tanh's transcendental costs by itself.
inline void exp_alone(const float* x, float* out) {
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0) * kWidth;
  const int tid = static_cast<int>(item.get_local_id(0));
  for_each_strided<kWidth, kThreads>(tid, [&](int i) { out[row + i] = ::sycl::exp(x[row + i]); });
}

}  // namespace probes

#define PROBE(name, T, body)                                                         \
  extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY(                                      \
      (sycl::ext::oneapi::experimental::nd_range_kernel<1>))                         \
      SYCL_EXT_ONEAPI_FUNCTION_PROPERTY(                                             \
          (sycl::ext::oneapi::experimental::work_group_size<probes::kThreads>)) void \
      name(const T* x, T* out) {                                                     \
    body;                                                                            \
  }

PROBE(copy_fp32, float, (probes::unary<float, probes::kCopy>(x, out)))
PROBE(copy_bf16, sycl_kernels::bf16, (probes::unary<sycl_kernels::bf16, probes::kCopy>(x, out)))
PROBE(scale_fp32, float, (probes::unary<float, probes::kScale>(x, out)))
PROBE(scale_bf16, sycl_kernels::bf16, (probes::unary<sycl_kernels::bf16, probes::kScale>(x, out)))
PROBE(mul_fp32, float, (probes::binary<float, probes::kMul>(x, out)))
PROBE(mul_bf16, sycl_kernels::bf16, (probes::binary<sycl_kernels::bf16, probes::kMul>(x, out)))
PROBE(mul_bf16_pairs, uint32_t, (probes::mul_bf16_pairs(x, out)))
PROBE(silu_fp32, float, (probes::binary<float, probes::kSilu>(x, out)))
PROBE(silu_bf16, sycl_kernels::bf16, (probes::binary<sycl_kernels::bf16, probes::kSilu>(x, out)))
PROBE(gelu_fp32, float, (probes::binary<float, probes::kGelu>(x, out)))
PROBE(gelu_bf16, sycl_kernels::bf16, (probes::binary<sycl_kernels::bf16, probes::kGelu>(x, out)))
PROBE(gelu_tanh_fp32, float, (probes::binary<float, probes::kGeluTanh>(x, out)))
PROBE(exp_fp32, float, (probes::exp_alone(x, out)))
