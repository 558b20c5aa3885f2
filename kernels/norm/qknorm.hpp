// kernels/norm/qknorm.hpp: per-head RMSNorm of q and k in place, one work-group per head.
//
// q and k are [..., kHeadDim] with up to three strided leading dimensions each
// (kernels/common/rows.hpp): heads of a fused qkv tensor, a padded head layout or
// a transposed [B, H, S, D] view. Work-groups [0, q_rows) take q's heads, the
// rest k's, so one launch normalizes both.
#pragma once

#include "rmsnorm.hpp"

namespace sycl_kernels {

template <typename T, typename W, int kHeadDim, int kThreads, int kVec, bool kGemma>
inline void qknorm(T* q, int64_t q_outer, int64_t q_middle, int64_t q_inner,
                   int64_t q_middle_size, int64_t q_inner_size, int64_t q_rows, T* k,
                   int64_t k_outer, int64_t k_middle, int64_t k_inner, int64_t k_middle_size,
                   int64_t k_inner_size, const W* q_weight, const W* k_weight, float eps) {
  const auto item = this_nd_item();
  const int64_t row = item.get_group(0);
  const bool is_q = row < q_rows;
  T* base = is_q ? q + row_offset(row, q_middle_size, q_inner_size, {q_outer, q_middle, q_inner})
                 : k + row_offset(row - q_rows, k_middle_size, k_inner_size,
                                  {k_outer, k_middle, k_inner});
  rmsnorm_row<T, W, kHeadDim, kThreads, kVec, kGemma, false>(item, base, nullptr,
                                                             is_q ? q_weight : k_weight, base, eps);
}

}  // namespace sycl_kernels
