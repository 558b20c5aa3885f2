// kernels/activation/elementwise.hpp: activations, out = act(x), one work-group per row.
#pragma once

#include "gated.hpp"

namespace sycl_kernels {

// out = act(x) for the one-value activations of gated.hpp (activate): the gated
// kernel's row loop with the gate alone. x and out have up to three strided leading
// dimensions each (kernels/common/rows.hpp); kDim is the row length.
template <typename T, int kDim, int kThreads, int kVec, int kAct>
inline void act(const T* x, int64_t x_outer, int64_t x_middle, int64_t x_inner, T* out,
                int64_t out_outer, int64_t out_middle, int64_t out_inner, int64_t middle_size,
                int64_t inner_size) {
  act_and_mul<T, kDim, kThreads, kVec, kAct, static_cast<int>(Operands::gate_only)>(
      x, x_outer, x_middle, x_inner, x, x_outer, x_middle, x_inner, out, out_outer, out_middle,
      out_inner, middle_size, inner_size);
}

}  // namespace sycl_kernels
