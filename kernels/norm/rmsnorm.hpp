// kernels/norm/rmsnorm.hpp: RMSNorm and its fused-add and Gemma forms, one work-group per row.
//
// rmsnorm:           out = x * rsqrt(mean(x^2) + eps) * w
// fused_add_rmsnorm: residual += x; x = rmsnorm(residual)          (in place)
// kGemma scales by (1 + w) instead of w. The weight is stored as T, as float (a
// float32 weight on half activations), or absent (NoWeight: no scale). Hidden
// size, work-group size and the elements each work-item moves per access (kVec,
// specs/norm.py norm_vec_width) are compile-time constants. Sums and products are
// taken in float. Rows are located by kernels/common/rows.hpp, so leading
// dimensions may have any strides.
#pragma once

#include <type_traits>

#include "../common/dtype.hpp"
#include "../common/loop.hpp"
#include "../common/reduce.hpp"
#include "../common/rows.hpp"
#include "../common/vec.hpp"

namespace sycl_kernels {

// The weight type of weight=None: every scale is 1 (also in the Gemma form).
struct NoWeight {};

template <bool kGemma, typename W>
inline float norm_scale(const W* weight, int i) {
  if constexpr (std::is_same_v<W, NoWeight>) {
    return 1.0f;
  } else {
    const float w = to_float(weight[i]);
    return kGemma ? 1.0f + w : w;
  }
}

// The scales of elements [first, first + kVec), with one vector load where aligned.
template <int kVec, bool kGemma, typename W>
inline void norm_scales(const W* weight, int first, bool aligned, float (&scales)[kVec]) {
  if constexpr (!std::is_same_v<W, NoWeight>) {
    if (aligned) {
      const Vec<W, kVec> wv = load_vec<kVec>(weight + first);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        scales[e] = kGemma ? 1.0f + to_float(wv.v[e]) : to_float(wv.v[e]);
      }
      return;
    }
  }
#pragma unroll
  for (int e = 0; e < kVec; ++e) scales[e] = norm_scale<kGemma>(weight, first + e);
}

template <int kVec, typename W>
inline bool is_weight_aligned(const W* weight) {
  if constexpr (std::is_same_v<W, NoWeight>) {
    return true;
  } else {
    return is_vec_aligned<kVec>(weight);
  }
}

// rsqrt(mean(x^2) + eps) of a row of kHidden elements, from each work-item's part of
// the sum of squares; a synchronization point of the work-group (group_sum), which
// qknorm_rope.hpp, computing its scale here too, relies on.
template <int kHidden, int kThreads>
inline float inverse_rms(const ::sycl::nd_item<1>& item, float partial_sum_sq, float eps) {
  return ::sycl::rsqrt(group_sum<kThreads>(item, partial_sum_sq) / static_cast<float>(kHidden) +
                       eps);
}

// Normalizes one row. With a residual, x + residual is stored into the residual
// row. kRoundedSum normalizes the sum as stored (rounded to T, its sum of squares
// included); otherwise the float sum is normalized and both rows are written in
// pass 2. The two agree for float rows.
template <typename T, typename W, int kHidden, int kThreads, int kVec, bool kGemma, bool kFusedAdd,
          bool kRoundedSum = true>
