// kernels/common/vec.hpp: fixed-width vector loads and stores of storage types.
//
// kVec elements per access is a tuning choice made per device class: a GPU
// work-item does best with one 16-byte access (kVecWidth<T>); the CPU device's
// vectorizer packs consecutive work-items into SIMD lanes, so there one element
// per work-item (kVec = 1) gives contiguous SIMD loads while a per-work-item
// vector turns into gathers (4-10x slower, measured).
#pragma once

#include "dtype.hpp"

namespace sycl_kernels {

// One 16-byte memory transaction holds this many elements of T.
template <typename T>
inline constexpr int kVecWidth = 16 / static_cast<int>(sizeof(T));

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

template <int N, typename T>
inline Vec<T, N> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, N>*>(p);
}

template <int N, typename T>
inline void store_vec(T* p, const Vec<T, N>& v) {
  *reinterpret_cast<Vec<T, N>*>(p) = v;
}

template <int N, typename T>
inline bool is_vec_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * N) == 0;
}

}  // namespace sycl_kernels
