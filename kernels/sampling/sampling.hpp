// kernels/sampling/sampling.hpp: top-k / top-p / min-p filtering of probability rows,
// renormalized or sampled.
//
// One sub-group of kSampleLanes work-items per output row; element e of a row is read by
// lane e % kSampleLanes, at step e / kSampleLanes. Sort-free:
//
// 1. stats: the row's mass S and maximum M over its support (the positive finite
//    entries; NaN, Inf, zero and negative entries count as outside it). Where S
//    overflows or is tiny (outside [2^-64, 2^64]), every mass is taken in units of a
//    power of two near M instead (exact scaling): sums of up to 2^31 entries cannot
//    overflow, 1 / W stays finite and u * W keeps its bits;
// 2. top-k and top-p thresholds by radix select over the float bits (positive floats
//    order as their bits do): up to 4 passes, digits of 8, 8, 8 and 7 bits, each a
//    256-bucket histogram of counts and masses of the elements still matching the
//    prefix fixed so far (a private histogram per lane, summed across the sub-group),
//    walked from the largest bucket down until the kept count reaches k or the kept
//    mass reaches p * (mass of the set filtered); a pass stops the descent early when
//    its chosen bucket is kept whole (one element, or exactly k). The threshold is a
//    lower bound on the bits: an element is kept iff its bits are >= it, so every
//    element equal to the k-th largest (top-p: the pivot) is kept.
//    kJoint: one descent with both criteria on the whole row (flashinfer's "joint");
//    otherwise top-k first, then top-p over the top-k set and its mass;
// 3. min-p: kept iff p >= min_p * M;
// 4. renormalize (out = p * (1 / W), W the kept mass, both in those units; 0 outside)
//    or sample: one uniform u from Philox 4x32-10 keyed by the row's seed, the target
//    u * W, found by inverse CDF over the kept elements in lane-major order (lane 0's
//    elements in index order, then lane 1's, ...), with the per-lane masses summed in
//    lane order.
//
// Every sum has a fixed order (per lane in index order, then across lanes), so the
// result depends only on the row, its parameters, its seed and its output index.
// The histograms are private arrays (2 KB a work-item): the layout suits the CPU
// device, where a sub-group is one thread's SIMD lanes; a GPU would want them in
// local memory.
#pragma once

#include <cstdint>
#include <limits>

#include "../common/device.hpp"

namespace sycl_kernels {

// A row's work-items: one sub-group (kernels compiled for sub-groups of this size).
inline constexpr int kSampleLanes = 16;

// The radix descent: the digits of a positive float's bits, most significant first
// (bit 31 is 0 for every element of the support).
inline constexpr int kSampleRadixPasses = 4;
inline constexpr int kSampleRadixShift[kSampleRadixPasses] = {23, 15, 7, 0};
inline constexpr int kSampleRadixBits[kSampleRadixPasses] = {8, 8, 8, 7};
inline constexpr int kSampleBuckets = 256;
// A radix descent without a count criterion, without a mass criterion.
inline constexpr int64_t kNoCount = std::numeric_limits<int64_t>::max();
inline constexpr float kNoTarget = std::numeric_limits<float>::infinity();

// Philox 4x32-10 (Salmon et al., SC'11; Random123's philox4x32_10): the 4 words of
// counter `ctr` under key (k0, k1).
inline void philox4x32_10(uint32_t (&ctr)[4], uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * ctr[2];
    const uint32_t c1 = ctr[1], c3 = ctr[3];
    ctr[0] = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    ctr[1] = static_cast<uint32_t>(p1);
    ctr[2] = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    ctr[3] = static_cast<uint32_t>(p0);
  }
}

// The uniform in [0, 1) of (seed, offset, subsequence): the first Philox word of
// counter (offset, subsequence) under key seed, its top 24 bits.
inline float philox_uniform(uint64_t seed, uint64_t offset, uint64_t subsequence) {
  uint32_t ctr[4] = {static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32),
                     static_cast<uint32_t>(subsequence), static_cast<uint32_t>(subsequence >> 32)};
  philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return static_cast<float>(ctr[0] >> 8) * 0x1p-24f;
}

