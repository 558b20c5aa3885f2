// kernels/common/vec.hpp: fixed-width vector loads and stores of storage types.
//
// kVec elements per access is a tuning choice made per device class: a GPU
// work-item does best with one 16-byte access (kVecWidth<T>); the CPU device's
// vectorizer packs consecutive work-items into SIMD lanes, so there one element
// per work-item (kVec = 1) gives contiguous SIMD loads while a per-work-item
// vector turns into gathers (4-10x slower, measured). A pair moved as one integer
// is the exception: a pair of 2-byte elements as one uint32, one 32-bit SIMD lane
// per work-item, made the gated activations up to 20 % faster on long bf16 and
// fp16 rows (specs/spec.py's vec_width says which kernels use it); rope's GPT-J
// pairs move as one uint32 or uint64 (kernels/rope/rope.hpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "dtype.hpp"

namespace sycl_kernels {

// One 16-byte memory transaction holds this many elements of T.
template <typename T>
inline constexpr int kVecWidth = 16 / static_cast<int>(sizeof(T));

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Whether Vec<T, N> is a pair of 2- or 4-byte elements, moved as one uint32 or
// uint64: loaded as a struct of two fields it became gathers on the CPU device
// (2.5x slower for fp16). Devices are little-endian: the first element is the low half.
template <typename T, int N>
inline constexpr bool kIsPair = N == 2 && (sizeof(T) == 2 || sizeof(T) == 4);

// The unsigned integer of `kBytes` bytes.
template <int kBytes>
using UintOf =
    std::conditional_t<kBytes == 2, uint16_t, std::conditional_t<kBytes == 4, uint32_t, uint64_t>>;

template <int N, typename T>
inline Vec<T, N> load_vec(const T* p) {
  if constexpr (kIsPair<T, N>) {
    using Element = UintOf<sizeof(T)>;
    const UintOf<2 * sizeof(T)> u = *reinterpret_cast<const UintOf<2 * sizeof(T)>*>(p);
    return {{::sycl::bit_cast<T>(static_cast<Element>(u)),
             ::sycl::bit_cast<T>(static_cast<Element>(u >> (8 * sizeof(T))))}};
  } else {
    return *reinterpret_cast<const Vec<T, N>*>(p);
  }
}

template <int N, typename T>
inline void store_vec(T* p, const Vec<T, N>& v) {
  if constexpr (kIsPair<T, N>) {
    using Pair = UintOf<2 * sizeof(T)>;
    using Element = UintOf<sizeof(T)>;
    *reinterpret_cast<Pair*>(p) =
        static_cast<Pair>(::sycl::bit_cast<Element>(v.v[0])) |
        (static_cast<Pair>(::sycl::bit_cast<Element>(v.v[1])) << (8 * sizeof(T)));
  } else {
    *reinterpret_cast<Vec<T, N>*>(p) = v;
  }
}

template <int N, typename T>
inline bool is_vec_aligned(const T* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * N) == 0;
}

}  // namespace sycl_kernels
