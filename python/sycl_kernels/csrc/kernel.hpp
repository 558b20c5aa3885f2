// csrc/kernel.hpp: device images loaded on a queue's device, their kernels launched with typed
// arguments.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "device_compiler.hpp"
#include "live_count.hpp"
#include "native_binary.hpp"
#include "queue.hpp"

namespace sycl_kernels {

// One kernel argument; `kind` is its signature letter:
// 'p' pointer, 'i' int32, 'l' int64, 'f' float32, 'd' float64.
struct KernelArg {
  char kind;
  union {
    void* p;
    int32_t i;
    int64_t l;
    float f;
    double d;
  };
};

// A device image built for one queue's device, from SPIR-V or from the device's
// native binary (csrc/native_binary.hpp); kernels are looked up in it by name.
class Bundle : public LiveCount<Bundle> {
 public:
  Bundle(const Queue& queue, const std::string& image, const std::string& format)
      : bundle_(load_image(queue.get().get_context(), {queue.get().get_device()}, image, format)) {}

  // From native_binary() of a bundle built earlier for the same device and driver.
  static Bundle from_native(const Queue& queue, const std::string& binary) {
    return Bundle(load_native(queue.get().get_context(), queue.get().get_device(), binary));
  }

  sycl::kernel get(const std::string& name) const {
    return native_ ? native_->get(name) : get_kernel(*bundle_, name);
  }

  // The device's native binary of this bundle; "" where the backend gives none.
  std::string native_binary() const {
    return bundle_ ? sycl_kernels::native_binary(*bundle_) : std::string();
  }

 private:
  explicit Bundle(std::shared_ptr<NativeProgram> native) : native_(std::move(native)) {}

  std::optional<sycl::kernel_bundle<sycl::bundle_state::executable>> bundle_;
  std::shared_ptr<NativeProgram> native_;
};

class Kernel : public LiveCount<Kernel> {
 public:
  // `group_size` is the work-group size the kernel was compiled for, 0 if any.
  Kernel(const Bundle& bundle, const std::string& name, std::string signature, size_t group_size)
      : name_(name),
        signature_(std::move(signature)),
        group_size_(group_size),
        kernel_(bundle.get(name)) {
    for (char kind : signature_) {
      if (std::string("pilfd").find(kind) == std::string::npos) {
        throw std::invalid_argument("Kernel(): signature '" + signature_ +
                                    "' has an unknown letter '" + kind +
                                    "' (expected p, i, l, f or d)");
      }
    }
  }

  const std::string& name() const { return name_; }
  const std::string& signature() const { return signature_; }
  size_t group_size() const { return group_size_; }

  void launch(const Queue& queue, size_t global_size, size_t local_size,
              const std::vector<KernelArg>& args) const {
    sycl::queue& q = queue.get();
    sycl::event done = q.submit([&](sycl::handler& h) {
      for (size_t index = 0; index < args.size(); ++index) {
        const KernelArg& a = args[index];
        switch (a.kind) {
          case 'p': h.set_arg(static_cast<int>(index), a.p); break;
          case 'i': h.set_arg(static_cast<int>(index), a.i); break;
          case 'l': h.set_arg(static_cast<int>(index), a.l); break;
          case 'f': h.set_arg(static_cast<int>(index), a.f); break;
          default: h.set_arg(static_cast<int>(index), a.d); break;
        }
      }
      h.parallel_for(sycl::nd_range<1>(global_size, local_size), kernel_);
    });
    if (queue.blocking()) queue.wait(done, global_size / local_size);
  }

 private:
  std::string name_;
  std::string signature_;
  size_t group_size_;
  sycl::kernel kernel_;
};

}  // namespace sycl_kernels
