// kernels/norm/qknorm.hpp: per-head RMSNorm of q and k in place, one work-group per (token, head).
//
// q is [tokens, num_q_heads, kHeadDim] and k [tokens, num_k_heads, kHeadDim], each
// with its own token stride (they are often views into one fused qkv tensor) and
// heads packed within a token. Work-groups [0, tokens * num_q_heads) take q's
// heads, the rest k's, so one launch normalizes both.
#pragma once

#include "rmsnorm.hpp"

namespace sycl_kernels {

template <typename T, int kHeadDim, int kThreads, int kVec>
inline void qknorm(T* q, int64_t q_token_stride, int64_t num_q_heads, T* k,
                   int64_t k_token_stride, int64_t num_k_heads, const T* q_weight,
                   const T* k_weight, float eps) {
  const auto item = this_nd_item();
  int64_t row = item.get_group(0);
  const int64_t tokens =
      static_cast<int64_t>(item.get_group_range(0)) / (num_q_heads + num_k_heads);
  T* base;
  const T* weight;
  if (row < tokens * num_q_heads) {
    base = q + (row / num_q_heads) * q_token_stride + (row % num_q_heads) * kHeadDim;
    weight = q_weight;
  } else {
    row -= tokens * num_q_heads;
    base = k + (row / num_k_heads) * k_token_stride + (row % num_k_heads) * kHeadDim;
    weight = k_weight;
  }
  rmsnorm_row<T, kHeadDim, kThreads, kVec, false, false>(item, base, nullptr, weight, base,
                                                          eps);
}

}  // namespace sycl_kernels
