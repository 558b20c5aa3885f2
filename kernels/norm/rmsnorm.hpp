// kernels/norm/rmsnorm.hpp: RMSNorm and its fused-add and Gemma forms, one work-group per row.
//
// rmsnorm:           out = x * rsqrt(mean(x^2) + eps) * w
// fused_add_rmsnorm: residual += x; x = rmsnorm(residual)          (in place)
// kGemma scales by (1 + w) instead of w. Hidden size, work-group size and the
// elements each work-item moves per access (kVec) are compile-time constants;
// sums and products are taken in float.
#pragma once

#include "../common/dtype.hpp"
#include "../common/loop.hpp"
#include "../common/reduce.hpp"
#include "../common/vec.hpp"

namespace sycl_kernels {

template <bool kGemma>
inline float norm_weight(float w) {
  return kGemma ? 1.0f + w : w;
}

// Normalizes one row. With a residual, x + residual is stored into the residual
// row first (rounded to T) and the row normalized is that stored sum.
template <typename T, int kHidden, int kThreads, int kVec, bool kGemma, bool kFusedAdd>
inline void rmsnorm_row(const ::sycl::nd_item<1>& item, const T* x_row, T* residual_row,
                        const T* weight, T* out_row, float eps) {
  constexpr int kNumVecs = kHidden / kVec;
  constexpr int kTailBegin = kNumVecs * kVec;
  const int tid = static_cast<int>(item.get_local_id(0));
  // Uniform across the work-group, so the branches below never diverge. With
  // kVec == 1 there is one path only (a second copy of the barrier-crossing code
  // made the OpenCL CPU backend crash on rows that kThreads does not divide).
  const bool vectorized =
      is_vec_aligned<kVec>(x_row) && is_vec_aligned<kVec>(weight) &&
      is_vec_aligned<kVec>(out_row) && (!kFusedAdd || is_vec_aligned<kVec>(residual_row));

  // Pass 1: the input (x, or x + residual stored back) and its sum of squares.
  float sum_sq = 0.0f;
  auto input_element = [&](int i) {
    float v = to_float(x_row[i]);
    if constexpr (kFusedAdd) {
      v += to_float(residual_row[i]);
      residual_row[i] = from_float<T>(v);
    }
    sum_sq += v * v;
  };
  if constexpr (kVec == 1) {
    for_each_strided<kHidden, kThreads>(tid, input_element);
  } else if (vectorized) {
    for_each_strided<kNumVecs, kThreads>(tid, [&](int v) {
      const Vec<T, kVec> xv = load_vec<kVec>(x_row + v * kVec);
      Vec<T, kVec> rv;
      if constexpr (kFusedAdd) rv = load_vec<kVec>(residual_row + v * kVec);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        float f = to_float(xv.v[e]);
        if constexpr (kFusedAdd) {
          f += to_float(rv.v[e]);
          rv.v[e] = from_float<T>(f);
        }
        sum_sq += f * f;
      }
      if constexpr (kFusedAdd) store_vec<kVec>(residual_row + v * kVec, rv);
    });
    for_each_strided<kHidden - kTailBegin, kThreads>(
        tid, [&](int i) { input_element(kTailBegin + i); });
  } else {
    for_each_strided<kHidden, kThreads>(tid, input_element);
  }
  const float inv_rms =
      ::sycl::rsqrt(group_sum(item, sum_sq) / static_cast<float>(kHidden) + eps);

  // Pass 2: normalize what pass 1 stored (the residual row when fused).
  const T* in_row = kFusedAdd ? residual_row : x_row;
  auto output_element = [&](int i) {
    out_row[i] = from_float<T>(to_float(in_row[i]) * inv_rms *
                               norm_weight<kGemma>(to_float(weight[i])));
  };
  if constexpr (kVec == 1) {
    for_each_strided<kHidden, kThreads>(tid, output_element);
  } else if (vectorized) {
    for_each_strided<kNumVecs, kThreads>(tid, [&](int v) {
      const Vec<T, kVec> xv = load_vec<kVec>(in_row + v * kVec);
      const Vec<T, kVec> wv = load_vec<kVec>(weight + v * kVec);
      Vec<T, kVec> ov;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        ov.v[e] = from_float<T>(to_float(xv.v[e]) * inv_rms *
                                norm_weight<kGemma>(to_float(wv.v[e])));
      }
      store_vec<kVec>(out_row + v * kVec, ov);
    });
    for_each_strided<kHidden - kTailBegin, kThreads>(
        tid, [&](int i) { output_element(kTailBegin + i); });
  } else {
    for_each_strided<kHidden, kThreads>(tid, output_element);
  }
}

// One work-group per row: out[r] = rmsnorm(x[r]).
template <typename T, int kHidden, int kThreads, int kVec, bool kGemma>
inline void rmsnorm(const T* x, int64_t x_row_stride, const T* weight, T* out,
                    int64_t out_row_stride, float eps) {
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  rmsnorm_row<T, kHidden, kThreads, kVec, kGemma, false>(item, x + row * x_row_stride, nullptr,
                                                   weight, out + row * out_row_stride, eps);
}

// One work-group per row, in place: residual[r] += x[r]; x[r] = rmsnorm(residual[r]).
template <typename T, int kHidden, int kThreads, int kVec, bool kGemma>
inline void fused_add_rmsnorm(T* x, int64_t x_row_stride, T* residual,
                              int64_t residual_row_stride, const T* weight, float eps) {
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  T* x_row = x + row * x_row_stride;
  rmsnorm_row<T, kHidden, kThreads, kVec, kGemma, true>(
      item, x_row, residual + row * residual_row_stride, weight, x_row, eps);
}

}  // namespace sycl_kernels
