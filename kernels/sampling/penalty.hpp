// kernels/sampling/penalty.hpp: repetition, frequency and presence penalties on rows of logits.
//
// apply_penalties, in place on logits [rows, vocab] (unit element stride, row stride
// logits_stride), element i of row r, in float32:
//   seen     = prompt_mask[r, i] != 0 (kPrompt) || count > 0
//   count    = output[r, i] (kOutput: a 0/1 mask or a token count), else 0
//   x        = seen ? (x > 0 ? x / rep : x * rep) : x
//   x        = x - freq * count           (kOutput only)
//   x        = x - pres * (count > 0)     (kOutput only)
// each step its own statement (no contraction into a fused multiply-add), so float32
// logits get exactly vLLM's sequence of float32 operations; then rounded once to T.
// rep, freq, pres: the row's value of the penalty tensor (P, element r * stride) or,
// where the tensor is absent (null), the scalar.
//
// Work-group per (row, tile of kTile elements); kThreads work-items over the tile,
// consecutive elements on consecutive work-items. The last tile of a row is guarded.
//
// repetition_penalty_by_ids: out[r, ids[r, j]] = penalize(logits[r, ids[r, j]]) for
// every id in [0, vocab) (others skipped), as Hugging Face's gather / scatter: the
// value is read from logits (out starts as its copy, made by the host), so an id
// listed twice writes the same value twice. Work-group per (row, kThreads ids).
#pragma once

#include <cstdint>

#include "../common/device.hpp"
#include "../common/dtype.hpp"

namespace sycl_kernels {

// The row's penalty: the tensor's element when given, else the scalar.
template <typename P>
inline float row_penalty(const P* penalties, int64_t stride, float scalar, int64_t row) {
  return penalties != nullptr ? to_float(penalties[row * stride]) : scalar;
}

// x > 0 ? x / penalty : x * penalty (Hugging Face's x < 0 ? x * penalty : x / penalty
// gives the same for every x, signed zeros and NaN included).
inline float repetition_penalized(float x, float penalty) {
  const float divided = x / penalty;
  const float multiplied = x * penalty;
  return x > 0.0f ? divided : multiplied;
}

template <typename T, typename C, bool kPrompt, bool kOutput>
inline void penalize_element(T* row, const uint8_t* prompt, const C* output, int64_t i, float rep,
                             float freq, float pres) {
  float x = to_float(row[i]);
  float count = 0.0f;
  if constexpr (kOutput) count = static_cast<float>(output[i]);
  bool seen = count > 0.0f;
  if constexpr (kPrompt) seen = seen || prompt[i] != 0;
  const float penalized = repetition_penalized(x, rep);
  x = seen ? penalized : x;
  if constexpr (kOutput) {
    const float frequency = freq * count;
    x = x - frequency;
    const float presence = pres * (count > 0.0f ? 1.0f : 0.0f);
    x = x - presence;
  }
  row[i] = from_float<T>(x);
}

template <typename T, typename P, typename C, bool kPrompt, bool kOutput, int kTile, int kThreads>
inline void apply_penalties(T* logits, int64_t logits_stride, int64_t vocab, int64_t tiles,
                            const uint8_t* prompt_mask, int64_t prompt_mask_stride, const C* output,
                            int64_t output_stride, const P* repetition_penalties,
                            int64_t repetition_stride, float repetition_penalty,
                            const P* frequency_penalties, int64_t frequency_stride,
                            float frequency_penalty, const P* presence_penalties,
                            int64_t presence_stride, float presence_penalty) {
  static_assert(kTile % kThreads == 0, "whole steps");
  const ::sycl::nd_item<1> item = this_nd_item();
  const int64_t group = static_cast<int64_t>(item.get_group(0));
  const int tid = static_cast<int>(item.get_local_id(0));
  const int64_t r = group / tiles;
  const int64_t start = (group % tiles) * kTile;
  const float rep = row_penalty(repetition_penalties, repetition_stride, repetition_penalty, r);
  const float freq = row_penalty(frequency_penalties, frequency_stride, frequency_penalty, r);
  const float pres = row_penalty(presence_penalties, presence_stride, presence_penalty, r);
  T* row = logits + r * logits_stride + start;
  const uint8_t* prompt = kPrompt ? prompt_mask + r * prompt_mask_stride + start : nullptr;
  const C* counts = kOutput ? output + r * output_stride + start : nullptr;
  constexpr int kSteps = kTile / kThreads;
  if (start + kTile <= vocab) {  // uniform over the work-group
#pragma unroll 4
    for (int step = 0; step < kSteps; ++step) {
      penalize_element<T, C, kPrompt, kOutput>(row, prompt, counts, step * kThreads + tid, rep,
                                               freq, pres);
    }
  } else {
    const int64_t rest = vocab - start;
    for (int step = 0; step < kSteps; ++step) {
      const int64_t i = step * kThreads + tid;
      if (i < rest) {
        penalize_element<T, C, kPrompt, kOutput>(row, prompt, counts, i, rep, freq, pres);
      }
    }
  }
}

template <typename T, typename P, typename I, int kThreads>
inline void repetition_penalty_by_ids(const T* logits, int64_t logits_stride, const I* input_ids,
                                      int64_t ids_stride, int64_t num_ids, int64_t id_tiles,
                                      int64_t vocab, const P* repetition_penalties,
                                      int64_t repetition_stride, float repetition_penalty, T* out,
                                      int64_t out_stride) {
  const ::sycl::nd_item<1> item = this_nd_item();
  const int64_t group = static_cast<int64_t>(item.get_group(0));
  const int64_t r = group / id_tiles;
  const int64_t j = (group % id_tiles) * kThreads + static_cast<int64_t>(item.get_local_id(0));
  if (j >= num_ids) return;
  const int64_t id = static_cast<int64_t>(input_ids[r * ids_stride + j]);
  if (id < 0 || id >= vocab) return;
  const float rep = row_penalty(repetition_penalties, repetition_stride, repetition_penalty, r);
  const float x = to_float(logits[r * logits_stride + id]);
  out[r * out_stride + id] = from_float<T>(repetition_penalized(x, rep));
}

}  // namespace sycl_kernels
