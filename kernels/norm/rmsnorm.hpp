// kernels/norm/rmsnorm.hpp: RMSNorm, one work-group of kThreads per row, hidden size fixed at compile time.
//
// out[r, i] = x[r, i] * rsqrt(mean_i(x[r, :]^2) + eps) * weight[i], accumulated in float.
#pragma once

#include "../common/dtype.hpp"
#include "../common/loop.hpp"
#include "../common/reduce.hpp"
#include "../common/vec.hpp"

namespace sycl_kernels {

template <typename T, int kHidden, int kThreads>
inline void rmsnorm(const T* x, int64_t x_row_stride, const T* weight, T* out,
                    int64_t out_row_stride, float eps) {
  constexpr int kVec = kVecWidth<T>;
  constexpr int kNumVecs = kHidden / kVec;
  constexpr int kTailBegin = kNumVecs * kVec;
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  const int tid = static_cast<int>(item.get_local_id(0));
  const T* x_row = x + row * x_row_stride;
  T* out_row = out + row * out_row_stride;

  // Uniform across the work-group, so the branches below never diverge.
  const bool vectorized = is_vec_aligned(x_row) && is_vec_aligned(weight) &&
                          is_vec_aligned(out_row);

  float sum_sq = 0.0f;
  auto square_element = [&](int i) {
    const float f = to_float(x_row[i]);
    sum_sq += f * f;
  };
  if (vectorized) {
    for_each_strided<kNumVecs, kThreads>(tid, [&](int v) {
      const Vec<T, kVec> xv = load_vec(x_row + v * kVec);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const float f = to_float(xv.v[e]);
        sum_sq += f * f;
      }
    });
    for_each_strided<kHidden - kTailBegin, kThreads>(
        tid, [&](int i) { square_element(kTailBegin + i); });
  } else {
    for_each_strided<kHidden, kThreads>(tid, square_element);
  }
  const float inv_rms =
      ::sycl::rsqrt(group_sum(item, sum_sq) / static_cast<float>(kHidden) + eps);

  auto normalize_element = [&](int i) {
    out_row[i] = from_float<T>(to_float(x_row[i]) * inv_rms * to_float(weight[i]));
  };
  if (vectorized) {
    for_each_strided<kNumVecs, kThreads>(tid, [&](int v) {
      const Vec<T, kVec> xv = load_vec(x_row + v * kVec);
      const Vec<T, kVec> wv = load_vec(weight + v * kVec);
      Vec<T, kVec> ov;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        ov.v[e] = from_float<T>(to_float(xv.v[e]) * inv_rms * to_float(wv.v[e]));
      }
      store_vec(out_row + v * kVec, ov);
    });
    for_each_strided<kHidden - kTailBegin, kThreads>(
        tid, [&](int i) { normalize_element(kTailBegin + i); });
  } else {
    for_each_strided<kHidden, kThreads>(tid, normalize_element);
  }
}

}  // namespace sycl_kernels
