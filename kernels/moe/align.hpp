// kernels/moe/align.hpp: moe_align_block_size, the routing of a MoE layer's token
// slots into blocks of block_size rows of one expert each (ops/moe.py).
//
// One work-group of kThreads work-items does it all, deterministically:
// 1. sorted_token_ids is filled with numel (the pad), expert_ids with -1;
// 2. each work-item counts the slots of its experts (e = tid, tid + kThreads, ...,
//    at most kMaxExperts in all) by reading every slot in order;
// 3. a scan over the group per round of kThreads experts gives the exclusive prefix
//    sum of the counts rounded up to block_size: where each expert's run starts;
// 4. each work-item writes its experts' blocks into expert_ids and their slots'
//    flat indices, in increasing order, into sorted_token_ids.
// So within an expert the slots are in the order of their flat index (stable). A
// slot's expert is topk_ids[i], or with an expert_map expert_map[topk_ids[i]] (-1:
// not on this rank, the slot is left out). Ids outside [0, num_experts) and mapped
// ids outside [0, num_experts) are left out too (the op checks them on CPU tensors);
// every write is bounded by the outputs' sizes. Work is O(numel * experts / kThreads)
// a work-item: simple, not fast at large batches.
#pragma once

#include "../common/device.hpp"

namespace sycl_kernels {

inline constexpr int kMaxExperts = 1024;

// The expert of slot i, or -1 if it is left out (module comment).
template <typename I>
inline int32_t moe_slot_expert(const I* topk_ids, int64_t i, const int32_t* expert_map,
                               int32_t num_experts) {
  const int64_t id = static_cast<int64_t>(topk_ids[i]);
  if (id < 0 || id >= num_experts) return -1;
  const int64_t e = expert_map == nullptr ? id : static_cast<int64_t>(expert_map[id]);
  return e >= 0 && e < num_experts ? static_cast<int32_t>(e) : -1;
}

template <typename I, int kThreads>
inline void moe_align_block_size(const I* topk_ids, int64_t numel, const int32_t* expert_map,
                                 int32_t num_experts, int32_t block_size,
                                 int32_t* sorted_token_ids, int64_t sorted_size,
                                 int32_t* expert_ids, int64_t expert_ids_size,
                                 int32_t* num_tokens_post_padded) {
  constexpr int kRounds = kMaxExperts / kThreads;
  const auto item = this_nd_item();
  const auto group = item.get_group();
  const int tid = static_cast<int>(item.get_local_id(0));
  for (int64_t i = tid; i < sorted_size; i += kThreads) {
    sorted_token_ids[i] = static_cast<int32_t>(numel);
  }
  for (int64_t i = tid; i < expert_ids_size; i += kThreads) expert_ids[i] = -1;
  // This work-item's experts e = r * kThreads + tid: their padded counts, then where
  // their runs start (a scan over the group per round, no local memory).
  int32_t start[kRounds];
  int32_t padded[kRounds];
  int32_t carry = 0;
  const int rounds = (num_experts + kThreads - 1) / kThreads;  // uniform
  for (int r = 0; r < kRounds; ++r) {
    if (r >= rounds) break;
    const int32_t e = r * kThreads + tid;
    int32_t count = 0;
    if (e < num_experts) {
      for (int64_t i = 0; i < numel; ++i) {
        count += moe_slot_expert(topk_ids, i, expert_map, num_experts) == e ? 1 : 0;
      }
    }
    padded[r] = (count + block_size - 1) / block_size * block_size;
    start[r] = carry + ::sycl::exclusive_scan_over_group(group, padded[r], ::sycl::plus<int32_t>());
    carry += ::sycl::reduce_over_group(group, padded[r], ::sycl::plus<int32_t>());
  }
  if (tid == 0) num_tokens_post_padded[0] = carry;
  // The fills above before the writes below.
  item.barrier(::sycl::access::fence_space::global_and_local);
  for (int r = 0; r < kRounds; ++r) {
    if (r >= rounds) break;
    const int32_t e = r * kThreads + tid;
    if (e >= num_experts) continue;
    for (int64_t b = start[r] / block_size; b < (start[r] + padded[r]) / block_size; ++b) {
      if (b < expert_ids_size) expert_ids[b] = e;
    }
    int64_t at = start[r];
    for (int64_t i = 0; i < numel; ++i) {
      if (moe_slot_expert(topk_ids, i, expert_map, num_experts) == e) {
        if (at < sorted_size) sorted_token_ids[at] = static_cast<int32_t>(i);
        ++at;
      }
    }
  }
}

}  // namespace sycl_kernels
