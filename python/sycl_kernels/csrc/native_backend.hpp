// csrc/native_backend.hpp: what each backend of csrc/native_binary.hpp implements.
#pragma once

#include <dlfcn.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "native_binary.hpp"

namespace sycl_kernels {

// Entry points of SPIR-V modules built from SYCL source carry this prefix.
inline constexpr const char* kSpirvEntryPrefix = "__sycl_kernel_";

// Driver entry points are looked up in the library the runtime's adapter already
// loaded, not linked: a build against a fetched runtime line has nothing to link,
// and a process on another backend never needs the library.
inline void* open_driver_library(const char* soname) {
  void* library = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) library = dlopen(soname, RTLD_NOW);
  if (library == nullptr) throw std::runtime_error(std::string(soname) + " cannot be loaded");
  return library;
}

template <typename F>
void bind(void* library, const char* name, F& function) {
  function = reinterpret_cast<F>(dlsym(library, name));
  if (function == nullptr) throw std::runtime_error(std::string("no driver entry point ") + name);
}

using ExecutableBundle = sycl::kernel_bundle<sycl::bundle_state::executable>;

std::string opencl_native_binary(const ExecutableBundle& bundle);
std::shared_ptr<NativeProgram> opencl_load_native(const sycl::context& context,
                                                  const sycl::device& device,
                                                  const std::string& binary);

#ifdef SYCL_KERNELS_LEVEL_ZERO
std::string level_zero_native_binary(const ExecutableBundle& bundle);
std::shared_ptr<NativeProgram> level_zero_load_native(const sycl::context& context,
                                                      const sycl::device& device,
                                                      const std::string& binary);
#endif

}  // namespace sycl_kernels
