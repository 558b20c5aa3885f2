// kernels/quant/quantize.hpp: rows quantized to fp8 or int8 as produced, one work-group per row.
//
// A row of kHidden values is produced from x itself, from rmsnorm(x) (optionally of
// x + residual, stored back into residual) or from silu(gate) * up, and quantized in
// groups of kGroup consecutive values, each group with a float32 scale s:
// - given (static): read at scales + (row / rows_per_scale) * scale_row_stride +
//   group * scale_group_stride (strides 0 for one scale a tensor);
// - dynamic: the group's absolute maximum (NaN ignored), clamped to *scale_ub when
//   given, over the type's maximum, at least scale_min; with kUe8m0 rounded up to a
//   power of two (at least 2^-126). It is written at the same place.
// Each value v becomes Quantize(v * (1 / s)), the reciprocal taken once a group in
// float32 (InverseScale: also where 1 / s overflows, a subnormal s); a scale of 0
// quantizes every finite value to 0.
//
// How a row's elements are shared among a work-group's work-items (RowWalk) is the same
// in every pass, so a work-item reads back what it wrote (fused add's residual) without
// a barrier. A static scale, or one scale a row: the row walked whole in steps of
// kThreads vectors, the row's maximum reduced across the work-group, then the row read
// again (from cache). Dynamic groups smaller than the row: each group to one sub-group
// of kLanes work-items, which holds the group's values in registers and reduces its
// maximum across the sub-group (kernels compiled for sub-groups of kLanes); the
// work-group takes kThreads / kLanes groups at a time.
//
// absmax_scale is the first of dynamic per-tensor quantization's two kernels: each
// row's scale, folded into scale[0] with an atomic maximum (scales are positive, so
// their bits order as unsigned integers); the second is quantize with that scale.
#pragma once

#include <sycl/atomic_ref.hpp>

#include "../activation/gated.hpp"
#include "../common/dtype.hpp"
#include "../common/loop.hpp"
#include "../common/reduce.hpp"
#include "../common/rows.hpp"
#include "../common/vec.hpp"
#include "../norm/rmsnorm.hpp"
#include "convert.hpp"

namespace sycl_kernels {

// kVec values of a row from element `first`, with one vector load where aligned.
template <int kVec, typename T>
inline void load_values(const T* row, int first, bool vectorized, float (&v)[kVec]) {
  if (kVec > 1 && vectorized) {
    const Vec<T, kVec> xv = load_vec<kVec>(row + first);
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] = to_float(xv.v[e]);
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] = to_float(row[first + e]);
  }
}

// The values of a row of x. kKnowsRowMax: whether row_max, the absolute maximum of the
// row's values, is known before quantize_row (one pass fewer for a scale a row).
template <typename T>
struct RowValues {
  static constexpr bool kKnowsRowMax = false;
  const T* row;

  template <int kVec>
  bool aligned() const {
    return is_vec_aligned<kVec>(row);
  }

  template <int kVec>
  void load(int first, bool vectorized, float (&v)[kVec]) const {
    load_values<kVec>(row, first, vectorized, v);
  }
};

// rmsnorm's values of a row, (row * weight) * inv_rms in float32 (not rounded to T):
// multiplied by inv_rms last, the row's absolute maximum is inv_rms times that of
// row * weight, exactly (rounding is monotonic), which the sum of squares' pass takes.
template <typename T, typename W>
struct NormValues {
  static constexpr bool kKnowsRowMax = true;
  const T* row;
  const W* weight;
  float inv_rms;
  bool weight_aligned;
  float row_max;

  template <int kVec>
  bool aligned() const {
    return is_vec_aligned<kVec>(row);
  }

  template <int kVec>
  void load(int first, bool vectorized, float (&v)[kVec]) const {
    load_values<kVec>(row, first, vectorized, v);
    float scales[kVec];
    norm_scales<kVec, false>(weight, first, vectorized && weight_aligned, scales);
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] = v[e] * scales[e] * inv_rms;
  }
};

// silu(gate) * up: with kRounded as torch computes it in T (silu rounded to T, then
// the product rounded to T), otherwise in float32 and not rounded.
template <typename T, bool kRounded>
struct SiluMulValues {
  static constexpr bool kKnowsRowMax = false;
  const T* gate;
  const T* up;

  template <int kVec>
  bool aligned() const {
    return is_vec_aligned<kVec>(gate) && is_vec_aligned<kVec>(up);
  }

