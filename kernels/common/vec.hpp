// kernels/common/vec.hpp: fixed-width vector loads and stores of storage types.
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

template <typename T, int N = kVecWidth<T>>
inline Vec<T, N> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, N>*>(p);
}

template <typename T, int N = kVecWidth<T>>
inline void store_vec(T* p, const Vec<T, N>& v) {
  *reinterpret_cast<Vec<T, N>*>(p) = v;
}

template <typename T>
inline bool is_vec_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * kVecWidth<T>) == 0;
}

}  // namespace sycl_kernels
