// kernels/rope/rope.hpp: rotary position embedding of q and k in place, one work-group per token.
//
// q is [tokens, num_q_heads, kHeadDim] and k [tokens, num_k_heads, kHeadDim] (any
// token stride, heads packed). cos_sin_cache is float [max_position, kRotaryDim]:
// cos in the first half of a row, sin in the second. The first kRotaryDim
// elements of each head rotate; the rest stay. NeoX style pairs element i with
// i + kRotaryDim / 2, GPT-J style pairs 2i with 2i + 1. The _store_kv form also
// writes the rotated k and v into k_cache / v_cache [slots, num_k_heads, kHeadDim]
// at slot out_loc[token] (a negative slot stores nothing, e.g. padding).
#pragma once

#include "../common/dtype.hpp"

namespace sycl_kernels {

template <typename T, typename Pos, int kHeadDim, int kRotaryDim, bool kNeox, bool kStoreKv>
inline void rope_token(const Pos* positions, T* q, int64_t q_token_stride, int64_t num_q_heads,
                       T* k, int64_t k_token_stride, int64_t num_k_heads,
                       const float* cos_sin_cache, const T* v, int64_t v_token_stride,
                       T* k_cache, T* v_cache, const int64_t* out_loc) {
  static_assert(kRotaryDim % 2 == 0 && kRotaryDim <= kHeadDim, "rotary_dim: even, <= head_dim");
  constexpr int kHalf = kRotaryDim / 2;
  const auto item = this_nd_item();
  const int64_t token = item.get_group(0);
  const int tid = static_cast<int>(item.get_local_id(0));
  const int threads = static_cast<int>(item.get_local_range(0));
  const float* cos = cos_sin_cache + static_cast<int64_t>(positions[token]) * kRotaryDim;
  const float* sin = cos + kHalf;
  T* q_token = q + token * q_token_stride;
  T* k_token = k + token * k_token_stride;
  const int64_t slot = kStoreKv ? out_loc[token] : -1;
  const int64_t slot_offset = slot * num_k_heads * kHeadDim;

  const int64_t pairs = (num_q_heads + num_k_heads) * kHalf;
  for (int64_t j = tid; j < pairs; j += threads) {
    const int64_t head = j / kHalf;
    const int i = static_cast<int>(j % kHalf);
    const bool is_q = head < num_q_heads;
    const int64_t head_offset = (is_q ? head : head - num_q_heads) * kHeadDim;
    T* x = (is_q ? q_token : k_token) + head_offset;
    const int first = kNeox ? i : 2 * i;
    const int second = kNeox ? i + kHalf : 2 * i + 1;
    const float a = to_float(x[first]);
    const float b = to_float(x[second]);
    const T rotated_first = from_float<T>(a * cos[i] - b * sin[i]);
    const T rotated_second = from_float<T>(b * cos[i] + a * sin[i]);
    x[first] = rotated_first;
    x[second] = rotated_second;
    if (kStoreKv && !is_q && slot >= 0) {
      k_cache[slot_offset + head_offset + first] = rotated_first;
      k_cache[slot_offset + head_offset + second] = rotated_second;
    }
  }
  if (kStoreKv && slot >= 0) {
    constexpr int kPass = kHeadDim - kRotaryDim;
    if constexpr (kPass > 0) {
      for (int64_t j = tid; j < num_k_heads * kPass; j += threads) {
        const int64_t at = (j / kPass) * kHeadDim + kRotaryDim + j % kPass;
        k_cache[slot_offset + at] = k_token[at];
      }
    }
    const T* v_token = v + token * v_token_stride;
    for (int64_t j = tid; j < num_k_heads * kHeadDim; j += threads) {
      v_cache[slot_offset + j] = v_token[j];
    }
  }
}

template <typename T, typename Pos, int kHeadDim, int kRotaryDim, bool kNeox>
inline void rope(const Pos* positions, T* q, int64_t q_token_stride, int64_t num_q_heads, T* k,
                 int64_t k_token_stride, int64_t num_k_heads, const float* cos_sin_cache) {
  rope_token<T, Pos, kHeadDim, kRotaryDim, kNeox, false>(
      positions, q, q_token_stride, num_q_heads, k, k_token_stride, num_k_heads, cos_sin_cache,
      nullptr, 0, nullptr, nullptr, nullptr);
}

template <typename T, typename Pos, int kHeadDim, int kRotaryDim, bool kNeox>
inline void rope_store_kv(const Pos* positions, T* q, int64_t q_token_stride,
                          int64_t num_q_heads, T* k, int64_t k_token_stride,
                          int64_t num_k_heads, const float* cos_sin_cache, const T* v,
                          int64_t v_token_stride, T* k_cache, T* v_cache,
                          const int64_t* out_loc) {
  rope_token<T, Pos, kHeadDim, kRotaryDim, kNeox, true>(
      positions, q, q_token_stride, num_q_heads, k, k_token_stride, num_k_heads, cos_sin_cache,
      v, v_token_stride, k_cache, v_cache, out_loc);
}

}  // namespace sycl_kernels
