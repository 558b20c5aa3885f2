// kernels/common/dtype.hpp: storage types and their conversions to and from float.
#pragma once

#include "device.hpp"

namespace sycl_kernels {

using fp32 = float;
using fp16 = ::sycl::half;

// bfloat16 as plain 16-bit storage: the runtime compiler cannot link
// sycl::ext::oneapi::bfloat16 (its fallback device library is not shipped),
// so the conversions are done here with integer arithmetic.
struct bf16 {
  uint16_t bits;
};

inline float to_float(float v) { return v; }
inline float to_float(fp16 v) { return static_cast<float>(v); }
inline float to_float(bf16 v) {
  return ::sycl::bit_cast<float>(static_cast<uint32_t>(v.bits) << 16);
}

template <typename T>
inline T from_float(float v);

template <>
inline float from_float<float>(float v) {
  return v;
}

template <>
inline fp16 from_float<fp16>(float v) {
  return static_cast<fp16>(v);
}

// Round to nearest even; NaN stays a (quiet) NaN instead of rounding to Inf. Both
// results are computed and one selected: branch-free, which made bf16 rope and
// qknorm 5-7 % faster on the CPU device than an early return for NaN.
template <>
inline bf16 from_float<bf16>(float v) {
  const uint32_t u = ::sycl::bit_cast<uint32_t>(v);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return bf16{static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded)};
}

}  // namespace sycl_kernels
