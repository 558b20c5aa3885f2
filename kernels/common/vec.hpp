// kernels/common/vec.hpp: fixed-width vector loads and stores of storage types.
//
// kVec elements per access is a tuning choice made per device class: a GPU
// work-item does best with one 16-byte access (kVecWidth<T>); the CPU device's
// vectorizer packs consecutive work-items into SIMD lanes, so there one element
// per work-item (kVec = 1) gives contiguous SIMD loads while a per-work-item
// vector turns into gathers (4-10x slower, measured). A pair of 2-byte elements
// moved as one uint32 is the exception: one 32-bit SIMD lane per work-item, which
// made the gated activations up to 20 % faster on long bf16 and fp16 rows
// (jit/spec.py's vec_width says which kernels use it).
#pragma once

#include <cstdint>

#include "dtype.hpp"

namespace sycl_kernels {

// One 16-byte memory transaction holds this many elements of T.
template <typename T>
inline constexpr int kVecWidth = 16 / static_cast<int>(sizeof(T));

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Whether Vec<T, N> is a pair of 2-byte elements, moved as one uint32: loaded as a
// struct of two fp16 fields it became gathers on the CPU device (2.5x slower).
// Devices are little-endian: the first element is the low half.
template <typename T, int N>
inline constexpr bool kIsPair = N == 2 && sizeof(T) == 2;

template <int N, typename T>
inline Vec<T, N> load_vec(const T* p) {
  if constexpr (kIsPair<T, N>) {
    const uint32_t u = *reinterpret_cast<const uint32_t*>(p);
    return {{::sycl::bit_cast<T>(static_cast<uint16_t>(u)),
             ::sycl::bit_cast<T>(static_cast<uint16_t>(u >> 16))}};
  } else {
    return *reinterpret_cast<const Vec<T, N>*>(p);
  }
}

template <int N, typename T>
inline void store_vec(T* p, const Vec<T, N>& v) {
  if constexpr (kIsPair<T, N>) {
    *reinterpret_cast<uint32_t*>(p) =
        static_cast<uint32_t>(::sycl::bit_cast<uint16_t>(v.v[0])) |
        (static_cast<uint32_t>(::sycl::bit_cast<uint16_t>(v.v[1])) << 16);
  } else {
    *reinterpret_cast<Vec<T, N>*>(p) = v;
  }
}

template <int N, typename T>
inline bool is_vec_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * N) == 0;
}

}  // namespace sycl_kernels