  template <int kVec>
  void load(int first, bool vectorized, float (&v)[kVec]) const {
    float u[kVec];
    load_values<kVec>(gate, first, vectorized, v);
    load_values<kVec>(up, first, vectorized, u);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float silu = activate<Activation::silu>(v[e]);
      v[e] = kRounded ? to_float(from_float<T>(to_float(from_float<T>(silu)) * u[e])) : silu * u[e];
    }
  }
};

// 2^-126, the smallest normal float.
inline constexpr float kSmallestNormal = 1.17549435e-38f;

// The smallest power of two at or above s (at least 2^-126): the scale of an e8m0
// exponent, exact with integer arithmetic (log2 and exp2 round).
inline float round_up_to_power_of_two(float s) {
  const uint32_t bits = ::sycl::bit_cast<uint32_t>(::sycl::fmax(s, kSmallestNormal));
  const uint32_t exponent = bits & 0x7f800000u;
  return ::sycl::bit_cast<float>((bits & 0x007fffffu) != 0 ? exponent + 0x00800000u : exponent);
}

// The dynamic scale of values whose absolute maximum is amax.
template <typename Q, bool kUe8m0>
inline float dynamic_scale(float amax, const float* scale_ub, float scale_min) {
  if (scale_ub != nullptr) amax = ::sycl::fmin(amax, *scale_ub);
  const float scale = ::sycl::fmax(amax / QuantRange<Q>::kMax, scale_min);
  return kUe8m0 ? round_up_to_power_of_two(scale) : scale;
}

// v * (1 / s), the reciprocal taken once. Below 2^-128 1 / s overflows, and v * inf
// would make NaN of 0 and infinity of values v / s keeps finite: for a subnormal s, v
// and s are both scaled by 2^32 first (exactly), which keeps the reciprocal finite and
// gives the same products wherever 1 / s is finite.
struct InverseScale {
  float pre, inverse;

  explicit InverseScale(float s) {
    const bool subnormal = s != 0.0f && ::sycl::fabs(s) < kSmallestNormal;
    pre = subnormal ? 4294967296.0f : 1.0f;
    inverse = s == 0.0f ? 0.0f : 1.0f / (s * pre);
  }

  float operator()(float v) const { return v * pre * inverse; }
};

// A group's work-items: one sub-group (module comment).
inline constexpr int kLanes = 16;

// Whether groups of kGroup are each given to a sub-group: groups smaller than the row
// that split evenly over its lanes (dynamic ones always do: specs/quant.py).
template <int kHidden, int kGroup, int kVec>
inline constexpr bool kGroupedWalk = kGroup < kHidden && kGroup % (kLanes * kVec) == 0;

// The elements of a row each work-item handles, kVec at a time (module comment).
template <int kHidden, int kGroup, int kThreads, int kVec, bool kGrouped>
struct RowWalk {
  static constexpr int kGroups = kHidden / kGroup;
  static constexpr int kGroupsAtOnce = kThreads / kLanes;
  static constexpr int kPasses = (kGroups + kGroupsAtOnce - 1) / kGroupsAtOnce;
  static constexpr int kVecsPerLane = kGroup / (kLanes * kVec);
  static_assert(!kGrouped || (kThreads % kLanes == 0 && kGroup % (kLanes * kVec) == 0),
                "a group is whole vectors of every lane of a sub-group");

  // The group a sub-group takes in pass p (kGroups or more: none); the sub-group's
  // numbers from its own queries, which the CPU device's vectorizer knows to be uniform
  // (the group) and consecutive (the lane): from the work-item's id, loads became gathers.
  static int group(int sub_group, int p) { return p * kGroupsAtOnce + sub_group; }

  // Element `first` of the k-th vector a lane takes of group g.
  static int first(int lane, int g, int k) { return g * kGroup + (lane + kLanes * k) * kVec; }

  // f(first) for each vector of the row the calling work-item takes.
  template <typename F>
  static void each(const ::sycl::nd_item<1>& item, F&& f) {
    if constexpr (kGrouped) {
      const auto sub_group = item.get_sub_group();
      const int lane = static_cast<int>(sub_group.get_local_linear_id());
#pragma unroll
      for (int p = 0; p < kPasses; ++p) {
        const int g = group(static_cast<int>(sub_group.get_group_linear_id()), p);
        if (g >= kGroups) break;
#pragma unroll
        for (int k = 0; k < kVecsPerLane; ++k) f(first(lane, g, k));
      }
    } else {
      const int tid = static_cast<int>(item.get_local_id(0));
      for_each_strided<kHidden / kVec, kThreads>(tid, [&](int j) { f(j * kVec); });
    }
  }
};