// A row whose support's mass lies outside [kMassLow, kMassHigh] has every mass summed
// in units of 1 / mass_scale(M).
inline constexpr float kMassLow = 0x1p-64f;
inline constexpr float kMassHigh = 0x1p64f;

// A power of two s bringing max * s into [2^-22, 4) for any positive finite max: max's
// exponent field e gives s = 2^(127 - e), kept a normal float (e = 254: 2^-126).
inline float mass_scale(float max) {
  const uint32_t exponent = ::sycl::bit_cast<uint32_t>(max) >> 23;
  return ::sycl::bit_cast<float>(::sycl::max(254u - exponent, 1u) << 23);
}

// What a row keeps: the elements with key >= floor (>= 1); masses in units of 1 / scale.
struct KeptSet {
  uint32_t floor;
  float scale;
};

// An element's key: its bits if it is a positive finite float (the support), else 0.
inline uint32_t support_key(float v) {
  const uint32_t bits = ::sycl::bit_cast<uint32_t>(v);
  return bits - 1u < 0x7F7FFFFFu ? bits : 0u;
}

// The lowest key kept by a radix descent over the elements with key >= floor: the
// largest threshold t such that the elements with key >= t number at least k or hold
// at least `target` mass, whichever comes first (k past the count and an infinite
// target never do: every element is kept). `kept_mass` gets the mass of the elements
// with key >= the result (which is >= floor); masses are taken times `scale`.
template <typename G>
inline uint32_t radix_threshold(const G& sg, const float* row, int32_t vocab, int lane,
                                uint32_t floor, float scale, int64_t k, float target,
                                float& kept_mass) {
  const bool by_mass = target < kNoTarget;
  uint32_t prefix = 0;  // the bits fixed so far
  int64_t count_above = 0;
  float mass_above = 0.0f;
  for (int pass = 0; pass < kSampleRadixPasses; ++pass) {
    const int shift = kSampleRadixShift[pass];
    const uint32_t high_mask = pass == 0 ? 0u : ~((1u << (shift + kSampleRadixBits[pass])) - 1u);
    const int buckets = 1 << kSampleRadixBits[pass];
    int32_t counts[kSampleBuckets];
    float masses[kSampleBuckets];
    for (int b = 0; b < buckets; ++b) {
      counts[b] = 0;
      masses[b] = 0.0f;
    }
    for (int32_t e = lane; e < vocab; e += kSampleLanes) {
      const float v = row[e];
      const uint32_t key = support_key(v);
      if (key >= floor && (key & high_mask) == prefix) {
        const uint32_t b = (key >> shift) & static_cast<uint32_t>(buckets - 1);
        ++counts[b];
        masses[b] += v * scale;
      }
    }
    // Walk the buckets from the largest: the same totals, so the same walk, in every
    // lane. Where neither criterion is met (rounding, or k past the count) the lowest
    // non-empty bucket ends the walk: every element is kept.
    int chosen = -1;
    int64_t count_incl = count_above, chosen_count = 0;
    float mass_incl = mass_above, chosen_mass = 0.0f;
    bool met = false;
    for (int b = buckets - 1; b >= 0 && !met; --b) {
      const int32_t c = ::sycl::reduce_over_group(sg, counts[b], ::sycl::plus<int32_t>());
      const float m = ::sycl::reduce_over_group(sg, masses[b], ::sycl::plus<float>());
      if (c == 0) continue;
      count_incl += c;
      mass_incl += m;
      chosen = b;
      chosen_count = c;
      chosen_mass = m;
      met = count_incl >= k || mass_incl >= target;
    }
    if (chosen < 0) break;  // nothing matches (an empty support)
    prefix |= static_cast<uint32_t>(chosen) << shift;
    // The chosen bucket is kept whole: at the last digit (one value), when nothing
    // reached the criteria, when it holds one element, or exactly the k-th (count only).
    const bool whole = pass == kSampleRadixPasses - 1 || !met || chosen_count == 1 ||
                       (count_incl == k && !by_mass);
    if (whole) {
      kept_mass = mass_incl;
      return prefix > floor ? prefix : floor;
    }
    count_above = count_incl - chosen_count;
    mass_above = mass_incl - chosen_mass;
  }
  kept_mass = mass_above;
  return prefix > floor ? prefix : floor;
}

