// kernels/cache/store.hpp: the paged KV-cache store: rows of new tokens written into a
// block cache at their slots, copied or quantized to fp8 e4m3 with a scale.
//
// Two streams, a and b (a key and a value, or MLA's kv_c and k_pe), each row of
// kWidthA / kWidthB elements of T: source row (token, head) at
// src + token * token_stride + head * head_stride (unit element stride). Its
// destination, for slot = slot_mapping[token] (block = slot / block_size,
// offset = slot % block_size), element d:
//   cache + block * block_stride + offset * page_stride + head * head_stride
//         + (d / kX) * x_stride + d % kX
// kX == kWidth is the flash layout ([blocks, block_size, heads, head_size], any
// strides but a unit last one); vLLM's split layout puts d / x in a dimension of
// its own (x_stride). A slot below 0 stores nothing (padding); so does one at or
// past num_slots (the host range-checks CPU slot mappings before the launch, so
// there that never happens; on an XPU it is skipped, never written outside).
//
// kFp8: C is fp8e4m3, each value stored as fp8(clamp(x / scale, -448, 448)), scale
// the float the stream's scale pointer holds (vLLM's convention: divide by the
// scale), rounded to nearest even as torch's cast. Otherwise C is T, copied.
//
// A work-group stores rows_per_group consecutive (token, head) rows of the `rows`
// (tokens * heads), one after another, kThreads work-items over each.
#pragma once

#include "../common/dtype.hpp"
#include "../common/loop.hpp"
#include "../quant/convert.hpp"

namespace sycl_kernels {

struct CacheStream {
  int64_t token_stride, head_stride;
  int64_t block_stride, page_stride, cache_head_stride, x_stride;
};

template <typename T, typename C, int kWidth, int kX, int kThreads, bool kFp8>
inline void store_row(int tid, const T* src, C* cache, const float* scale, CacheStream at,
                      int64_t token, int64_t head, int64_t block, int64_t offset) {
  static_assert(kWidth % kX == 0, "x divides the head size");
  const T* row = src + token * at.token_stride + head * at.head_stride;
  C* dst = cache + block * at.block_stride + offset * at.page_stride + head * at.cache_head_stride;
  float divisor = 1.0f;
  if constexpr (kFp8) divisor = *scale;
  for_each_strided<kWidth, kThreads>(tid, [&](int d) {
    C* out = dst + (kX == kWidth ? d : (d / kX) * at.x_stride + d % kX);
    if constexpr (kFp8) {
      *out = Quantize<fp8e4m3>::from(to_float(row[d]) / divisor);
    } else {
      *out = row[d];
    }
  });
}

template <typename T, typename C, int kWidthA, int kWidthB, int kXA, int kXB, int kThreads,
          bool kFp8>
inline void store_kv(const int64_t* slot_mapping, int64_t rows, int64_t rows_per_group,
                     int64_t num_heads, int64_t num_slots, int64_t block_size, const T* key,
                     int64_t key_token_stride, int64_t key_head_stride, C* key_cache,
                     int64_t key_cache_block_stride, int64_t key_cache_page_stride,
                     int64_t key_cache_head_stride, int64_t key_cache_x_stride,
                     const float* k_scale, const T* value, int64_t value_token_stride,
                     int64_t value_head_stride, C* value_cache, int64_t value_cache_block_stride,
                     int64_t value_cache_page_stride, int64_t value_cache_head_stride,
                     int64_t value_cache_x_stride, const float* v_scale) {
  const ::sycl::nd_item<1> item = this_nd_item();
  const int tid = static_cast<int>(item.get_local_id(0));
  const int64_t first = static_cast<int64_t>(item.get_group(0)) * rows_per_group;
  const int64_t end = ::sycl::min(first + rows_per_group, rows);
  for (int64_t index = first; index < end; ++index) {
    const int64_t token = index / num_heads;
    const int64_t head = index % num_heads;
    const int64_t slot = slot_mapping[token];
    if (slot < 0 || slot >= num_slots) continue;  // uniform over the work-group
    const int64_t block = slot / block_size;
    const int64_t offset = slot % block_size;
    store_row<T, C, kWidthA, kXA, kThreads, kFp8>(
        tid, key, key_cache, k_scale,
        {key_token_stride, key_head_stride, key_cache_block_stride, key_cache_page_stride,
         key_cache_head_stride, key_cache_x_stride},
        token, head, block, offset);
    store_row<T, C, kWidthB, kXB, kThreads, kFp8>(
        tid, value, value_cache, v_scale,
        {value_token_stride, value_head_stride, value_cache_block_stride, value_cache_page_stride,
         value_cache_head_stride, value_cache_x_stride},
        token, head, block, offset);
  }
}

}  // namespace sycl_kernels
