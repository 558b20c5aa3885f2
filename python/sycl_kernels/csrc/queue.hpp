// csrc/queue.hpp: a SYCL queue the package owns, or one borrowed from torch by address.
#pragma once

#include <cstdint>
#include <memory>

#include <sycl/sycl.hpp>

#include "live_count.hpp"

namespace sycl_kernels {

class Queue : public LiveCount<Queue> {
 public:
  // An in-order queue on `device`; launches on it wait for completion, as
  // torch CPU ops are synchronous.
  static Queue create(const sycl::device& device) {
    auto owned = std::make_shared<sycl::queue>(device, sycl::property::queue::in_order());
    sycl::queue* raw = owned.get();
    return Queue(std::move(owned), raw);
  }

  // A `sycl::queue*` owned by someone else (torch.xpu streams); launches on it
  // stay asynchronous, ordered by the stream.
  static Queue borrow(uintptr_t address) {
    if (address == 0) throw std::invalid_argument("Queue.borrow(): address is 0");
    return Queue(nullptr, reinterpret_cast<sycl::queue*>(address));
  }

  sycl::queue& get() const { return *queue_; }
  uintptr_t address() const { return reinterpret_cast<uintptr_t>(queue_); }
  bool blocking() const { return owned_ != nullptr; }

 private:
  Queue(std::shared_ptr<sycl::queue> owned, sycl::queue* queue)
      : owned_(std::move(owned)), queue_(queue) {}

  std::shared_ptr<sycl::queue> owned_;
  sycl::queue* queue_;
};

}  // namespace sycl_kernels
