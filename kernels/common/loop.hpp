// kernels/common/loop.hpp: a work-group's strided loop with a trip count known at compile time.
#pragma once

namespace sycl_kernels {

// Calls f(i) for i = tid, tid + kThreads, ... below kCount. With both bounds
// constant the loop fully unrolls, which the CPU device's vectorizer needs to
// reach memory bandwidth (a runtime-bounded loop ran 2-3x slower there).
//
// Every step carries its own guard when kThreads does not divide kCount:
// guarding only the last step made the OpenCL CPU backend crash while building
// the kernel (seen with 4000 elements over 256 work-items).
template <int kCount, int kThreads, typename F>
inline void for_each_strided(int tid, F&& f) {
  constexpr int kIters = (kCount + kThreads - 1) / kThreads;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = it * kThreads + tid;
    if (kCount % kThreads == 0 || i < kCount) f(i);
  }
}

}  // namespace sycl_kernels
