// kernels/moe/routing.hpp: MoE routing, the top-k experts of each token, one sub-group per token
// (a work-group's sub-groups take consecutive tokens).
//
// A token's kExperts router logits are read into the registers of one sub-group of
// kLanes work-items (expert e at lane e % kLanes, slot e / kLanes) and turned into
// float32 scores: softmax (max and sum reduced across the sub-group), sigmoid, or the
// logits themselves (kScoring 0, 1, 2). Selection ranks key = score + bias[e] (bias
// optional); a NaN key ranks as -inf. With kGroups > 1 the experts are split into
// kGroups groups of consecutive experts, each scored by its best key (kGroupTop2: the
// sum of its two best), and only the experts of the kTopkGroup best groups are
// selectable. Then kTopk rounds each take the best selectable key: every lane its own
// best, then a butterfly over the sub-group (permute_group_by_xor) of one 64-bit rank,
// the key's order-preserving bits above the expert's index (rank_of). Every
// comparison breaks ties by the lower index (expert or group), so the result is
// deterministic; -0 and +0 are equal keys.
//
// The weights are the unbiased scores of the chosen experts, in selection order
// (descending key), times routed_scaling_factor / sum (renormalize, when the sum of
// the chosen scores is positive) or times routed_scaling_factor. The sum is taken in
// each lane over the chosen experts it holds, then across the sub-group.
#pragma once

#include <cstdint>
#include <limits>

#include "../common/device.hpp"
#include "../common/dtype.hpp"

