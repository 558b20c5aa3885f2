// kernels/moe/routing.hpp: MoE routing, the top-k experts of each token, one sub-group per token.
//
// A token's kExperts router logits are read into the registers of one sub-group of
// kLanes work-items (expert e at lane e % kLanes, slot e / kLanes) and turned into
// float32 scores: softmax (max and sum reduced across the sub-group), sigmoid, or the
// logits themselves (kScoring 0, 1, 2). Selection ranks key = score + bias[e] (bias
// optional); a NaN key ranks as -inf. With kGroups > 1 the experts are split into
// kGroups groups of consecutive experts, each scored by its best key (kGroupTop2: the
// sum of its two best), and only the experts of the kTopkGroup best groups are
// selectable. Then kTopk rounds each take the best selectable key: every lane its own
// best, then a butterfly over the sub-group (permute_group_by_xor). Every comparison
// breaks ties by the lower index (expert or group), so the result is deterministic.
//
// The weights are the unbiased scores of the chosen experts, in selection order
// (descending key), times routed_scaling_factor / sum (renormalize, when the sum of
// the chosen scores is positive) or times routed_scaling_factor.
#pragma once

#include <cstdint>
#include <limits>

#include "../common/device.hpp"
#include "../common/dtype.hpp"

namespace sycl_kernels {

// A token's work-items: one sub-group (kernels compiled for sub-groups of this size).
inline constexpr int kRouteLanes = 16;

// Whether (key, expert) ranks before (other_key, other): larger key, then lower index.
inline bool ranks_before(float key, int expert, float other_key, int other) {
  return key > other_key || (key == other_key && expert < other);
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
  for (int mask = kRouteLanes / 2; mask > 0; mask /= 2) v += ::sycl::permute_group_by_xor(sg, v, mask);
  return v;
}

// (key, expert, weight) of the best across the sub-group, in every lane.
template <typename G>
inline void sub_group_best(const G& sg, float& key, int& expert, float& weight) {
#pragma unroll
  for (int mask = kRouteLanes / 2; mask > 0; mask /= 2) {
    const float other_key = ::sycl::permute_group_by_xor(sg, key, mask);
    const int other = ::sycl::permute_group_by_xor(sg, expert, mask);
    const float other_weight = ::sycl::permute_group_by_xor(sg, weight, mask);
    if (ranks_before(other_key, other, key, expert)) {
      key = other_key;
      expert = other;
      weight = other_weight;
    }
  }
}

template <typename T, typename B, int kExperts, int kTopk, int kScoring, int kGroups,
          int kTopkGroup, bool kGroupTop2>
inline void moe_topk(const T* gating_output, int64_t gating_stride, const B* correction_bias,
                     int32_t renormalize, float routed_scaling_factor, float* topk_weights,
                     int64_t weights_stride, int32_t* topk_ids, int64_t ids_stride) {
  constexpr int kPer = (kExperts + kRouteLanes - 1) / kRouteLanes;
  constexpr int kGroupSize = kExperts / kGroups;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  static_assert(kExperts % kGroups == 0 && kGroups <= 32 && kTopkGroup <= kGroups, "groups");
  static_assert(kTopk <= kTopkGroup * kGroupSize, "enough selectable experts");
  const auto item = this_nd_item();
  const auto sg = item.get_sub_group();
  const int lane = static_cast<int>(sg.get_local_linear_id());
  const int64_t token = item.get_group(0);
  const T* row = gating_output + token * gating_stride;

  float score[kPer], key[kPer];
  bool selectable[kPer];
  float row_max = kNegInf;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int e = lane + kRouteLanes * j;
    selectable[j] = e < kExperts;
    score[j] = selectable[j] ? to_float(row[e]) : kNegInf;
    row_max = ::sycl::fmax(row_max, score[j]);
  }
  if constexpr (kScoring == 0) {  // softmax
    row_max = sub_group_max(sg, row_max);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      score[j] = selectable[j] ? ::sycl::exp(score[j] - row_max) : 0.0f;
      sum += score[j];
    }
    const float inverse = 1.0f / sub_group_sum(sg, sum);
#pragma unroll
    for (int j = 0; j < kPer; ++j) score[j] *= inverse;
  } else if constexpr (kScoring == 1) {  // sigmoid
#pragma unroll
    for (int j = 0; j < kPer; ++j) score[j] = 1.0f / (1.0f + ::sycl::exp(-score[j]));
  }
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int e = lane + kRouteLanes * j;
    float k = score[j];
    if (correction_bias != nullptr && selectable[j]) k += to_float(correction_bias[e]);
    key[j] = (k != k || !selectable[j]) ? kNegInf : k;
  }

  if constexpr (kGroups > 1) {
    float group_score[kGroups];
    for (int g = 0; g < kGroups; ++g) {
      float best = kNegInf, weight = 0.0f;
      int best_expert = kExperts;
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int e = lane + kRouteLanes * j;
        if (selectable[j] && e / kGroupSize == g && ranks_before(key[j], e, best, best_expert)) {
          best = key[j];
          best_expert = e;
        }
      }
      sub_group_best(sg, best, best_expert, weight);
      if constexpr (kGroupTop2) {
        float second = kNegInf;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          const int e = lane + kRouteLanes * j;
          if (selectable[j] && e / kGroupSize == g && e != best_expert) {
            second = ::sycl::fmax(second, key[j]);
          }
        }
        group_score[g] = best + sub_group_max(sg, second);
      } else {
        group_score[g] = best;
      }
    }
    // The kTopkGroup best groups (the same in every lane).
    uint32_t kept = 0;
    for (int t = 0; t < kTopkGroup; ++t) {
      int best_group = kGroups;
      float best = kNegInf;
      for (int g = 0; g < kGroups; ++g) {
        if (((kept >> g) & 1u) == 0 && ranks_before(group_score[g], g, best, best_group)) {
          best = group_score[g];
          best_group = g;
        }
      }
      kept |= 1u << best_group;
    }
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int e = lane + kRouteLanes * j;
      selectable[j] = selectable[j] && ((kept >> (e / kGroupSize)) & 1u) != 0;
    }
  }

  float weights[kTopk];
  int ids[kTopk];
  float sum = 0.0f;
#pragma unroll
  for (int t = 0; t < kTopk; ++t) {
    float best = kNegInf, weight = 0.0f;
    int best_expert = kExperts;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int e = lane + kRouteLanes * j;
      if (selectable[j] && ranks_before(key[j], e, best, best_expert)) {
        best = key[j];
        best_expert = e;
        weight = score[j];
      }
    }
    sub_group_best(sg, best, best_expert, weight);
    weights[t] = weight;
    ids[t] = best_expert;
    sum += weight;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (lane + kRouteLanes * j == best_expert) selectable[j] = false;
    }
  }
  if (lane == 0) {
    const float scale =
        renormalize != 0 && sum > 0.0f ? routed_scaling_factor / sum : routed_scaling_factor;
    float* w_row = topk_weights + token * weights_stride;
    int32_t* id_row = topk_ids + token * ids_stride;
#pragma unroll
    for (int t = 0; t < kTopk; ++t) {
      w_row[t] = weights[t] * scale;
      id_row[t] = ids[t];
    }
  }
}

}  // namespace sycl_kernels
