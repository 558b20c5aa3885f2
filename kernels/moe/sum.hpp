// kernels/moe/sum.hpp: moe_sum, a MoE layer's expert outputs summed per token
// (ops/moe.py): out[t, :] = scale * sum over active k of x[t, k, :], accumulated in
// float32 in the order k = 0, 1, ... and rounded to T once. One work-group per token.
//
// Without topk_ids every slot is active; with them, slot k of token t is active
// when topk_ids[t, k] >= 0 and, with an expert_map, expert_map[topk_ids[t, k]] >= 0
// (vLLM's moe_sum); an id at or past map_size counts as inactive (the op checks ids
// on CPU tensors).
#pragma once

#include "../common/dtype.hpp"

namespace sycl_kernels {

template <typename T, typename I, int kThreads>
inline void moe_sum(const T* x, int64_t x_token, int64_t x_k, T* out, int64_t out_token,
                    const I* topk_ids, const int32_t* expert_map, int64_t map_size, int64_t topk,
                    int64_t hidden, float scale) {
  const auto item = this_nd_item();
  const int64_t token = item.get_group(0);
  const int tid = static_cast<int>(item.get_local_id(0));
  const T* x_row = x + token * x_token;
  T* out_row = out + token * out_token;
  for (int64_t j = tid; j < hidden; j += kThreads) {
    float sum = 0.0f;
    for (int64_t k = 0; k < topk; ++k) {
      if (topk_ids != nullptr) {
        const int64_t id = static_cast<int64_t>(topk_ids[token * topk + k]);
        if (id < 0) continue;
        if (expert_map != nullptr && (id >= map_size || expert_map[id] < 0)) continue;
      }
      sum += to_float(x_row[k * x_k + j]);
    }
    out_row[j] = from_float<T>(sum * scale);
  }
}

}  // namespace sycl_kernels