// Stores Quantize(inverse(v)) of kVec values at out_row + first.
template <typename Q, bool kTruncate, int kVec>
inline void store_quantized(Q* out_row, int first, bool vectorized, const float (&v)[kVec],
                            const InverseScale& inverse) {
  Vec<Q, kVec> q;
#pragma unroll
  for (int e = 0; e < kVec; ++e) q.v[e] = Quantize<Q, kTruncate>::from(inverse(v[e]));
  if (kVec > 1 && vectorized) {
    store_vec<kVec>(out_row + first, q);
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) out_row[first + e] = q.v[e];
  }
}

// Where a row's scales are: the row's, or with static scales shared by rows_per_scale
// rows, its block's.
struct ScaleLayout {
  float* scales;
  int64_t rows_per_scale, row_stride, group_stride;
  const float* ub;
  float min;

  float* of_row(int64_t row) const { return scales + (row / rows_per_scale) * row_stride; }
};

// Quantizes one row of `values` into out_row (module comment).
template <typename Q, int kHidden, int kGroup, int kThreads, int kVec, bool kDynamic, bool kUe8m0,
          bool kTruncate, typename Values>
inline void quantize_row(const ::sycl::nd_item<1>& item, const Values& values, Q* out_row,
                         float* scale_row, const ScaleLayout& layout) {
  static_assert(kHidden % kGroup == 0 && kGroup % kVec == 0, "groups of whole vectors");
  const int tid = static_cast<int>(item.get_local_id(0));
  // Uniform across the work-group, so every work-item reaches the same reductions.
  const bool vectorized = values.template aligned<kVec>() && is_vec_aligned<kVec>(out_row);
  static_assert(!kDynamic || kGroup == kHidden || kGroupedWalk<kHidden, kGroup, kVec>,
                "dynamic groups split evenly over a sub-group's lanes");
  if constexpr (kGroupedWalk<kHidden, kGroup, kVec>) {
    using Walk = RowWalk<kHidden, kGroup, kThreads, kVec, true>;
    const auto sub_group = item.get_sub_group();
    const int lane = static_cast<int>(sub_group.get_local_linear_id());
#pragma unroll
    for (int p = 0; p < Walk::kPasses; ++p) {
      const int g = Walk::group(static_cast<int>(sub_group.get_group_linear_id()), p);
      if (g >= Walk::kGroups) break;  // the same for the whole sub-group
      float v[Walk::kVecsPerLane][kVec];
      float amax = 0.0f;
#pragma unroll
      for (int k = 0; k < Walk::kVecsPerLane; ++k) {
        values.template load<kVec>(Walk::first(lane, g, k), vectorized, v[k]);
#pragma unroll
        for (int e = 0; e < kVec; ++e) amax = ::sycl::fmax(amax, ::sycl::fabs(v[k][e]));
      }
      float scale;
      if constexpr (kDynamic) {
#pragma unroll
        for (int mask = kLanes / 2; mask > 0; mask /= 2) {
          amax = ::sycl::fmax(amax, ::sycl::permute_group_by_xor(sub_group, amax, mask));
        }
        scale = dynamic_scale<Q, kUe8m0>(amax, layout.ub, layout.min);
        if (lane == 0) scale_row[g * layout.group_stride] = scale;
      } else {
        scale = scale_row[g * layout.group_stride];
      }
      const InverseScale inverse(scale);
#pragma unroll
      for (int k = 0; k < Walk::kVecsPerLane; ++k) {
        store_quantized<Q, kTruncate, kVec>(out_row, Walk::first(lane, g, k), vectorized, v[k],
                                            inverse);
      }
    }
  } else {
    float scale;
    if constexpr (kDynamic) {
      float amax = 0.0f;
      if constexpr (Values::kKnowsRowMax) {
        amax = values.row_max;
      } else {
        for_each_strided<kHidden / kVec, kThreads>(tid, [&](int j) {
          float v[kVec];
          values.template load<kVec>(j * kVec, vectorized, v);
#pragma unroll
          for (int e = 0; e < kVec; ++e) amax = ::sycl::fmax(amax, ::sycl::fabs(v[e]));
        });
        amax = group_max<kThreads>(item, amax);
      }
      scale = dynamic_scale<Q, kUe8m0>(amax, layout.ub, layout.min);
      if (tid == 0) scale_row[0] = scale;
    } else {
      scale = scale_row[0];
    }
    const InverseScale inverse(scale);
    for_each_strided<kHidden / kVec, kThreads>(tid, [&](int j) {
      const int first = j * kVec;
      float v[kVec];
      values.template load<kVec>(first, vectorized, v);
      // Static groups smaller than the row that do not split over the lanes (a scale
      // per column, say): each vector lies in one.
      const InverseScale group_inverse =
          kGroup == kHidden ? inverse
                            : InverseScale(scale_row[(first / kGroup) * layout.group_stride]);
      store_quantized<Q, kTruncate, kVec>(out_row, first, vectorized, v, group_inverse);
    });
  }
}

