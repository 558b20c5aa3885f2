// kernels/common/rows.hpp: where row r starts, in a tensor of up to three strided leading dims.
//
// The host merges a tensor's leading dimensions where their strides allow, so a
// contiguous [..., width] tensor has one and a transposed [B, H, S, D] view
// three; the rows are numbered in the tensor's logical order. Sizes of the outer
// dimension are implied by the launch (one work-group per row).
#pragma once

#include <cstdint>

namespace sycl_kernels {

struct RowStrides {
  int64_t outer, middle, inner;
};

// Row `row` of leading dimensions [*, middle_size, inner_size] with the given strides.
inline int64_t row_offset(int64_t row, int64_t middle_size, int64_t inner_size,
                          RowStrides strides) {
  const int64_t inner = row % inner_size;
  const int64_t rest = row / inner_size;
  return (rest / middle_size) * strides.outer + (rest % middle_size) * strides.middle +
         inner * strides.inner;
}

}  // namespace sycl_kernels
