// kernels/quant/convert.hpp: the quantized storage types and the float -> quantized conversions.
//
// Both saturate: a value beyond the type's range becomes its largest (or smallest)
// value. Rounding is to nearest, ties to even, as torch's float8 cast rounds; int8
// may instead round toward zero (kTruncate, as a C++ cast does).
#pragma once

#include <cstdint>

#include "../common/device.hpp"

namespace sycl_kernels {

// float8_e4m3fn as plain 8-bit storage (1 sign, 4 exponent, 3 mantissa bits, no
// infinities; 0x7f and 0xff are NaN), converted with integer arithmetic.
struct fp8e4m3 {
  uint8_t bits;
};

// The largest value of a type: a dynamic scale maps a group's absolute maximum to it.
template <typename Q>
struct QuantRange;

template <>
struct QuantRange<fp8e4m3> {
  static constexpr float kMax = 448.0f;
};

template <>
struct QuantRange<int8_t> {
  static constexpr float kMax = 127.0f;
};

template <typename Q, bool kTruncate = false>
struct Quantize;

// The bits of torch's float -> float8_e4m3fn cast (c10's fp8e4m3fn_from_fp32_value) of
// v clamped to [-448, 448]; NaN stays NaN (with its sign). Branch-free: it vectorizes.
template <>
struct Quantize<fp8e4m3, false> {
  static fp8e4m3 from(float v) {
    const uint32_t bits = ::sycl::bit_cast<uint32_t>(v);
    const uint32_t sign = (bits >> 24) & 0x80u;
    const bool is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
    const float clamped = ::sycl::fmin(::sycl::fabs(v), 448.0f);
    const uint32_t magnitude = ::sycl::bit_cast<uint32_t>(clamped);
    // Below 2^-6 (the smallest normal), a subnormal: adding 2^14 (141 << 23) places its
    // 3 mantissa bits at the bottom of the float's, rounded to even by the addition.
    constexpr uint32_t kSubnormalMagic = 141u << 23;
    const uint32_t subnormal =
        ::sycl::bit_cast<uint32_t>(clamped + ::sycl::bit_cast<float>(kSubnormalMagic)) -
        kSubnormalMagic;
    // Otherwise rebias the exponent (127 -> 7) and round the mantissa to 3 bits, to even.
    const uint32_t odd = (magnitude >> 20) & 1u;
    const uint32_t normal = (magnitude + ((7u - 127u) << 23) + 0x7ffffu + odd) >> 20;
    const uint32_t result = magnitude < (121u << 23) ? subnormal : normal;
    return fp8e4m3{static_cast<uint8_t>((is_nan ? 0x7fu : result) | sign)};
  }
};

// Clamp to [-128, 127], then round to nearest even (or toward zero); NaN becomes 0.
template <bool kTruncate>
struct Quantize<int8_t, kTruncate> {
  static int8_t from(float v) {
    const float clamped = ::sycl::fmin(::sycl::fmax(v, -128.0f), 127.0f);
    const float rounded = kTruncate ? ::sycl::trunc(clamped) : ::sycl::rint(clamped);
    return static_cast<int8_t>(v != v ? 0.0f : rounded);
  }
};

}  // namespace sycl_kernels
