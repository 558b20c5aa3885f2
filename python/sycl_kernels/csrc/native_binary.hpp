// csrc/native_binary.hpp: a loaded image's device-native binary, and loading one back.
//
// The SPIR-V -> native step costs ~100 ms a kernel on the CPU device (more on a
// GPU) in every fresh process; keeping the device's own binary skips it. OpenCL
// (the CPU device) is always built; Level Zero (Intel GPUs) is built where
// level_zero/ze_api.h is found (Debian's libze-dev: the runtime wheels do not ship
// it), otherwise that backend reports "no native binary" and keeps loading SPIR-V.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sycl/sycl.hpp>

namespace sycl_kernels {

// A program built from a native binary; its kernels are made from the backend's objects.
class NativeProgram {
 public:
  virtual ~NativeProgram() = default;

  // Kernel `name`, under the entry-point name SYCL gave it in SPIR-V or as is.
  sycl::kernel get(const std::string& name) const;

 protected:
  // The kernel with this exact entry point, or nothing.
  virtual std::optional<sycl::kernel> find(const std::string& entry) const = 0;
};

// Loads a binary that native_binary() gave for this device and driver.
std::shared_ptr<NativeProgram> load_native(const sycl::context& context, const sycl::device& device,
                                           const std::string& binary);

// The native binary of `bundle` for its one device, or "" where the backend cannot give it.
std::string native_binary(const sycl::kernel_bundle<sycl::bundle_state::executable>& bundle);

// The backends this build gives native binaries on ("opencl", "level_zero").
std::vector<std::string> native_backends();

}  // namespace sycl_kernels
