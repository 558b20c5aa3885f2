// csrc/native_binary.hpp: a loaded image's device-native binary, and loading one back.
//
// The SPIR-V -> native step costs ~100 ms a kernel on the CPU device (more on a
// GPU) in every fresh process; keeping the device's own binary skips it. Wired for
// the OpenCL backend (the CPU device). Level Zero would go through
// zeModuleGetNativeBinary and a module created from ZE_MODULE_FORMAT_NATIVE behind
// these same two functions; the runtime wheels ship no level_zero/ze_api.h, so that
// backend reports "no native binary" and keeps loading SPIR-V.
#pragma once

#include <string>
#include <vector>

#include <sycl/sycl.hpp>

namespace sycl_kernels {

// A bundle built from a native binary; its kernels are made from the backend's program.
class NativeProgram {
 public:
  NativeProgram(const sycl::context& context, const sycl::device& device,
                const std::string& binary);
  NativeProgram(const NativeProgram&) = delete;
  NativeProgram& operator=(const NativeProgram&) = delete;
  ~NativeProgram();

  sycl::kernel get(const std::string& name) const;

 private:
  sycl::context context_;
  void* program_;  // cl_program
};

// The native binary of `bundle` for its one device, or "" where the backend cannot give it.
std::string native_binary(const sycl::kernel_bundle<sycl::bundle_state::executable>& bundle);

}  // namespace sycl_kernels
