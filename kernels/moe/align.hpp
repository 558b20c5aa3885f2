// kernels/moe/align.hpp: moe_align_block_size, the routing of a MoE layer's token
// slots into blocks of block_size rows of one expert each (ops/moe.py).
//
// Three kernels over the slots cut into `chunks` runs of chunk_size, deterministic:
// 1. moe_align_count: a work-item a chunk counts its slots per expert, in order,
//    into its row of the scratch (num_experts counts and a flag word);
// 2. moe_align_scan: one work-group sums the counts per expert, rounds them up to
//    block_size, scans them into where each expert's run starts, turns each chunk's
//    counts into where its slots of that expert go, writes expert_ids and the pads
//    (numel), and ORs the chunks' flags into the scratch's first word;
// 3. moe_align_scatter: a work-item a chunk writes its slots' flat indices there, in
//    order.
// So within an expert the slots are in the order of their flat index (stable). A
// slot's expert is topk_ids[i], or with an expert_map expert_map[topk_ids[i]] (-1:
// not on this rank, the slot is left out). An id outside [0, num_experts), a mapped
// id outside [-1, num_experts) and a padded total past sorted_size are left out and
// flagged (kAlign* bits): the op raises for them on CPU tensors, after the launch;
// every write is bounded by the outputs' sizes. Padded counts and the total are kept
// in 64 bits; the op keeps numel and sorted_size below 2^31 (int32 entries).
#pragma once

#include "../common/device.hpp"

namespace sycl_kernels {

// The flag bits of the scratch (ops/moe.py ALIGN_FLAGS reads them).
inline constexpr int32_t kAlignIdOutOfRange = 1;
inline constexpr int32_t kAlignMapOutOfRange = 2;
inline constexpr int32_t kAlignTotalTooLarge = 4;

// The expert of slot i, or -1 if it is left out; flags gets the reason of a bad id.
template <typename I>
inline int32_t moe_slot_expert(const I* topk_ids, int64_t i, const int32_t* expert_map,
                               int32_t num_experts, int32_t& flags) {
  const int64_t id = static_cast<int64_t>(topk_ids[i]);
  if (id < 0 || id >= num_experts) {
    flags |= kAlignIdOutOfRange;
    return -1;
  }
  if (expert_map == nullptr) return static_cast<int32_t>(id);
  const int32_t e = expert_map[id];
  if (e < -1 || e >= num_experts) flags |= kAlignMapOutOfRange;
  return e >= 0 && e < num_experts ? e : -1;
}

// Chunk c's row of the scratch: num_experts counts (then offsets), then its flags.
inline int32_t* moe_align_row(int32_t* scratch, int64_t c, int32_t num_experts) {
  return scratch + 1 + c * (static_cast<int64_t>(num_experts) + 1);
}

template <typename I>
inline void moe_align_count(const I* topk_ids, int64_t numel, const int32_t* expert_map,
                            int32_t num_experts, int64_t chunk_size, int64_t chunks,
                            int32_t* scratch) {
  const int64_t c = this_nd_item().get_global_id(0);
  if (c >= chunks) return;
  int32_t* row = moe_align_row(scratch, c, num_experts);
  for (int32_t e = 0; e < num_experts; ++e) row[e] = 0;
  int32_t flags = 0;
  const int64_t end = ::sycl::min(numel, (c + 1) * chunk_size);
  for (int64_t i = c * chunk_size; i < end; ++i) {
    const int32_t e = moe_slot_expert(topk_ids, i, expert_map, num_experts, flags);
    if (e >= 0) ++row[e];
  }
  row[num_experts] = flags;
}

template <int kThreads>
inline void moe_align_scan(int64_t numel, int32_t num_experts, int32_t block_size, int64_t chunks,
                           int32_t* scratch, int32_t* sorted_token_ids, int64_t sorted_size,
                           int32_t* expert_ids, int64_t expert_ids_size,
                           int32_t* num_tokens_post_padded) {
  const auto item = this_nd_item();
  const auto group = item.get_group();
  const int tid = static_cast<int>(item.get_local_id(0));
  const int32_t pad = static_cast<int32_t>(numel);
  // Padded counts, starts and the total in 64 bits: num_experts runs padded to a
  // block_size near 2^31 pass int32 (the op refuses a total past int32 before writing).
  int64_t carry = 0;
  const int rounds = (num_experts + kThreads - 1) / kThreads;  // uniform
  for (int r = 0; r < rounds; ++r) {
    const int32_t e = r * kThreads + tid;
    int64_t count = 0;
    if (e < num_experts) {
      for (int64_t c = 0; c < chunks; ++c) count += moe_align_row(scratch, c, num_experts)[e];
    }
    const int64_t padded = (count + block_size - 1) / block_size * block_size;
    const int64_t start =
        carry + ::sycl::exclusive_scan_over_group(group, padded, ::sycl::plus<int64_t>());
    carry += ::sycl::reduce_over_group(group, padded, ::sycl::plus<int64_t>());
    if (e >= num_experts) continue;
    // A chunk's offsets fit int32 whenever the total fits sorted_size (the flag below);
    // past it they are never used to write.
    int64_t at = start;
    for (int64_t c = 0; c < chunks; ++c) {
      int32_t& slot = moe_align_row(scratch, c, num_experts)[e];
      const int32_t n = slot;
      slot = static_cast<int32_t>(::sycl::min(at, sorted_size));
      at += n;
    }
    for (int64_t i = at; i < start + padded && i < sorted_size; ++i) sorted_token_ids[i] = pad;
    const int64_t last_block = ::sycl::min((start + padded) / block_size, expert_ids_size);
    for (int64_t b = start / block_size; b < last_block; ++b) expert_ids[b] = e;
  }
  for (int64_t i = carry + tid; i < sorted_size; i += kThreads) sorted_token_ids[i] = pad;
  for (int64_t b = carry / block_size + tid; b < expert_ids_size; b += kThreads) {
    expert_ids[b] = -1;
  }
  int32_t flags = carry > sorted_size ? kAlignTotalTooLarge : 0;
  for (int64_t c = tid; c < chunks; c += kThreads) {
    flags |= moe_align_row(scratch, c, num_experts)[num_experts];
  }
  flags = ::sycl::reduce_over_group(group, flags, ::sycl::bit_or<int32_t>());
  if (tid == 0) {
    num_tokens_post_padded[0] = static_cast<int32_t>(::sycl::min(carry, sorted_size));
    scratch[0] = flags;
  }
}

template <typename I>
inline void moe_align_scatter(const I* topk_ids, int64_t numel, const int32_t* expert_map,
                              int32_t num_experts, int64_t chunk_size, int64_t chunks,
                              int32_t* scratch, int32_t* sorted_token_ids, int64_t sorted_size) {
  const int64_t c = this_nd_item().get_global_id(0);
  if (c >= chunks) return;
  int32_t* row = moe_align_row(scratch, c, num_experts);
  int32_t flags = 0;
  const int64_t end = ::sycl::min(numel, (c + 1) * chunk_size);
  for (int64_t i = c * chunk_size; i < end; ++i) {
    const int32_t e = moe_slot_expert(topk_ids, i, expert_map, num_experts, flags);
    if (e < 0) continue;
    // Stops at sorted_size (the scan's offsets are at most that, and the op keeps it
    // below 2^31), so the count never wraps.
    const int32_t at = row[e];
    if (at < sorted_size) {
      sorted_token_ids[at] = static_cast<int32_t>(i);
      row[e] = at + 1;
    }
  }
}

}  // namespace sycl_kernels