// Where row `row` of a tensor with three leading strides starts.
template <typename T>
inline T* row_start(T* p, int64_t row, int64_t middle_size, int64_t inner_size, int64_t outer,
                    int64_t middle, int64_t inner) {
  return p + row_offset(row, middle_size, inner_size, {outer, middle, inner});
}

// The template parameters and kernel parameters every quantizing kernel shares.
#define SYCL_KERNELS_QUANT_PARAMS                                                   \
  Q *out, int64_t out_outer, int64_t out_middle, int64_t out_inner, float *scales,  \
      int64_t rows_per_scale, int64_t scale_row_stride, int64_t scale_group_stride, \
      const float *scale_ub, float scale_min, int64_t middle_size, int64_t inner_size

// out = quantize(x), one work-group per row.
template <typename T, typename Q, int kHidden, int kGroup, int kThreads, int kVec, bool kDynamic,
          bool kUe8m0, bool kTruncate>
inline void quantize(const T* x, int64_t x_outer, int64_t x_middle, int64_t x_inner,
                     SYCL_KERNELS_QUANT_PARAMS) {
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  const ScaleLayout layout{scales,   rows_per_scale, scale_row_stride, scale_group_stride,
                           scale_ub, scale_min};
  quantize_row<Q, kHidden, kGroup, kThreads, kVec, kDynamic, kUe8m0, kTruncate>(
      item, RowValues<T>{row_start(x, row, middle_size, inner_size, x_outer, x_middle, x_inner)},
      row_start(out, row, middle_size, inner_size, out_outer, out_middle, out_inner),
      layout.of_row(row), layout);
}

// out = quantize(rmsnorm(x)), or with kFusedAdd residual = x + residual (rounded to T)
// and out = quantize(rmsnorm(residual)); one work-group per row.
template <typename T, typename W, typename Q, int kHidden, int kGroup, int kThreads, int kVec,
          bool kDynamic, bool kUe8m0, bool kTruncate, bool kFusedAdd>
inline void rmsnorm_quantize(const T* x, int64_t x_outer, int64_t x_middle, int64_t x_inner,
                             T* residual, int64_t residual_outer, int64_t residual_middle,
                             int64_t residual_inner, const W* weight, float eps,
                             SYCL_KERNELS_QUANT_PARAMS) {
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  const T* x_row = row_start(x, row, middle_size, inner_size, x_outer, x_middle, x_inner);
  T* residual_row = kFusedAdd ? row_start(residual, row, middle_size, inner_size, residual_outer,
                                          residual_middle, residual_inner)
                              : nullptr;
  const bool vectorized =
      is_vec_aligned<kVec>(x_row) && (!kFusedAdd || is_vec_aligned<kVec>(residual_row));
  // Pass 1: the sum of squares (of the sum, stored into residual, when fused), over the
  // elements quantize_row gives this work-item; with one dynamic scale a row, also the
  // absolute maximum of the values times the weight (NormValues).
  constexpr bool kRowMax = kDynamic && kGroup == kHidden;
  const bool weight_aligned = is_weight_aligned<kVec>(weight);
  float sum_sq = 0.0f;
  float weighted_max = 0.0f;
  using Walk = RowWalk<kHidden, kGroup, kThreads, kVec, kGroupedWalk<kHidden, kGroup, kVec>>;
  Walk::each(item, [&](int first) {
    float v[kVec];
    load_values<kVec>(x_row, first, vectorized, v);
    if constexpr (kFusedAdd) {
      float r[kVec];
      load_values<kVec>(residual_row, first, vectorized, r);
      Vec<T, kVec> sum;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        sum.v[e] = from_float<T>(v[e] + r[e]);
        v[e] = to_float(sum.v[e]);
      }
      if (kVec > 1 && vectorized) {
        store_vec<kVec>(residual_row + first, sum);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) residual_row[first + e] = sum.v[e];
      }
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e) sum_sq += v[e] * v[e];
    if constexpr (kRowMax) {
      float scales[kVec];
      norm_scales<kVec, false>(weight, first, vectorized && weight_aligned, scales);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        weighted_max = ::sycl::fmax(weighted_max, ::sycl::fabs(v[e] * scales[e]));
      }
    }
  });
  const float inv_rms = inverse_rms<kHidden, kThreads>(item, sum_sq, eps);
  const float row_max = kRowMax ? group_max<kThreads>(item, weighted_max) * inv_rms : 0.0f;
  const NormValues<T, W> values{kFusedAdd ? residual_row : x_row, weight, inv_rms, weight_aligned,
                                row_max};
  const ScaleLayout layout{scales,   rows_per_scale, scale_row_stride, scale_group_stride,
                           scale_ub, scale_min};
  quantize_row<Q, kHidden, kGroup, kThreads, kVec, kDynamic, kUe8m0, kTruncate>(
      item, values, row_start(out, row, middle_size, inner_size, out_outer, out_middle, out_inner),
      layout.of_row(row), layout);
}

