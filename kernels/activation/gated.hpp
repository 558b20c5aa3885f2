// kernels/activation/gated.hpp: gated activations, out = act(gate) * up, one work-group per row.
#pragma once

#include "../common/dtype.hpp"
#include "../common/loop.hpp"
#include "../common/rows.hpp"
#include "../common/vec.hpp"

namespace sycl_kernels {

// silu .. gelu_quick activate one value; fatrelu and swigluoai are gated only
// (gate_and_mul), with runtime parameters.
enum class Activation : int {
  silu = 0,
  gelu = 1,
  gelu_tanh = 2,
  gelu_quick = 3,
  fatrelu = 4,
  swigluoai = 5,
};

// Where a row's gate and up values are: in two rows (two tensors, or the halves of
// x's rows), interleaved in one (gate x[2i], up x[2i + 1], gpt-oss's swigluoai), or
// gate alone, out = act(gate) (kernels/activation/elementwise.hpp).
enum class Operands : int { separate = 0, interleaved = 1, gate_only = 2 };

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
// 1 / (1 + exp(-2z)) keep full relative accuracy. gelu_quick is x * sigmoid(1.702 x).
template <Activation kAct>
inline float activate(float x) {
  if constexpr (kAct == Activation::silu) {
    return x / (1.0f + ::sycl::exp(-x));
  } else if constexpr (kAct == Activation::gelu) {
    const float tail = 0.5f * erfc_nonnegative(::sycl::fabs(x) * 0.70710678118654752f);
    return x * (x < 0.0f ? tail : 1.0f - tail);
  } else if constexpr (kAct == Activation::gelu_tanh) {
    constexpr float kSqrt2OverPi = 0.79788456080286536f;
    return x / (1.0f + ::sycl::exp(-2.0f * kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  } else {
    static_assert(kAct == Activation::gelu_quick, "fatrelu and swigluoai are gated only");
    return x / (1.0f + ::sycl::exp(-1.702f * x));
  }
}

// act(gate) * up. fatrelu: (gate if gate > threshold (param0) else 0) * up.
// swigluoai (param0 alpha, param1 limit), as vLLM's kernel: gate clamped to at most
// limit, up to [-limit, limit], then (up + 1) * gate * sigmoid(alpha * gate). The
// comparisons are vLLM's: a NaN gate is 0 to fatrelu, and NaN passes the clamps.
template <Activation kAct>
inline float gate_and_mul(float gate, float up, float param0, float param1) {
  if constexpr (kAct == Activation::fatrelu) {
    return (gate > param0 ? gate : 0.0f) * up;
  } else if constexpr (kAct == Activation::swigluoai) {
    const float limit = param1;
    const float g = gate > limit ? limit : gate;
    const float u = up > limit ? limit : (up < -limit ? -limit : up);
    return (u + 1.0f) * (g / (1.0f + ::sycl::exp(-g * param0)));
  } else {
    return activate<kAct>(gate) * up;
  }
}

// One work-group per row: out = act(gate) * up (or act(gate), kOperands gate_only).
// gate, up and out have up to three strided leading dimensions each
// (kernels/common/rows.hpp); for x = [gate, up] (or [up, gate]) gate and up are the
// two halves of x's rows; interleaved, gate is x's row and up one element past it,
// each read at every other element. kDim is out's row length. param0 and param1 are
// the runtime parameters of fatrelu and swigluoai (gate_and_mul); kernels of the
// other activations do not pass them.
template <typename T, int kDim, int kThreads, int kVec, int kAct, int kOperands = 0>
inline void act_and_mul(const T* gate, int64_t gate_outer, int64_t gate_middle, int64_t gate_inner,
                        const T* up, int64_t up_outer, int64_t up_middle, int64_t up_inner, T* out,
                        int64_t out_outer, int64_t out_middle, int64_t out_inner,
                        int64_t middle_size, int64_t inner_size, float param0 = 0.0f,
                        float param1 = 0.0f) {
  constexpr Activation act = static_cast<Activation>(kAct);
  constexpr Operands operands = static_cast<Operands>(kOperands);
  // gate (and up) elements per out element, and per vector step.
  constexpr int kStride = operands == Operands::interleaved ? 2 : 1;
  constexpr int kLoad = kStride * kVec;
  constexpr int kNumVecs = kDim / kVec;
  constexpr int kTailBegin = kNumVecs * kVec;
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  const int tid = static_cast<int>(item.get_local_id(0));
  const T* gate_row =
      gate + row_offset(row, middle_size, inner_size, {gate_outer, gate_middle, gate_inner});
  const T* up_row = up + row_offset(row, middle_size, inner_size, {up_outer, up_middle, up_inner});
  T* out_row = out + row_offset(row, middle_size, inner_size, {out_outer, out_middle, out_inner});

  auto value = [&](float g, float u) {
    if constexpr (operands == Operands::gate_only) {
      return activate<act>(g);
    } else {
      return gate_and_mul<act>(g, u, param0, param1);
    }
  };
  auto element = [&](int i) {
    const float u = operands == Operands::gate_only ? 0.0f : to_float(up_row[kStride * i]);
    out_row[i] = from_float<T>(value(to_float(gate_row[kStride * i]), u));
  };
  const bool vectorized = is_vec_aligned<kLoad>(gate_row) && is_vec_aligned<kVec>(out_row) &&
                          (operands != Operands::separate || is_vec_aligned<kVec>(up_row));
  if constexpr (kLoad == 1) {
    for_each_strided<kDim, kThreads>(tid, element);
  } else if (vectorized) {
    for_each_strided<kNumVecs, kThreads>(tid, [&](int v) {
      const Vec<T, kLoad> g = load_vec<kLoad>(gate_row + v * kLoad);
      Vec<T, kVec> o;
      if constexpr (operands == Operands::separate) {
        const Vec<T, kVec> u = load_vec<kVec>(up_row + v * kVec);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          o.v[e] = from_float<T>(value(to_float(g.v[e]), to_float(u.v[e])));
        }
      } else if constexpr (operands == Operands::interleaved) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          o.v[e] = from_float<T>(value(to_float(g.v[2 * e]), to_float(g.v[2 * e + 1])));
        }
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          o.v[e] = from_float<T>(value(to_float(g.v[e]), 0.0f));
        }
      }
      store_vec<kVec>(out_row + v * kVec, o);
    });
    for_each_strided<kDim - kTailBegin, kThreads>(tid, [&](int i) { element(kTailBegin + i); });
  } else {
    for_each_strided<kDim, kThreads>(tid, element);
  }
}

}  // namespace sycl_kernels
