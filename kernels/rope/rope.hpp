// kernels/rope/rope.hpp: rotary position embedding of q and k in place, one work-group per (token, head).
//
// q is [tokens, num_q_heads, kHeadDim] and k [tokens, num_k_heads, kHeadDim] (any
// token stride, heads packed). cos_sin_cache is float [max_position, kRotaryDim]:
// cos in the first half of a row, sin in the second. The first kRotaryDim
// elements of each head rotate; the rest stay. NeoX style pairs element i with
// i + kRotaryDim / 2, GPT-J style pairs 2i with 2i + 1. The _store_kv form also
// writes the rotated k and v into k_cache / v_cache [slots, num_k_heads, kHeadDim]
// at slot out_loc[token] (a negative slot stores nothing, e.g. padding).
//
// Work-groups [0, tokens * (num_q_heads + num_k_heads)) take one head each, so
// every loop has a compile-time trip count and unrolls.
#pragma once

#include "../common/dtype.hpp"
#include "../common/loop.hpp"

namespace sycl_kernels {

template <typename T, typename Pos, int kHeadDim, int kRotaryDim, bool kNeox, int kThreads,
          bool kStoreKv>
inline void rope_head(const Pos* positions, T* q, int64_t q_token_stride, int64_t num_q_heads,
                      T* k, int64_t k_token_stride, int64_t num_k_heads,
                      const float* cos_sin_cache, const T* v, int64_t v_token_stride,
                      T* k_cache, T* v_cache, const int64_t* out_loc) {
  static_assert(kRotaryDim % 2 == 0 && kRotaryDim <= kHeadDim, "rotary_dim: even, <= head_dim");
  constexpr int kHalf = kRotaryDim / 2;
  const auto item = this_nd_item();
  const int tid = static_cast<int>(item.get_local_id(0));
  const int64_t heads = num_q_heads + num_k_heads;
  const int64_t token = static_cast<int64_t>(item.get_group(0)) / heads;
  const int64_t head = static_cast<int64_t>(item.get_group(0)) % heads;
  const bool is_q = head < num_q_heads;
  const int64_t k_head = head - num_q_heads;
  T* x = is_q ? q + token * q_token_stride + head * kHeadDim
              : k + token * k_token_stride + k_head * kHeadDim;
  const float* cos = cos_sin_cache + static_cast<int64_t>(positions[token]) * kRotaryDim;
  const float* sin = cos + kHalf;
  const int64_t slot = kStoreKv && !is_q ? out_loc[token] : -1;
  T* cached = kStoreKv && slot >= 0 ? k_cache + (slot * num_k_heads + k_head) * kHeadDim : nullptr;

  for_each_strided<kHalf, kThreads>(tid, [&](int i) {
    const int first = kNeox ? i : 2 * i;
    const int second = kNeox ? i + kHalf : 2 * i + 1;
    const float a = to_float(x[first]);
    const float b = to_float(x[second]);
    const T rotated_first = from_float<T>(a * cos[i] - b * sin[i]);
    const T rotated_second = from_float<T>(b * cos[i] + a * sin[i]);
    x[first] = rotated_first;
    x[second] = rotated_second;
    if (kStoreKv && cached != nullptr) {
      cached[first] = rotated_first;
      cached[second] = rotated_second;
    }
  });
  if constexpr (kStoreKv) {
    if (cached != nullptr) {
      for_each_strided<kHeadDim - kRotaryDim, kThreads>(
          tid, [&](int i) { cached[kRotaryDim + i] = x[kRotaryDim + i]; });
      const T* v_head = v + token * v_token_stride + k_head * kHeadDim;
      T* v_cached = v_cache + (slot * num_k_heads + k_head) * kHeadDim;
      for_each_strided<kHeadDim, kThreads>(tid, [&](int i) { v_cached[i] = v_head[i]; });
    }
  }
}

template <typename T, typename Pos, int kHeadDim, int kRotaryDim, bool kNeox, int kThreads>
inline void rope(const Pos* positions, T* q, int64_t q_token_stride, int64_t num_q_heads, T* k,
                 int64_t k_token_stride, int64_t num_k_heads, const float* cos_sin_cache) {
  rope_head<T, Pos, kHeadDim, kRotaryDim, kNeox, kThreads, false>(
      positions, q, q_token_stride, num_q_heads, k, k_token_stride, num_k_heads, cos_sin_cache,
      nullptr, 0, nullptr, nullptr, nullptr);
}

template <typename T, typename Pos, int kHeadDim, int kRotaryDim, bool kNeox, int kThreads>
inline void rope_store_kv(const Pos* positions, T* q, int64_t q_token_stride,
                          int64_t num_q_heads, T* k, int64_t k_token_stride,
                          int64_t num_k_heads, const float* cos_sin_cache, const T* v,
                          int64_t v_token_stride, T* k_cache, T* v_cache,
                          const int64_t* out_loc) {
  rope_head<T, Pos, kHeadDim, kRotaryDim, kNeox, kThreads, true>(
      positions, q, q_token_stride, num_q_heads, k, k_token_stride, num_k_heads, cos_sin_cache,
      v, v_token_stride, k_cache, v_cache, out_loc);
}

}  // namespace sycl_kernels
