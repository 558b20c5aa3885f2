// csrc/live_count.hpp: counts of live host-module objects, so tests can show that
// repeated launches create none that outlive the call.
#pragma once

#include <atomic>
#include <cstddef>

namespace sycl_kernels {

// A base that counts the live instances of `T` (copies and moves included).
template <typename T>
class LiveCount {
 public:
  static size_t live() { return count_.load(std::memory_order_relaxed); }

 protected:
  LiveCount() { count_.fetch_add(1, std::memory_order_relaxed); }
  LiveCount(const LiveCount&) : LiveCount() {}
  LiveCount& operator=(const LiveCount&) = default;
  ~LiveCount() { count_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  static inline std::atomic<size_t> count_{0};
};

}  // namespace sycl_kernels
