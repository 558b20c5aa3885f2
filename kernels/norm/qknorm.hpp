// kernels/norm/qknorm.hpp: per-head RMSNorm of q and k in place, several heads a work-group.
//
// q and k are [..., kHeadDim] with up to three strided leading dimensions each
// (kernels/common/rows.hpp): heads of a fused qkv tensor, a padded head layout or
// a transposed [B, H, S, D] view. The heads are numbered q's first, then k's, so
// one launch normalizes both; work-group g takes heads [g, g + 1) * kHeadsPerGroup,
// one after another (specs/norm.py qknorm_heads_per_group says why several).
#pragma once

#include "rmsnorm.hpp"

namespace sycl_kernels {

template <typename T, typename W, int kHeadDim, int kThreads, int kVec, bool kGemma,
          int kHeadsPerGroup>
inline void qknorm(T* q, int64_t q_outer, int64_t q_middle, int64_t q_inner, int64_t q_middle_size,
                   int64_t q_inner_size, int64_t q_rows, T* k, int64_t k_outer, int64_t k_middle,
                   int64_t k_inner, int64_t k_middle_size, int64_t k_inner_size, const W* q_weight,
                   const W* k_weight, float eps, int64_t rows) {
  const auto item = this_nd_item();
  const int64_t first = item.get_group(0) * kHeadsPerGroup;
  for (int h = 0; h < kHeadsPerGroup; ++h) {
    const int64_t row = first + h;
    // The same for every work-item of the group, so all reach the same barriers.
    if (row >= rows) break;
    const bool is_q = row < q_rows;
    T* base = is_q ? q + row_offset(row, q_middle_size, q_inner_size, {q_outer, q_middle, q_inner})
                   : k + row_offset(row - q_rows, k_middle_size, k_inner_size,
                                    {k_outer, k_middle, k_inner});
    rmsnorm_row<T, W, kHeadDim, kThreads, kVec, kGemma, false>(
        item, base, nullptr, is_q ? q_weight : k_weight, base, eps);
  }
}

}  // namespace sycl_kernels
