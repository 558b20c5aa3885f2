// kernels/rope/rope.hpp: rotary position embedding of q and k in place, by heads.
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
// The heads, numbered token-major ([0, total_heads) with total_heads = batch * seq *
// (num_q_heads + num_k_heads)), go kHeadsPerGroup to a work-group, one after
// another (for_each_head); a head's loops have compile-time trip counts and
// unroll. The pieces below (for_each_head, locate_head, rotate_head, store_rest,
// store_v) are shared with qknorm_rope.hpp, which rotates normalized values
// instead of the stored ones.
#pragma once

#include <type_traits>

#include "../common/dtype.hpp"
#include "../common/loop.hpp"
#include "../common/vec.hpp"

namespace sycl_kernels {

// Where one tensor's heads are: strides of its batch, seq and head dimensions.
struct HeadStrides {
  int64_t batch, seq, head;

  int64_t offset(int64_t b, int64_t s, int64_t h) const { return b * batch + s * seq + h * head; }
};

// The head this work-group rotates, its cos/sin row and, with the KV store, its cache row.
template <typename T, typename C>
struct RopeHead {
  T* x;
  const C* cos;  // kRotaryDim / 2 cosines, then as many sines
  bool is_q;
  int64_t b, s;    // batch and seq index of the token
  int64_t k_head;  // the head's index among k's heads (k heads only)
  int64_t slot;    // the KV-cache slot, or -1: nothing stored
  T* cached;       // the k_cache row of this head, or nullptr
};

// Runs head(index) for this work-group's heads. The bound is uniform over the group,
// so all its work-items run the same heads (and reach the same barriers).
template <int kHeadsPerGroup, typename Head>
inline void for_each_head(int64_t total_heads, Head&& head) {
  const int64_t first = static_cast<int64_t>(this_nd_item().get_group(0)) * kHeadsPerGroup;
#pragma unroll
  for (int i = 0; i < kHeadsPerGroup; ++i) {
    if (first + i >= total_heads) break;
    head(first + i);
  }
}

template <typename T, typename C, typename Pos, int kHeadDim, int kRotaryDim, bool kStoreKv>
inline RopeHead<T, C> locate_head(int64_t index, const Pos* positions,
                                  int64_t positions_batch_stride, int64_t positions_seq_stride,
                                  int64_t seq_len, T* q, HeadStrides q_at, int64_t num_q_heads,
                                  T* k, HeadStrides k_at, int64_t num_k_heads,
                                  const C* cos_sin_cache, T* k_cache, const int64_t* out_loc) {
  static_assert(kRotaryDim % 2 == 0 && kRotaryDim <= kHeadDim, "rotary_dim: even, <= head_dim");
  RopeHead<T, C> h;
  const int64_t heads = num_q_heads + num_k_heads;
  const int64_t token = index / heads;
  const int64_t head = index % heads;
  h.b = token / seq_len;
  h.s = token % seq_len;
  h.is_q = head < num_q_heads;
  h.k_head = head - num_q_heads;
  h.x = h.is_q ? q + q_at.offset(h.b, h.s, head) : k + k_at.offset(h.b, h.s, h.k_head);
  const int64_t position =
      static_cast<int64_t>(positions[h.b * positions_batch_stride + h.s * positions_seq_stride]);
  h.cos = cos_sin_cache + position * kRotaryDim;
  h.slot = kStoreKv && !h.is_q ? out_loc[token] : -1;
  h.cached =
      kStoreKv && h.slot >= 0 ? k_cache + (h.slot * num_k_heads + h.k_head) * kHeadDim : nullptr;
  return h;
}

// Rotates the first kRotaryDim elements of h.x: values(e, first, second, as_pairs) are
// the rotated pair's elements, stored as e, in float, before the rotation. Each
// result is rounded once, stored in x and (kStoreKv) in h.cached. A work-item reads
// only the two elements it writes.
//
// GPT-J's pairs are adjacent elements: where x, the cache row and the caller
// (pairs_allowed) allow, each is read and written as one integer
// (kernels/common/vec.hpp), not as two stride-2 accesses, which the CPU device
// turned into gathers (4-6x slower than NeoX); as_pairs (std::true_type) then
// tells values so.
template <typename T, typename C, int kRotaryDim, bool kNeox, int kThreads, bool kStoreKv,
          typename Values>
inline void rotate_head(int tid, const RopeHead<T, C>& h, Values&& values,
                        bool pairs_allowed = true) {
  constexpr int kHalf = kRotaryDim / 2;
  const C* sin = h.cos + kHalf;
  auto rotate = [&](auto as_pairs) {
    constexpr bool kPairs = decltype(as_pairs)::value;
    for_each_strided<kHalf, kThreads>(tid, [&](int i) {
      const int first = kNeox ? i : 2 * i;
      const int second = kNeox ? i + kHalf : 2 * i + 1;
      Vec<T, 2> stored;
      if constexpr (kPairs) {
        stored = load_vec<2>(h.x + first);
      } else {
        stored = {{h.x[first], h.x[second]}};
      }
      const Vec<float, 2> ab = values(stored, first, second, as_pairs);
      const float a = ab.v[0];
      const float b = ab.v[1];
      const float c = to_float(h.cos[i]);
      const float si = to_float(sin[i]);
      const Vec<T, 2> rotated{{from_float<T>(a * c - b * si), from_float<T>(b * c + a * si)}};
      if constexpr (kPairs) {
        store_vec<2>(h.x + first, rotated);
        if (kStoreKv && h.cached != nullptr) store_vec<2>(h.cached + first, rotated);
      } else {
        h.x[first] = rotated.v[0];
        h.x[second] = rotated.v[1];
        if (kStoreKv && h.cached != nullptr) {
          h.cached[first] = rotated.v[0];
          h.cached[second] = rotated.v[1];
        }
      }
    });
  };
  // Uniform across the work-group: one head, one cache row.
  const bool pairs = !kNeox && kIsPair<T, 2> && pairs_allowed && is_vec_aligned<2>(h.x) &&
                     (!kStoreKv || h.cached == nullptr || is_vec_aligned<2>(h.cached));
  if (pairs) {
    rotate(std::true_type{});
  } else {
    rotate(std::false_type{});
  }
}

// The elements past kRotaryDim: element(i) (a T) goes to x when kWriteX, and to h.cached
// when there is one.
template <typename T, typename C, int kHeadDim, int kRotaryDim, int kThreads, bool kWriteX,
          typename Element>
inline void store_rest(int tid, const RopeHead<T, C>& h, Element&& element) {
  for_each_strided<kHeadDim - kRotaryDim, kThreads>(tid, [&](int i) {
    const T e = element(kRotaryDim + i);
    if constexpr (kWriteX) h.x[kRotaryDim + i] = e;
    if (h.cached != nullptr) h.cached[kRotaryDim + i] = e;
  });
}

// Copies this k head's v head into v_cache at h.slot (callers check h.cached first).
template <typename T, typename C, int kHeadDim, int kThreads>
inline void store_v(int tid, const RopeHead<T, C>& h, const T* v, HeadStrides v_at, T* v_cache,
                    int64_t num_k_heads) {
  const T* v_head = v + v_at.offset(h.b, h.s, h.k_head);
  T* v_cached = v_cache + (h.slot * num_k_heads + h.k_head) * kHeadDim;
  for_each_strided<kHeadDim, kThreads>(tid, [&](int i) { v_cached[i] = v_head[i]; });
}

template <typename T, typename C, typename Pos, int kHeadDim, int kRotaryDim, bool kNeox,
          int kThreads, bool kStoreKv>
inline void rope_head(int64_t index, const Pos* positions, int64_t positions_batch_stride,
                      int64_t positions_seq_stride, int64_t seq_len, T* q, HeadStrides q_at,
                      int64_t num_q_heads, T* k, HeadStrides k_at, int64_t num_k_heads,
                      const C* cos_sin_cache, const T* v, HeadStrides v_at, T* k_cache, T* v_cache,
                      const int64_t* out_loc) {
  const int tid = static_cast<int>(this_nd_item().get_local_id(0));
  const RopeHead<T, C> h = locate_head<T, C, Pos, kHeadDim, kRotaryDim, kStoreKv>(
      index, positions, positions_batch_stride, positions_seq_stride, seq_len, q, q_at, num_q_heads,
      k, k_at, num_k_heads, cos_sin_cache, k_cache, out_loc);
  rotate_head<T, C, kRotaryDim, kNeox, kThreads, kStoreKv>(
      tid, h, [](const Vec<T, 2>& e, int, int, auto) {
        return Vec<float, 2>{{to_float(e.v[0]), to_float(e.v[1])}};
      });
  if constexpr (kStoreKv) {
    if (h.cached != nullptr) {
      // The rest of k is stored as it is, bit for bit.
      store_rest<T, C, kHeadDim, kRotaryDim, kThreads, false>(tid, h,
                                                              [&](int i) { return h.x[i]; });
      store_v<T, C, kHeadDim, kThreads>(tid, h, v, v_at, v_cache, num_k_heads);
    }
  }
}

template <typename T, typename C, typename Pos, int kHeadDim, int kRotaryDim, bool kNeox,
          int kThreads, int kHeadsPerGroup>
inline void rope(const Pos* positions, int64_t positions_batch_stride, int64_t positions_seq_stride,
                 int64_t seq_len, T* q, int64_t q_batch_stride, int64_t q_seq_stride,
                 int64_t q_head_stride, int64_t num_q_heads, T* k, int64_t k_batch_stride,
                 int64_t k_seq_stride, int64_t k_head_stride, int64_t num_k_heads,
                 const C* cos_sin_cache, int64_t total_heads) {
  for_each_head<kHeadsPerGroup>(total_heads, [&](int64_t index) {
    rope_head<T, C, Pos, kHeadDim, kRotaryDim, kNeox, kThreads, false>(
        index, positions, positions_batch_stride, positions_seq_stride, seq_len, q,
        {q_batch_stride, q_seq_stride, q_head_stride}, num_q_heads, k,
        {k_batch_stride, k_seq_stride, k_head_stride}, num_k_heads, cos_sin_cache, nullptr, {},
        nullptr, nullptr, nullptr);
  });
}

template <typename T, typename C, typename Pos, int kHeadDim, int kRotaryDim, bool kNeox,
          int kThreads, int kHeadsPerGroup>
inline void rope_store_kv(const Pos* positions, int64_t positions_batch_stride,
                          int64_t positions_seq_stride, int64_t seq_len, T* q,
                          int64_t q_batch_stride, int64_t q_seq_stride, int64_t q_head_stride,
                          int64_t num_q_heads, T* k, int64_t k_batch_stride, int64_t k_seq_stride,
                          int64_t k_head_stride, int64_t num_k_heads, const C* cos_sin_cache,
                          const T* v, int64_t v_batch_stride, int64_t v_seq_stride,
                          int64_t v_head_stride, T* k_cache, T* v_cache, const int64_t* out_loc,
                          int64_t total_heads) {
  for_each_head<kHeadsPerGroup>(total_heads, [&](int64_t index) {
    rope_head<T, C, Pos, kHeadDim, kRotaryDim, kNeox, kThreads, true>(
        index, positions, positions_batch_stride, positions_seq_stride, seq_len, q,
        {q_batch_stride, q_seq_stride, q_head_stride}, num_q_heads, k,
        {k_batch_stride, k_seq_stride, k_head_stride}, num_k_heads, cos_sin_cache, v,
        {v_batch_stride, v_seq_stride, v_head_stride}, k_cache, v_cache, out_loc);
  });
}

}  // namespace sycl_kernels
