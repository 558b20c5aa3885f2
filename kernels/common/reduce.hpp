// kernels/common/reduce.hpp: work-group reductions in float.
#pragma once

#include "device.hpp"

namespace sycl_kernels {

// The sum (the maximum) over the work-group; like every group algorithm, a
// synchronization point of the group.
inline float group_sum(const ::sycl::nd_item<1>& item, float v) {
  return ::sycl::reduce_over_group(item.get_group(), v, ::sycl::plus<float>());
}

inline float group_max(const ::sycl::nd_item<1>& item, float v) {
  return ::sycl::reduce_over_group(item.get_group(), v, ::sycl::maximum<float>());
}

// The reduction of v over the work-group by `op` (sycl::plus, sycl::maximum) for a
// kernel compiled for work-groups of kThreads work-items. A group small enough to be one
// sub-group (qknorm's 16 work-items on the CPU device) reduces across its SIMD
// lanes, without the work-group reduction's barriers: qknorm 0.87-0.99x the time at
// 16 and 4096 tokens. The check is uniform over the group; larger groups do not
// compile the sub-group path, which, compiled beside the other, made rmsnorm 6-11 %
// slower.
template <int kThreads, typename Op>
inline float group_reduce(const ::sycl::nd_item<1>& item, float v, Op op) {
  if constexpr (kThreads <= 16) {
    const auto sub_group = item.get_sub_group();
    if (sub_group.get_group_linear_range() == 1) {
      return ::sycl::reduce_over_group(sub_group, v, op);
    }
  }
  return ::sycl::reduce_over_group(item.get_group(), v, op);
}

template <int kThreads>
inline float group_sum(const ::sycl::nd_item<1>& item, float v) {
  return group_reduce<kThreads>(item, v, ::sycl::plus<float>());
}

template <int kThreads>
inline float group_max(const ::sycl::nd_item<1>& item, float v) {
  return group_reduce<kThreads>(item, v, ::sycl::maximum<float>());
}

}  // namespace sycl_kernels
