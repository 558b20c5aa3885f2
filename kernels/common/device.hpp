// kernels/common/device.hpp: the SYCL headers device code needs, and nothing more.
//
// Including only these (not <sycl/sycl.hpp>) roughly halves the runtime
// compiler's start-up cost per translation unit.
#pragma once

#include <cstdint>

#include <sycl/builtins.hpp>
#include <sycl/ext/oneapi/experimental/free_function_traits.hpp>
#include <sycl/ext/oneapi/free_function_queries.hpp>
#include <sycl/ext/oneapi/kernel_properties/properties.hpp>
#include <sycl/group_algorithm.hpp>
#include <sycl/half_type.hpp>

namespace sycl_kernels {

namespace syclext = ::sycl::ext::oneapi;
namespace syclexp = ::sycl::ext::oneapi::experimental;

inline ::sycl::nd_item<1> this_nd_item() { return syclext::this_work_item::get_nd_item<1>(); }

}  // namespace sycl_kernels
