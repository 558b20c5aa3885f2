// kernels/diffusion/timestep_embedding.hpp: sinusoidal timestep embedding (diffusers'
// get_timestep_embedding), one work-group per timestep, float32 in and out.
//
// freq[i] = exp(-ln(max_period) * i / (half - downscale_freq_shift)), half = kDim / 2;
// arg = scale * (t * freq[i]); the row is [sin(arg), cos(arg)] ([cos, sin] when
// flipped), and an odd kDim ends with one zero.
#pragma once

#include "../common/dtype.hpp"
#include "../common/loop.hpp"

namespace sycl_kernels {

template <int kDim, int kThreads>
inline void timestep_embedding(const float* timesteps, float* out, int32_t flip_sin_to_cos,
                               float downscale_freq_shift, float scale, float max_period) {
  constexpr int kHalf = kDim / 2;
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  const int tid = static_cast<int>(item.get_local_id(0));
  const float t = timesteps[row];
  float* out_row = out + row * kDim;
  const float log_max_period = ::sycl::log(max_period);
  const float denominator = static_cast<float>(kHalf) - downscale_freq_shift;
  for_each_strided<kHalf, kThreads>(tid, [&](int i) {
    const float freq = ::sycl::exp(-log_max_period * static_cast<float>(i) / denominator);
    const float arg = scale * (t * freq);
    const float s = ::sycl::sin(arg);
    const float c = ::sycl::cos(arg);
    out_row[i] = flip_sin_to_cos ? c : s;
    out_row[kHalf + i] = flip_sin_to_cos ? s : c;
  });
  if (kDim % 2 == 1 && tid == 0) out_row[kDim - 1] = 0.0f;
}

}  // namespace sycl_kernels
