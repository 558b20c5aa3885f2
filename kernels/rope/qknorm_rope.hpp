// kernels/rope/qknorm_rope.hpp: per-head RMSNorm, then rotary embedding, of q and k in one pass.
//
// What kernels/norm/qknorm.hpp and then kernels/rope/rope.hpp compute, in one
// launch: each work-group takes its (token, head)s as rope.hpp does (the same
// layouts, positions, cos/sin cache and optional KV store), sums each head's
// squares, and rotates the normalized values. The normalized value
// x * rsqrt(mean(x^2) + eps) * w (kGemma: 1 + w; W = NoWeight: no scale) stays in
// float through the rotation and is rounded to T once; the elements past
// kRotaryDim are normalized only. q's heads use q_weight, k's k_weight.
#pragma once

#include "../norm/rmsnorm.hpp"
#include "rope.hpp"

namespace sycl_kernels {

template <typename T, typename W, typename C, typename Pos, int kHeadDim, int kRotaryDim,
          bool kNeox, bool kGemma, int kThreads, bool kStoreKv>
inline void qknorm_rope_head(int64_t index, const Pos* positions, int64_t positions_batch_stride,
                             int64_t positions_seq_stride, int64_t seq_len, T* q, HeadStrides q_at,
                             int64_t num_q_heads, T* k, HeadStrides k_at, int64_t num_k_heads,
                             const C* cos_sin_cache, const T* v, HeadStrides v_at, T* k_cache,
                             T* v_cache, const int64_t* out_loc, const W* q_weight,
                             const W* k_weight, float eps) {
  const auto item = this_nd_item();
  const int tid = static_cast<int>(item.get_local_id(0));
  const RopeHead<T, C> h = locate_head<T, C, Pos, kHeadDim, kRotaryDim, kStoreKv>(
      index, positions, positions_batch_stride, positions_seq_stride, seq_len, q, q_at, num_q_heads,
      k, k_at, num_k_heads, cos_sin_cache, k_cache, out_loc);

  float sum_sq = 0.0f;
  for_each_strided<kHeadDim, kThreads>(tid, [&](int i) {
    const float e = to_float(h.x[i]);
    sum_sq += e * e;
  });
  // The reduction, a synchronization point of the group, also orders every read above
  // before the writes below.
  const float inv_rms = inverse_rms<kHeadDim, kThreads>(item, sum_sq, eps);
  const W* weight = h.is_q ? q_weight : k_weight;
  // As rmsnorm_row normalizes, without its rounding.
  auto normalized = [&](T e, float scale) { return to_float(e) * inv_rms * scale; };
  auto normalized_pair = [&](const Vec<T, 2>& e, int first, int second, auto as_pairs) {
    float scales[2];
    if constexpr (decltype(as_pairs)::value) {
      norm_scales<2, kGemma>(weight, first, true, scales);  // adjacent: one load
    } else {
      scales[0] = norm_scale<kGemma>(weight, first);
      scales[1] = norm_scale<kGemma>(weight, second);
    }
    return Vec<float, 2>{{normalized(e.v[0], scales[0]), normalized(e.v[1], scales[1])}};
  };

  rotate_head<T, C, kRotaryDim, kNeox, kThreads, kStoreKv>(tid, h, normalized_pair,
                                                           is_weight_aligned<2>(weight));
  store_rest<T, C, kHeadDim, kRotaryDim, kThreads, true>(tid, h, [&](int i) {
    return from_float<T>(normalized(h.x[i], norm_scale<kGemma>(weight, i)));
  });
  if constexpr (kStoreKv) {
    if (h.cached != nullptr) {
      store_v<T, C, kHeadDim, kThreads>(tid, h, v, v_at, v_cache, num_k_heads);
    }
  }
}

template <typename T, typename W, typename C, typename Pos, int kHeadDim, int kRotaryDim,
          bool kNeox, bool kGemma, int kThreads, int kHeadsPerGroup>
inline void qknorm_rope(const Pos* positions, int64_t positions_batch_stride,
                        int64_t positions_seq_stride, int64_t seq_len, T* q, int64_t q_batch_stride,
                        int64_t q_seq_stride, int64_t q_head_stride, int64_t num_q_heads, T* k,
                        int64_t k_batch_stride, int64_t k_seq_stride, int64_t k_head_stride,
                        int64_t num_k_heads, const C* cos_sin_cache, int64_t total_heads,
                        const W* q_weight, const W* k_weight, float eps) {
  for_each_head<kHeadsPerGroup>(total_heads, [&](int64_t index) {
    qknorm_rope_head<T, W, C, Pos, kHeadDim, kRotaryDim, kNeox, kGemma, kThreads, false>(
        index, positions, positions_batch_stride, positions_seq_stride, seq_len, q,
        {q_batch_stride, q_seq_stride, q_head_stride}, num_q_heads, k,
        {k_batch_stride, k_seq_stride, k_head_stride}, num_k_heads, cos_sin_cache, nullptr, {},
        nullptr, nullptr, nullptr, q_weight, k_weight, eps);
  });
}

template <typename T, typename W, typename C, typename Pos, int kHeadDim, int kRotaryDim,
          bool kNeox, bool kGemma, int kThreads, int kHeadsPerGroup>
inline void qknorm_rope_store_kv(
    const Pos* positions, int64_t positions_batch_stride, int64_t positions_seq_stride,
    int64_t seq_len, T* q, int64_t q_batch_stride, int64_t q_seq_stride, int64_t q_head_stride,
    int64_t num_q_heads, T* k, int64_t k_batch_stride, int64_t k_seq_stride, int64_t k_head_stride,
    int64_t num_k_heads, const C* cos_sin_cache, const T* v, int64_t v_batch_stride,
    int64_t v_seq_stride, int64_t v_head_stride, T* k_cache, T* v_cache, const int64_t* out_loc,
    int64_t total_heads, const W* q_weight, const W* k_weight, float eps) {
  for_each_head<kHeadsPerGroup>(total_heads, [&](int64_t index) {
    qknorm_rope_head<T, W, C, Pos, kHeadDim, kRotaryDim, kNeox, kGemma, kThreads, true>(
        index, positions, positions_batch_stride, positions_seq_stride, seq_len, q,
        {q_batch_stride, q_seq_stride, q_head_stride}, num_q_heads, k,
        {k_batch_stride, k_seq_stride, k_head_stride}, num_k_heads, cos_sin_cache, v,
        {v_batch_stride, v_seq_stride, v_head_stride}, k_cache, v_cache, out_loc, q_weight,
        k_weight, eps);
  });
}

}  // namespace sycl_kernels
