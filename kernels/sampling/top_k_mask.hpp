// kernels/sampling/top_k_mask.hpp: logits outside each row's top k set to -inf.
//
// Row r of logits [rows, vocab] (unit element stride) keeps every element at or above
// its k-th largest value and gets -inf elsewhere, written to out (which may be logits
// itself): ties with the k-th largest are all kept, so more than k may stay (Hugging
// Face's TopKLogitsWarper: scores < topk(scores, k).values[-1] are masked). k: the
// row's element of top_ks (I, element r * stride) or, where that is null, top_k; a k
// below 1 or at least vocab keeps the row whole (copied to out).
//
// Order: the floats' order, -0.0 equal to +0.0, NaN above +inf (torch.topk's order);
// a NaN is never masked, and when the k-th largest is a NaN nothing is (as Hugging
// Face's comparison with it).
//
// One work-group per row. The k-th largest is found on order-preserving keys of the
// elements' bits (16 for fp16/bf16, 32 for fp32), bit by bit from the top: a counting
// pass over the row a bit (one group reduction each; fewer once exactly k are found,
// then one more counting the NaNs), then one pass writes out. Rows hold fewer than
// 2^31 elements (int32 counts).
#pragma once

#include <cstdint>
#include <limits>

#include "../common/device.hpp"
#include "../common/dtype.hpp"

namespace sycl_kernels {

// Order-preserving unsigned keys of T's bits (kBits of them): a larger value has a
// larger key, -0.0 the key of +0.0, every NaN the largest key. T's formats are all
// sign and magnitude with the exponent's all-ones magnitude kInf for infinity.
template <typename T>
struct OrderKey;

template <>
struct OrderKey<fp32> {
  static constexpr int kBits = 32;
  static constexpr uint32_t kInf = 0x7f800000u;
  static uint32_t bits(fp32 v) { return ::sycl::bit_cast<uint32_t>(v); }
};

template <>
struct OrderKey<fp16> {
  static constexpr int kBits = 16;
  static constexpr uint32_t kInf = 0x7c00u;
  static uint32_t bits(fp16 v) { return ::sycl::bit_cast<uint16_t>(v); }
};

template <>
struct OrderKey<bf16> {
  static constexpr int kBits = 16;
  static constexpr uint32_t kInf = 0x7f80u;
  static uint32_t bits(bf16 v) { return v.bits; }
};

template <typename T>
inline constexpr uint32_t kKeySign = 1u << (OrderKey<T>::kBits - 1);

template <typename T>
inline constexpr uint32_t kKeyMax = kKeySign<T> | (kKeySign<T> - 1u);

template <typename T>
inline uint32_t order_key(T v) {
  constexpr uint32_t sign = kKeySign<T>;
  const uint32_t u = OrderKey<T>::bits(v);
  const uint32_t magnitude = u & (sign - 1u);
  const uint32_t key = magnitude == 0u ? sign : ((u & sign) != 0u ? ~u & kKeyMax<T> : u | sign);
  return magnitude > OrderKey<T>::kInf ? kKeyMax<T> : key;
}

// f(i) for every i in [0, n): tiles of kTile, consecutive i on consecutive work-items,
// the last tile guarded.
template <int kTile, int kThreads, typename F>
inline void for_each_in_row(int tid, int64_t n, F&& f) {
  constexpr int kSteps = kTile / kThreads;
  int64_t start = 0;
  for (; start + kTile <= n; start += kTile) {
#pragma unroll 4
    for (int step = 0; step < kSteps; ++step) f(start + step * kThreads + tid);
  }
  for (int step = 0; step < kSteps; ++step) {
    const int64_t i = start + step * kThreads + tid;
    if (i < n) f(i);
  }
}

template <typename T, typename I, int kTile, int kThreads>
inline void top_k_mask_logits(const T* logits, int64_t logits_stride, int64_t vocab,
                              const I* top_ks, int64_t top_ks_stride, int64_t top_k, T* out,
                              int64_t out_stride) {
  static_assert(kTile % kThreads == 0, "whole steps");
  const ::sycl::nd_item<1> item = this_nd_item();
  const int64_t r = static_cast<int64_t>(item.get_group(0));
  const int tid = static_cast<int>(item.get_local_id(0));
  const T* row = logits + r * logits_stride;
  T* out_row = out + r * out_stride;
  const int64_t k = top_ks != nullptr ? static_cast<int64_t>(top_ks[r * top_ks_stride]) : top_k;
  if (k < 1 || k >= vocab) {  // uniform over the work-group
    if (out_row != row) {
      for_each_in_row<kTile, kThreads>(tid, vocab, [&](int64_t i) { out_row[i] = row[i]; });
    }
    return;
  }
  const auto count_at_or_above = [&](uint32_t key) {
    int32_t local = 0;
    for_each_in_row<kTile, kThreads>(tid, vocab,
                                     [&](int64_t i) { local += order_key(row[i]) >= key ? 1 : 0; });
    return ::sycl::reduce_over_group(item.get_group(), local, ::sycl::plus<int32_t>());
  };
  // The largest key with at least k keys at or above it: the k-th largest. Once
  // exactly k are at or above a candidate, no key lies between it and the k-th
  // largest, so both keep the same elements: done early. The k-th largest, the least
  // of those k, is then a NaN only if all k are: one more count says.
  uint32_t threshold = 0;
  bool keep_all = false;  // the k-th largest is a NaN
  for (int bit = OrderKey<T>::kBits - 1; bit >= 0; --bit) {
    const uint32_t candidate = threshold | (1u << bit);
    const int32_t count = count_at_or_above(candidate);
    if (count >= k) threshold = candidate;
    if (count == k) {  // uniform over the work-group
      keep_all = count_at_or_above(kKeyMax<T>) == k;
      break;
    }
  }
  keep_all = keep_all || threshold == kKeyMax<T>;
  const T masked = from_float<T>(-std::numeric_limits<float>::infinity());
  for_each_in_row<kTile, kThreads>(tid, vocab, [&](int64_t i) {
    const T x = row[i];
    out_row[i] = keep_all || order_key(x) >= threshold ? x : masked;
  });
}

}  // namespace sycl_kernels
