// kernels/cache/gather.hpp: the paged KV-cache gather: each sequence's tokens read from
// a block cache, through its block table, into rows of a contiguous destination;
// copied, or dequantized from fp8 e4m3 with a scale.
//
// Destination row r belongs to the sequence b with cu_seq_lens[b] <= r <
// cu_seq_lens[b + 1] (a binary search over cu_seq_lens, non-decreasing); it is token
// pos = r - cu_seq_lens[b] + seq_starts[b] (seq_starts null: 0) of that sequence, at
// block block_table[b * block_table_stride + pos / block_size], page pos % block_size:
//   src_cache + block * cache_block_stride + page * cache_page_stride   (kWidth elements)
//   dst + r * dst_token_stride                                          (kWidth elements)
// A row outside every sequence, a negative pos, a block-table column at or past
// max_blocks, or a block id outside [0, num_blocks) is not written (the host checks
// CPU tensors before the launch, so there that never happens; on an XPU nothing is
// read or written out of bounds).
//
// kDequant: C is fp8e4m3, each value written as T(float(c) * scale), scale the float
// the pointer holds, rounded once (vLLM's gather_and_maybe_dequant_cache). Otherwise
// C and T are one unsigned type of the element's size: a copy, bit for bit.
//
// A work-group gathers kRows consecutive destination rows (below rows), one after
// another, kThreads work-items over each.
#pragma once

#include "../common/dtype.hpp"
#include "../common/loop.hpp"
#include "../quant/convert.hpp"

namespace sycl_kernels {

// torch's float8_e4m3fn -> float (exact): 0x7f and 0xff are NaN, exponent 0 subnormal.
inline float fp8e4m3_to_float(fp8e4m3 v) {
  const uint32_t b = v.bits;
  const uint32_t sign = (b & 0x80u) << 24;
  const uint32_t exponent = (b >> 3) & 0xfu;
  const uint32_t mantissa = b & 0x7u;
  const uint32_t normal = ((exponent + 120u) << 23) | (mantissa << 20);
  const uint32_t subnormal = ::sycl::bit_cast<uint32_t>(static_cast<float>(mantissa) * 0x1p-9f);
  const uint32_t magnitude = (b & 0x7fu) == 0x7fu ? 0x7fc00000u
                             : exponent == 0u     ? subnormal
                                                  : normal;
  return ::sycl::bit_cast<float>(sign | magnitude);
}

// The sequence of destination row `row`: the last b in [0, batch) with
// cu_seq_lens[b] <= row, or -1 if there is none or the row is past its end.
inline int64_t gather_sequence_of(const int32_t* cu_seq_lens, int64_t batch, int64_t row) {
  int64_t low = 0, high = batch + 1;  // the first index with cu_seq_lens[i] > row
  while (low < high) {
    const int64_t mid = (low + high) / 2;
    if (static_cast<int64_t>(cu_seq_lens[mid]) <= row) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  const int64_t b = low - 1;
  if (b < 0 || b >= batch || row >= static_cast<int64_t>(cu_seq_lens[b + 1])) return -1;
  return b;
}

// One destination row: copied or dequantized, or left alone (module comment).
template <typename C, typename T, int kWidth, int kThreads, bool kDequant>
inline void gather_row(int tid, int64_t row, const C* src_cache, T* dst, const int32_t* block_table,
                       const int32_t* cu_seq_lens, const int32_t* seq_starts, float factor,
                       int64_t batch, int64_t num_blocks, int64_t block_size, int64_t max_blocks,
                       int64_t block_table_stride, int64_t cache_block_stride,
                       int64_t cache_page_stride, int64_t dst_token_stride) {
  // Everything up to the copy is uniform over the work-group.
  const int64_t b = gather_sequence_of(cu_seq_lens, batch, row);
  if (b < 0) return;
  const int64_t start = seq_starts == nullptr ? 0 : static_cast<int64_t>(seq_starts[b]);
  const int64_t pos = row - static_cast<int64_t>(cu_seq_lens[b]) + start;
  if (pos < 0) return;
  const int64_t column = pos / block_size;
  if (column >= max_blocks) return;
  const int64_t block = static_cast<int64_t>(block_table[b * block_table_stride + column]);
  if (block < 0 || block >= num_blocks) return;
  const C* src = src_cache + block * cache_block_stride + (pos % block_size) * cache_page_stride;
  T* out = dst + row * dst_token_stride;
  for_each_strided<kWidth, kThreads>(tid, [&](int d) {
    if constexpr (kDequant) {
      out[d] = from_float<T>(fp8e4m3_to_float(src[d]) * factor);
    } else {
      out[d] = src[d];
    }
  });
}

template <typename C, typename T, int kWidth, int kThreads, int kRows, bool kDequant>
inline void gather_kv(const C* src_cache, T* dst, const int32_t* block_table,
                      const int32_t* cu_seq_lens, const int32_t* seq_starts, const float* scale,
                      int64_t rows, int64_t batch, int64_t num_blocks, int64_t block_size,
                      int64_t max_blocks, int64_t block_table_stride, int64_t cache_block_stride,
                      int64_t cache_page_stride, int64_t dst_token_stride) {
  const ::sycl::nd_item<1> item = this_nd_item();
  const int64_t first = static_cast<int64_t>(item.get_group(0)) * kRows;
  const int tid = static_cast<int>(item.get_local_id(0));
  float factor = 1.0f;
  if constexpr (kDequant) factor = *scale;
  for (int r = 0; r < kRows && first + r < rows; ++r) {
    gather_row<C, T, kWidth, kThreads, kDequant>(
        tid, first + r, src_cache, dst, block_table, cu_seq_lens, seq_starts, factor, batch,
        num_blocks, block_size, max_blocks, block_table_stride, cache_block_stride,
        cache_page_stride, dst_token_stride);
  }
}

}  // namespace sycl_kernels
