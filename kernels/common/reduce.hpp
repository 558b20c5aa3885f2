// kernels/common/reduce.hpp: work-group reductions in float.
#pragma once

#include "device.hpp"

namespace sycl_kernels {

inline float group_sum(const ::sycl::nd_item<1>& item, float v) {
  return ::sycl::reduce_over_group(item.get_group(), v, ::sycl::plus<float>());
}

}  // namespace sycl_kernels