inline void rmsnorm_row(const ::sycl::nd_item<1>& item, const T* x_row, T* residual_row,
                        const W* weight, T* out_row, float eps) {
  constexpr int kNumVecs = kHidden / kVec;
  constexpr int kTailBegin = kNumVecs * kVec;
  constexpr bool kStoreSumFirst = kFusedAdd && kRoundedSum;
  const int tid = static_cast<int>(item.get_local_id(0));
  // Uniform across the work-group, so the branches below never diverge. With
  // kVec == 1 there is one path only (a second copy of the barrier-crossing code
  // made the OpenCL CPU backend crash on rows that kThreads does not divide).
  const bool vectorized = is_vec_aligned<kVec>(x_row) && is_vec_aligned<kVec>(out_row) &&
                          (!kFusedAdd || is_vec_aligned<kVec>(residual_row));
  const bool weight_aligned = is_weight_aligned<kVec>(weight);

  // The value normalized at element i, from x (and the residual when fused).
  auto input = [&](T x, T r) {
    float v = to_float(x);
    if constexpr (kFusedAdd) {
      v += to_float(r);
      if constexpr (kRoundedSum) v = to_float(from_float<T>(v));
    }
    return v;
  };

  // Pass 1: the sum of squares (and the rounded sum stored back).
  float sum_sq = 0.0f;
  auto input_element = [&](int i) {
    const float v = input(x_row[i], kFusedAdd ? residual_row[i] : T{});
    if constexpr (kStoreSumFirst) residual_row[i] = from_float<T>(v);
    sum_sq += v * v;
  };
  if constexpr (kVec == 1) {
    for_each_strided<kHidden, kThreads>(tid, input_element);
  } else if (vectorized) {
    for_each_strided<kNumVecs, kThreads>(tid, [&](int v) {
      const Vec<T, kVec> xv = load_vec<kVec>(x_row + v * kVec);
      Vec<T, kVec> rv{};
      if constexpr (kFusedAdd) rv = load_vec<kVec>(residual_row + v * kVec);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float f = input(xv.v[e], rv.v[e]);
        if constexpr (kStoreSumFirst) rv.v[e] = from_float<T>(f);
        sum_sq += f * f;
      }
      if constexpr (kStoreSumFirst) store_vec<kVec>(residual_row + v * kVec, rv);
    });
    for_each_strided<kHidden - kTailBegin, kThreads>(tid,
                                                     [&](int i) { input_element(kTailBegin + i); });
  } else {
    for_each_strided<kHidden, kThreads>(tid, input_element);
  }
  const float inv_rms = inverse_rms<kHidden, kThreads>(item, sum_sq, eps);

  // Pass 2: normalize. Each work-item touches the elements it did in pass 1, so
  // reading what it stored there (or the untouched inputs) needs no barrier.
  const T* in_row = kStoreSumFirst ? residual_row : x_row;
  auto normalized = [&](T x, T r, float scale, T* sum_out) {
    float v;
    if constexpr (kStoreSumFirst || !kFusedAdd) {
      v = to_float(x);
    } else {
      v = to_float(x) + to_float(r);
      *sum_out = from_float<T>(v);
    }
    return from_float<T>(v * inv_rms * scale);
  };
  constexpr bool kSumInPass2 = kFusedAdd && !kRoundedSum;
  auto output_element = [&](int i) {
    T sum;
    const T r = kSumInPass2 ? residual_row[i] : T{};
    out_row[i] = normalized(in_row[i], r, norm_scale<kGemma>(weight, i), &sum);
    if constexpr (kSumInPass2) residual_row[i] = sum;
  };
  if constexpr (kVec == 1) {
    for_each_strided<kHidden, kThreads>(tid, output_element);
  } else if (vectorized) {
    for_each_strided<kNumVecs, kThreads>(tid, [&](int v) {
      const Vec<T, kVec> xv = load_vec<kVec>(in_row + v * kVec);
      Vec<T, kVec> rv{};
      if constexpr (kSumInPass2) rv = load_vec<kVec>(residual_row + v * kVec);
      float scales[kVec];
      norm_scales<kVec, kGemma>(weight, v * kVec, weight_aligned, scales);
      Vec<T, kVec> ov;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        ov.v[e] = normalized(xv.v[e], rv.v[e], scales[e], &rv.v[e]);
      }
      store_vec<kVec>(out_row + v * kVec, ov);
      if constexpr (kSumInPass2) store_vec<kVec>(residual_row + v * kVec, rv);
    });
    for_each_strided<kHidden - kTailBegin, kThreads>(
        tid, [&](int i) { output_element(kTailBegin + i); });
  } else {
    for_each_strided<kHidden, kThreads>(tid, output_element);
  }
}

// One work-group per row: out[r] = rmsnorm(x[r]); x and out have their own row strides.
template <typename T, typename W, int kHidden, int kThreads, int kVec, bool kGemma>
inline void rmsnorm(const T* x, int64_t x_outer, int64_t x_middle, int64_t x_inner, const W* weight,
                    T* out, int64_t out_outer, int64_t out_middle, int64_t out_inner,
                    int64_t middle_size, int64_t inner_size, float eps) {
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  rmsnorm_row<T, W, kHidden, kThreads, kVec, kGemma, false, true>(
      item, x + row_offset(row, middle_size, inner_size, {x_outer, x_middle, x_inner}), nullptr,
      weight, out + row_offset(row, middle_size, inner_size, {out_outer, out_middle, out_inner}),
      eps);
}

// One work-group per row, in place: residual[r] += x[r]; x[r] = rmsnorm(residual[r]).
template <typename T, typename W, int kHidden, int kThreads, int kVec, bool kGemma,
          bool kRoundedSum>
inline void fused_add_rmsnorm(T* x, int64_t x_outer, int64_t x_middle, int64_t x_inner, T* residual,
                              int64_t residual_outer, int64_t residual_middle,
                              int64_t residual_inner, const W* weight, int64_t middle_size,
                              int64_t inner_size, float eps) {
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  T* x_row = x + row_offset(row, middle_size, inner_size, {x_outer, x_middle, x_inner});
  T* residual_row = residual + row_offset(row, middle_size, inner_size,
                                          {residual_outer, residual_middle, residual_inner});
  rmsnorm_row<T, W, kHidden, kThreads, kVec, kGemma, true, kRoundedSum>(item, x_row, residual_row,
                                                                        weight, x_row, eps);
}

}  // namespace sycl_kernels