namespace sycl_kernels {

// A token's work-items: one sub-group (kernels compiled for sub-groups of this size).
inline constexpr int kRouteLanes = 16;

// A selectable expert's rank as one integer, larger first: the order-preserving bits
// of its key (-0 taken as +0) above the complement of its index, so that equal keys
// rank the lower index first. 0 ranks below every selectable expert.
inline uint64_t rank_of(float key, int expert) {
  uint32_t bits = ::sycl::bit_cast<uint32_t>(key == 0.0f ? 0.0f : key);
  bits = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
  return (static_cast<uint64_t>(bits) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(expert));
}

inline int expert_of(uint64_t rank) {
  return static_cast<int>(0xFFFFFFFFu - static_cast<uint32_t>(rank));
}

inline float key_of(uint64_t rank) {
  uint32_t bits = static_cast<uint32_t>(rank >> 32);
  bits = (bits & 0x80000000u) != 0 ? bits & 0x7FFFFFFFu : ~bits;
  return ::sycl::bit_cast<float>(bits);
}

template <typename G>
inline float sub_group_max(const G& sg, float v) {
#pragma unroll
  for (int mask = kRouteLanes / 2; mask > 0; mask /= 2) {
    v = ::sycl::fmax(v, ::sycl::permute_group_by_xor(sg, v, mask));
  }
  return v;
}

template <typename G>
inline float sub_group_sum(const G& sg, float v) {
#pragma unroll
  for (int mask = kRouteLanes / 2; mask > 0; mask /= 2) {
    v += ::sycl::permute_group_by_xor(sg, v, mask);
  }
  return v;
}

// The best rank across the sub-group, in every lane.
template <typename G>
inline uint64_t sub_group_best(const G& sg, uint64_t rank) {
#pragma unroll
  for (int mask = kRouteLanes / 2; mask > 0; mask /= 2) {
    rank = ::sycl::max(rank, ::sycl::permute_group_by_xor(sg, rank, mask));
  }
  return rank;
}

template <typename T, typename B, int kExperts, int kTopk, int kScoring, int kGroups,
          int kTopkGroup, bool kGroupTop2>
inline void moe_topk(const T* gating_output, int64_t tokens, int64_t gating_stride,
                     const B* correction_bias, int32_t renormalize, float routed_scaling_factor,
                     float* topk_weights, int64_t weights_stride, int32_t* topk_ids,
                     int64_t ids_stride) {
  constexpr int kPer = (kExperts + kRouteLanes - 1) / kRouteLanes;
  constexpr int kGroupSize = kExperts / kGroups;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  static_assert(kExperts % kGroups == 0 && kGroups <= 32 && kTopkGroup <= kGroups, "groups");
  static_assert(kTopk <= kTopkGroup * kGroupSize, "enough selectable experts");
  const auto item = this_nd_item();
  const auto sg = item.get_sub_group();
  const int lane = static_cast<int>(sg.get_local_linear_id());
  // A work-group's sub-groups take consecutive tokens; the last group's spare ones none.
  const int64_t token = static_cast<int64_t>(item.get_group(0)) * sg.get_group_linear_range() +
                        sg.get_group_linear_id();
  if (token >= tokens) return;
  const T* row = gating_output + token * gating_stride;

  float score[kPer];
  bool in_row[kPer];
  float row_max = kNegInf;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int e = lane + kRouteLanes * j;
    in_row[j] = e < kExperts;
    score[j] = in_row[j] ? to_float(row[e]) : kNegInf;
    row_max = ::sycl::fmax(row_max, score[j]);
  }
  if constexpr (kScoring == 0) {  // softmax
    row_max = sub_group_max(sg, row_max);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      score[j] = in_row[j] ? ::sycl::exp(score[j] - row_max) : 0.0f;
      sum += score[j];
    }
    const float inverse = 1.0f / sub_group_sum(sg, sum);
#pragma unroll
    for (int j = 0; j < kPer; ++j) score[j] *= inverse;
  } else if constexpr (kScoring == 1) {  // sigmoid
#pragma unroll
    for (int j = 0; j < kPer; ++j) score[j] = 1.0f / (1.0f + ::sycl::exp(-score[j]));
  }
  // rank[j]: the selection rank of expert lane + kRouteLanes * j, 0 once it is chosen
  // or where it cannot be (past kExperts, outside the kept groups).
  uint64_t rank[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int e = lane + kRouteLanes * j;
    float k = score[j];
    if (correction_bias != nullptr && in_row[j]) k += to_float(correction_bias[e]);
    rank[j] = in_row[j] ? rank_of(k != k ? kNegInf : k, e) : 0;
  }

  if constexpr (kGroups > 1) {
    float group_score[kGroups];
    for (int g = 0; g < kGroups; ++g) {
      uint64_t best = 0;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        if ((lane + kRouteLanes * j) / kGroupSize == g) best = ::sycl::max(best, rank[j]);
      }
      best = sub_group_best(sg, best);
      group_score[g] = key_of(best);
      if constexpr (kGroupTop2) {
        uint64_t second = 0;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          if ((lane + kRouteLanes * j) / kGroupSize == g && rank[j] != best) {
            second = ::sycl::max(second, rank[j]);
          }
        }
        second = sub_group_best(sg, second);
        group_score[g] += second == 0 ? kNegInf : key_of(second);
      }
    }
    // The kTopkGroup best groups (the same in every lane): larger score, then lower index.
    uint32_t kept = 0;
    for (int t = 0; t < kTopkGroup; ++t) {
      int best_group = kGroups;
      float best = kNegInf;
      for (int g = 0; g < kGroups; ++g) {
        const bool better = group_score[g] > best || (group_score[g] == best && g < best_group);
        if (((kept >> g) & 1u) == 0 && better) {
          best = group_score[g];
          best_group = g;
        }
      }
      kept |= 1u << best_group;
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (((kept >> ((lane + kRouteLanes * j) / kGroupSize)) & 1u) == 0) rank[j] = 0;
    }
  }

  // The kTopk rounds are unrolled only while the code stays small: each round's
  // kPer-wide scans multiply it by the unroll (1024 experts, top-32: 22 s to compile
  // fully unrolled, 5 s rolled, 7 s four rounds at a time, launches within noise).
  constexpr int kRoundUnroll = kPer * kTopk <= 256 ? kTopk : (kPer < 256 ? 256 / kPer : 1);
  int ids[kTopk];
#pragma unroll kRoundUnroll
  for (int t = 0; t < kTopk; ++t) {
    uint64_t best = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j) best = ::sycl::max(best, rank[j]);
    best = sub_group_best(sg, best);
    ids[t] = expert_of(best);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (rank[j] == best) rank[j] = 0;
    }
  }
  // Each chosen expert's score stays in the lane that holds it, which writes its weight.
  float owned[kTopk];
  float partial = 0.0f;
#pragma unroll kRoundUnroll
  for (int t = 0; t < kTopk; ++t) {
    owned[t] = 0.0f;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (lane + kRouteLanes * j == ids[t]) owned[t] = score[j];
    }
    partial += owned[t];
  }
  const float sum = sub_group_sum(sg, partial);
  const float scale =
      renormalize != 0 && sum > 0.0f ? routed_scaling_factor / sum : routed_scaling_factor;
  float* w_row = topk_weights + token * weights_stride;
  int32_t* id_row = topk_ids + token * ids_stride;
#pragma unroll
  for (int t = 0; t < kTopk; ++t) {
    if (ids[t] % kRouteLanes == lane) w_row[t] = owned[t] * scale;
    if (lane == 0) id_row[t] = ids[t];
  }
}

}  // namespace sycl_kernels
