// kernels/activation/gated.hpp: gated activations, out = act(gate) * up, one work-group per row.
#pragma once

#include "../common/dtype.hpp"
#include "../common/loop.hpp"
#include "../common/rows.hpp"
#include "../common/vec.hpp"

namespace sycl_kernels {

enum class Activation : int { silu = 0, gelu = 1, gelu_tanh = 2 };

// erfc(z) for z >= 0 with a relative error below 1.2e-7 (Numerical Recipes' erfcc,
// a Chebyshev fit): one exp and a polynomial, which vectorizes on the CPU device,
// where the erfc builtin ran 1.5x slower than erf.
inline float erfc_nonnegative(float z) {
  const float t = 1.0f / (1.0f + 0.5f * z);
  const float p =
      -1.26551223f +
      t * (1.00002368f +
           t * (0.37409196f +
                t * (0.09678418f +
                     t * (-0.18628806f +
                          t * (0.27886807f +
                               t * (-1.13520398f +
                                    t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  return t * ::sycl::exp(-z * z + p);
}

// The gelus avoid 1 + erf(z) and 1 + tanh(z): for x below about -4 those cancel to
// a few float ulps of 1, losing every digit of the small result. The Gaussian tail
// 0.5 * erfc(|x| / sqrt(2)) and the logistic form 0.5 * (1 + tanh(z)) =
// 1 / (1 + exp(-2z)) keep full relative accuracy.
template <Activation kAct>
inline float activate(float x) {
  if constexpr (kAct == Activation::silu) {
    return x / (1.0f + ::sycl::exp(-x));
  } else if constexpr (kAct == Activation::gelu) {
    const float tail = 0.5f * erfc_nonnegative(::sycl::fabs(x) * 0.70710678118654752f);
    return x * (x < 0.0f ? tail : 1.0f - tail);
  } else {
    constexpr float kSqrt2OverPi = 0.79788456080286536f;
    return x / (1.0f + ::sycl::exp(-2.0f * kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  }
}

// One work-group per row: out = act(gate) * up. gate, up and out have up to three
// strided leading dimensions each (kernels/common/rows.hpp); for x = [gate, up]
// (or [up, gate]) gate and up are the two halves of x's rows.
template <typename T, int kDim, int kThreads, int kVec, int kAct>
inline void act_and_mul(const T* gate, int64_t gate_outer, int64_t gate_middle,
                        int64_t gate_inner, const T* up, int64_t up_outer, int64_t up_middle,
                        int64_t up_inner, T* out, int64_t out_outer, int64_t out_middle,
                        int64_t out_inner, int64_t middle_size, int64_t inner_size) {
  constexpr Activation act = static_cast<Activation>(kAct);
  constexpr int kNumVecs = kDim / kVec;
  constexpr int kTailBegin = kNumVecs * kVec;
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  const int tid = static_cast<int>(item.get_local_id(0));
  const T* gate_row =
      gate + row_offset(row, middle_size, inner_size, {gate_outer, gate_middle, gate_inner});
  const T* up_row = up + row_offset(row, middle_size, inner_size, {up_outer, up_middle, up_inner});
  T* out_row = out + row_offset(row, middle_size, inner_size, {out_outer, out_middle, out_inner});

  auto element = [&](int i) {
    out_row[i] = from_float<T>(activate<act>(to_float(gate_row[i])) * to_float(up_row[i]));
  };
  const bool vectorized = is_vec_aligned<kVec>(gate_row) && is_vec_aligned<kVec>(up_row) &&
                          is_vec_aligned<kVec>(out_row);
  if constexpr (kVec == 1) {
    for_each_strided<kDim, kThreads>(tid, element);
  } else if (vectorized) {
    for_each_strided<kNumVecs, kThreads>(tid, [&](int v) {
      const Vec<T, kVec> g = load_vec<kVec>(gate_row + v * kVec);
      const Vec<T, kVec> u = load_vec<kVec>(up_row + v * kVec);
      Vec<T, kVec> o;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        o.v[e] = from_float<T>(activate<act>(to_float(g.v[e])) * to_float(u.v[e]));
      }
      store_vec<kVec>(out_row + v * kVec, o);
    });
    for_each_strided<kDim - kTailBegin, kThreads>(tid, [&](int i) { element(kTailBegin + i); });
  } else {
    for_each_strided<kDim, kThreads>(tid, element);
  }
}

}  // namespace sycl_kernels