// The support's mass times scale (summed per lane in index order, then across lanes);
// `max` gets its maximum.
template <typename G>
inline float support_mass(const G& sg, const float* row, int32_t vocab, int lane, float scale,
                          float& max) {
  float lane_mass = 0.0f, lane_max = 0.0f;
  for (int32_t e = lane; e < vocab; e += kSampleLanes) {
    const float v = row[e];
    if (support_key(v) != 0u) {
      lane_mass += v * scale;
      lane_max = ::sycl::fmax(lane_max, v);
    }
  }
  max = ::sycl::reduce_over_group(sg, lane_max, ::sycl::maximum<float>());
  return ::sycl::reduce_over_group(sg, lane_mass, ::sycl::plus<float>());
}

// What a row keeps: top-k (k past the count: off), top-p (p >= 1: off), joint or top-k
// first, then min-p (0: off).
template <typename G>
inline KeptSet kept_set(const G& sg, const float* row, int32_t vocab, int lane, int64_t k, float p,
                        float min_p, bool joint) {
  // 1. The support's mass and maximum (the mass again, scaled, where out of range).
  float scale = 1.0f, max;
  float mass = support_mass(sg, row, vocab, lane, scale, max);
  if (mass > 0.0f && !(mass >= kMassLow && mass <= kMassHigh)) {  // uniform over the sub-group
    scale = mass_scale(max);
    mass = support_mass(sg, row, vocab, lane, scale, max);
  }

  // 2. Top-k and top-p.
  uint32_t floor = 1u;
  const bool by_k = k < vocab;
  const bool by_p = p < 1.0f;
  float kept = mass;
  if (mass > 0.0f) {
    if (joint && by_k && by_p) {
      floor = radix_threshold(sg, row, vocab, lane, 1u, scale, k, p * mass, kept);
    } else {
      if (by_k) floor = radix_threshold(sg, row, vocab, lane, 1u, scale, k, kNoTarget, kept);
      // p of the top-k mass (of the whole mass without top-k).
      if (by_p) {
        floor = radix_threshold(sg, row, vocab, lane, floor, scale, kNoCount, p * kept, kept);
      }
    }
  }
  // 3. Min-p: relative to the maximum, which every filter keeps.
  if (min_p > 0.0f) {
    const uint32_t min_key = support_key(min_p * max);
    if (min_key > floor) floor = min_key;
  }
  return {floor, scale};
}

// This lane's mass of the kept elements, and the masses of the lanes before it and of
// all lanes, summed in lane order (the same sums in every lane); in the set's units.
template <typename G>
inline float kept_mass(const G& sg, const float* row, int32_t vocab, int lane, KeptSet kept,
                       float& before, float& total) {
  float mine = 0.0f;
  for (int32_t e = lane; e < vocab; e += kSampleLanes) {
    const float v = row[e];
    if (support_key(v) >= kept.floor) mine += v * kept.scale;
  }
  before = total = 0.0f;
  for (int l = 0; l < kSampleLanes; ++l) {
    const float m = ::sycl::select_from_group(sg, mine, l);
    if (l < lane) before += m;
    total += m;
  }
  return mine;
}

// out = p * (1 / W) where kept, 0 elsewhere (W: the kept mass, p and W in the set's
// units, so 1 / W is finite; a row without support: zeros).
template <typename G>
inline void write_renormalized(const G& sg, const float* row, int32_t vocab, int lane, KeptSet kept,
                               float* out_row) {
  float before, total;
  kept_mass(sg, row, vocab, lane, kept, before, total);
  const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
  for (int32_t e = lane; e < vocab; e += kSampleLanes) {
    const float v = row[e];
    out_row[e] = support_key(v) >= kept.floor ? v * kept.scale * inverse : 0.0f;
  }
}

