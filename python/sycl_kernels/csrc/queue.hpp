// csrc/queue.hpp: a SYCL queue the package owns, or one borrowed from torch by address.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

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
    return Queue(std::move(owned), raw, device.get_info<sycl::info::device::max_compute_units>());
  }

  // A `sycl::queue*` owned by someone else (torch.xpu streams); launches on it
  // stay asynchronous, ordered by the stream.
  static Queue borrow(uintptr_t address) {
    if (address == 0) throw std::invalid_argument("Queue.borrow(): address is 0");
    return Queue(nullptr, reinterpret_cast<sycl::queue*>(address), 0);
  }

  sycl::queue& get() const { return *queue_; }
  uintptr_t address() const { return reinterpret_cast<uintptr_t>(queue_); }
  bool blocking() const { return owned_ != nullptr; }

  // Waits for `done`, a launch of `work_groups` work-groups. While the launch leaves
  // a compute unit idle, the calling thread first polls the event on it for up to
  // kPollFor: a blocking wait's wake-up was about half of a 1 x 64 rmsnorm call on
  // the CPU device (22-25 us a call, 13 us polling). Launches that fill the device
  // wait blocked at once: polling took a core from their work-groups (16-token
  // calls 1.1-1.4x slower).
  void wait(sycl::event done, size_t work_groups) const {
    if (work_groups < compute_units_) {
      const auto deadline = std::chrono::steady_clock::now() + kPollFor;
      while (done.get_info<sycl::info::event::command_execution_status>() !=
                 sycl::info::event_command_status::complete &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
    }
    done.wait_and_throw();
  }

 private:
  static constexpr std::chrono::microseconds kPollFor{20};

  Queue(std::shared_ptr<sycl::queue> owned, sycl::queue* queue, size_t compute_units)
      : owned_(std::move(owned)), queue_(queue), compute_units_(compute_units) {}

  std::shared_ptr<sycl::queue> owned_;
  sycl::queue* queue_;
  size_t compute_units_;  // of a queue the package owns; 0 for a borrowed one
};

}  // namespace sycl_kernels