// out = quantize(silu(gate) * up), one work-group per row of kHidden outputs; gate and
// up are rows of their own strides (the halves of x's rows for silu_and_mul).
template <typename T, typename Q, int kHidden, int kGroup, int kThreads, int kVec, bool kDynamic,
          bool kUe8m0, bool kTruncate, bool kRounded>
inline void silu_and_mul_quantize(const T* gate, int64_t gate_outer, int64_t gate_middle,
                                  int64_t gate_inner, const T* up, int64_t up_outer,
                                  int64_t up_middle, int64_t up_inner, SYCL_KERNELS_QUANT_PARAMS) {
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  const SiluMulValues<T, kRounded> values{
      row_start(gate, row, middle_size, inner_size, gate_outer, gate_middle, gate_inner),
      row_start(up, row, middle_size, inner_size, up_outer, up_middle, up_inner)};
  const ScaleLayout layout{scales,   rows_per_scale, scale_row_stride, scale_group_stride,
                           scale_ub, scale_min};
  quantize_row<Q, kHidden, kGroup, kThreads, kVec, kDynamic, kUe8m0, kTruncate>(
      item, values, row_start(out, row, middle_size, inner_size, out_outer, out_middle, out_inner),
      layout.of_row(row), layout);
}

#undef SYCL_KERNELS_QUANT_PARAMS

// scales[0] = max(scales[0], the dynamic scale of row r's values), one work-group per
// row; scales[0] starts at 0.
template <typename T, typename Q, int kHidden, int kThreads, int kVec>
inline void absmax_scale(const T* x, int64_t x_outer, int64_t x_middle, int64_t x_inner,
                         float* scales, const float* scale_ub, float scale_min, int64_t middle_size,
                         int64_t inner_size) {
  const auto item = this_nd_item();
  const int tid = static_cast<int>(item.get_local_id(0));
  const T* x_row =
      row_start(x, item.get_group(0), middle_size, inner_size, x_outer, x_middle, x_inner);
  const bool vectorized = is_vec_aligned<kVec>(x_row);
  float amax = 0.0f;
  for_each_strided<kHidden / kVec, kThreads>(tid, [&](int j) {
    float v[kVec];
    load_values<kVec>(x_row, j * kVec, vectorized, v);
#pragma unroll
    for (int e = 0; e < kVec; ++e) amax = ::sycl::fmax(amax, ::sycl::fabs(v[e]));
  });
  amax = group_max<kThreads>(item, amax);
  if (tid == 0) {
    ::sycl::atomic_ref<uint32_t, ::sycl::memory_order::relaxed, ::sycl::memory_scope::device,
                       ::sycl::access::address_space::global_space>
        bits(*reinterpret_cast<uint32_t*>(scales));
    bits.fetch_max(::sycl::bit_cast<uint32_t>(dynamic_scale<Q, false>(amax, scale_ub, scale_min)));
  }
}

}  // namespace sycl_kernels