// Each row of probs kept to its top_k (top_k_per_row[row] if given) largest, renormalized.
template <typename K>
inline void top_k_renorm_probs(const float* probs, int64_t probs_stride, int32_t vocab,
                               int32_t top_k, const K* top_k_per_row, float* out,
                               int64_t out_stride) {
  const auto item = this_nd_item();
  const auto sg = item.get_sub_group();
  const int lane = static_cast<int>(sg.get_local_linear_id());
  const int64_t r = item.get_group(0);
  const float* row = probs + r * probs_stride;
  int64_t k = top_k_per_row != nullptr ? static_cast<int64_t>(top_k_per_row[r]) : top_k;
  if (k < 1) k = 1;
  const KeptSet kept = kept_set(sg, row, vocab, lane, k, 1.0f, 0.0f, false);
  write_renormalized(sg, row, vocab, lane, kept, out + r * out_stride);
}

// Each row of probs kept to its top_p (top_p_per_row[row] if given) nucleus, renormalized.
inline void top_p_renorm_probs(const float* probs, int64_t probs_stride, int32_t vocab, float top_p,
                               const float* top_p_per_row, float* out, int64_t out_stride) {
  const auto item = this_nd_item();
  const auto sg = item.get_sub_group();
  const int lane = static_cast<int>(sg.get_local_linear_id());
  const int64_t r = item.get_group(0);
  const float* row = probs + r * probs_stride;
  const float p = top_p_per_row != nullptr ? top_p_per_row[r] : top_p;
  const KeptSet kept = kept_set(sg, row, vocab, lane, kNoCount, p, 0.0f, false);
  write_renormalized(sg, row, vocab, lane, kept, out + r * out_stride);
}

// One sample per output row r, from row indices[r] of probs (row r without indices),
// filtered by its top-k, top-p and min-p; seed: (seed, offset) int64 pairs, row r's at
// r * seed_stride: one pair shared (seed_per_row 0, seed_stride 0: Philox subsequence r)
// or one a row (seed_per_row 1, any stride, 0 included: subsequence 0).
template <bool kJoint, typename K, typename I>
inline void sample_from_probs(const float* probs, int64_t probs_stride, int32_t vocab,
                              const I* indices, int32_t top_k, const K* top_k_per_row, float top_p,
                              const float* top_p_per_row, float min_p, const float* min_p_per_row,
                              const int64_t* seed, int64_t seed_stride, int32_t seed_per_row,
                              int32_t* out, int64_t out_stride) {
  const auto item = this_nd_item();
  const auto sg = item.get_sub_group();
  const int lane = static_cast<int>(sg.get_local_linear_id());
  const int64_t r = item.get_group(0);
  const int64_t source = indices != nullptr ? static_cast<int64_t>(indices[r]) : r;
  const float* row = probs + source * probs_stride;
  int64_t k = top_k_per_row != nullptr ? static_cast<int64_t>(top_k_per_row[r]) : top_k;
  if (k < 1) k = 1;
  const float p = top_p_per_row != nullptr ? top_p_per_row[r] : top_p;
  const float mp = min_p_per_row != nullptr ? min_p_per_row[r] : min_p;
  const KeptSet kept = kept_set(sg, row, vocab, lane, k, p, mp, kJoint);

  float before, total;
  const float mine = kept_mass(sg, row, vocab, lane, kept, before, total);
  const int64_t* row_seed = seed + r * seed_stride;
  const uint64_t subsequence = seed_per_row != 0 ? 0u : static_cast<uint64_t>(r);
  const float u = philox_uniform(static_cast<uint64_t>(row_seed[0]),
                                 static_cast<uint64_t>(row_seed[1]), subsequence);
  const float target = u * total;
  // The lane holding the target: the last lane with kept mass whose prefix is <= target.
  const int holder = ::sycl::reduce_over_group(sg, mine > 0.0f && before <= target ? lane : -1,
                                               ::sycl::maximum<int>());
  int32_t found = -1, last = -1;
  float running = before;
  for (int32_t e = lane; e < vocab; e += kSampleLanes) {
    const float v = row[e];
    if (support_key(v) >= kept.floor) {
      last = e;
      running += v * kept.scale;
      if (found < 0 && running > target) found = e;
    }
  }
  if (found < 0) found = last;  // rounding: the target at the lane's very end
  const int32_t picked = ::sycl::select_from_group(sg, found, holder < 0 ? 0 : holder);
  // A row without support (no positive finite probability kept) gives 0.
  if (lane == 0) out[r * out_stride] = holder < 0 || picked < 0 ? 0 : picked;
}

}  // namespace sycl_kernels
