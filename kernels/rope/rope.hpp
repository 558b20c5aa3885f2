// kernels/rope/rope.hpp: rotary position embedding of q and k in place, one work-group per (token, head).
//
// q and k are seen as [batch, seq, heads, kHeadDim] with any batch, seq and head
// strides (the host maps [tokens, heads, D] and [batch, heads, seq, D] views onto
// this); positions as [batch, seq] with strides (0 where broadcast).
// cos_sin_cache is [max_position, kRotaryDim] of C (float, or q's type): cos in the
// first half of a row, sin in the second. The first kRotaryDim elements of each
// head rotate; the rest stay. NeoX style pairs element i with i + kRotaryDim / 2,
// GPT-J style pairs 2i with 2i + 1. Math in float, one rounding. The _store_kv
// form also writes the rotated k and v into k_cache / v_cache [slots,
// num_k_heads, kHeadDim] at slot out_loc[token] (tokens numbered batch-major; a
// negative slot stores nothing, e.g. padding). num_k_heads may be 0 (no k).
//
// Work-groups [0, batch * seq * (num_q_heads + num_k_heads)) take one head each,
// so every loop has a compile-time trip count and unrolls.
#pragma once

#include "../common/dtype.hpp"
#include "../common/loop.hpp"

namespace sycl_kernels {

// Where one tensor's heads are: strides of its batch, seq and head dimensions.
struct HeadStrides {
  int64_t batch, seq, head;

  int64_t offset(int64_t b, int64_t s, int64_t h) const { return b * batch + s * seq + h * head; }
};

template <typename T, typename C, typename Pos, int kHeadDim, int kRotaryDim, bool kNeox,
          int kThreads, bool kStoreKv>
inline void rope_head(const Pos* positions, int64_t positions_batch_stride,
                      int64_t positions_seq_stride, int64_t seq_len, T* q, HeadStrides q_at,
                      int64_t num_q_heads, T* k, HeadStrides k_at, int64_t num_k_heads,
                      const C* cos_sin_cache, const T* v, HeadStrides v_at, T* k_cache,
                      T* v_cache, const int64_t* out_loc) {
  static_assert(kRotaryDim % 2 == 0 && kRotaryDim <= kHeadDim, "rotary_dim: even, <= head_dim");
  constexpr int kHalf = kRotaryDim / 2;
  const auto item = this_nd_item();
  const int tid = static_cast<int>(item.get_local_id(0));
  const int64_t heads = num_q_heads + num_k_heads;
  const int64_t token = static_cast<int64_t>(item.get_group(0)) / heads;
  const int64_t head = static_cast<int64_t>(item.get_group(0)) % heads;
  const int64_t b = token / seq_len;
  const int64_t s = token % seq_len;
  const bool is_q = head < num_q_heads;
  const int64_t k_head = head - num_q_heads;
  T* x = is_q ? q + q_at.offset(b, s, head) : k + k_at.offset(b, s, k_head);
  const int64_t position =
      static_cast<int64_t>(positions[b * positions_batch_stride + s * positions_seq_stride]);
  const C* cos = cos_sin_cache + position * kRotaryDim;
  const C* sin = cos + kHalf;
  const int64_t slot = kStoreKv && !is_q ? out_loc[token] : -1;
  T* cached = kStoreKv && slot >= 0 ? k_cache + (slot * num_k_heads + k_head) * kHeadDim : nullptr;

  for_each_strided<kHalf, kThreads>(tid, [&](int i) {
    const int first = kNeox ? i : 2 * i;
    const int second = kNeox ? i + kHalf : 2 * i + 1;
    const float a = to_float(x[first]);
    const float b = to_float(x[second]);
    const float c = to_float(cos[i]);
    const float si = to_float(sin[i]);
    const T rotated_first = from_float<T>(a * c - b * si);
    const T rotated_second = from_float<T>(b * c + a * si);
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
      const T* v_head = v + v_at.offset(b, s, k_head);
      T* v_cached = v_cache + (slot * num_k_heads + k_head) * kHeadDim;
      for_each_strided<kHeadDim, kThreads>(tid, [&](int i) { v_cached[i] = v_head[i]; });
    }
  }
}

template <typename T, typename C, typename Pos, int kHeadDim, int kRotaryDim, bool kNeox,
          int kThreads>
inline void rope(const Pos* positions, int64_t positions_batch_stride,
                 int64_t positions_seq_stride, int64_t seq_len, T* q, int64_t q_batch_stride,
                 int64_t q_seq_stride, int64_t q_head_stride, int64_t num_q_heads, T* k,
                 int64_t k_batch_stride, int64_t k_seq_stride, int64_t k_head_stride,
                 int64_t num_k_heads, const C* cos_sin_cache) {
  rope_head<T, C, Pos, kHeadDim, kRotaryDim, kNeox, kThreads, false>(
      positions, positions_batch_stride, positions_seq_stride, seq_len, q,
      {q_batch_stride, q_seq_stride, q_head_stride}, num_q_heads, k,
      {k_batch_stride, k_seq_stride, k_head_stride}, num_k_heads, cos_sin_cache, nullptr, {},
      nullptr, nullptr, nullptr);
}

template <typename T, typename C, typename Pos, int kHeadDim, int kRotaryDim, bool kNeox,
          int kThreads>
inline void rope_store_kv(const Pos* positions, int64_t positions_batch_stride,
                          int64_t positions_seq_stride, int64_t seq_len, T* q,
                          int64_t q_batch_stride, int64_t q_seq_stride, int64_t q_head_stride,
                          int64_t num_q_heads, T* k, int64_t k_batch_stride,
                          int64_t k_seq_stride, int64_t k_head_stride, int64_t num_k_heads,
                          const C* cos_sin_cache, const T* v, int64_t v_batch_stride,
                          int64_t v_seq_stride, int64_t v_head_stride, T* k_cache, T* v_cache,
                          const int64_t* out_loc) {
  rope_head<T, C, Pos, kHeadDim, kRotaryDim, kNeox, kThreads, true>(
      positions, positions_batch_stride, positions_seq_stride, seq_len, q,
      {q_batch_stride, q_seq_stride, q_head_stride}, num_q_heads, k,
      {k_batch_stride, k_seq_stride, k_head_stride}, num_k_heads, cos_sin_cache, v,
      {v_batch_stride, v_seq_stride, v_head_stride}, k_cache, v_cache, out_loc);
}

}  // namespace sycl_kernels
