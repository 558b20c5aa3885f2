// csrc/native_binary.cpp: picks the backend of csrc/native_binary.hpp.
#include "native_binary.hpp"

#include "native_backend.hpp"

namespace sycl_kernels {

sycl::kernel NativeProgram::get(const std::string& name) const {
  for (const std::string& entry : {std::string(kSpirvEntryPrefix) + name, name}) {
    if (std::optional<sycl::kernel> kernel = find(entry)) return *kernel;
  }
  throw std::invalid_argument("the native binary has no kernel named '" + name + "'");
}

std::shared_ptr<NativeProgram> load_native(const sycl::context& context, const sycl::device& device,
                                           const std::string& binary) {
  switch (context.get_backend()) {
    case sycl::backend::opencl: return opencl_load_native(context, device, binary);
#ifdef SYCL_KERNELS_LEVEL_ZERO
    case sycl::backend::ext_oneapi_level_zero:
      return level_zero_load_native(context, device, binary);
#endif
    default:
      throw std::invalid_argument("this build loads no native binaries on the device's backend");
  }
}

std::string native_binary(const ExecutableBundle& bundle) {
  switch (bundle.get_backend()) {
    case sycl::backend::opencl: return opencl_native_binary(bundle);
#ifdef SYCL_KERNELS_LEVEL_ZERO
    case sycl::backend::ext_oneapi_level_zero: return level_zero_native_binary(bundle);
#endif
    default: return {};
  }
}

std::vector<std::string> native_backends() {
#ifdef SYCL_KERNELS_LEVEL_ZERO
  return {"opencl", "level_zero"};
#else
  return {"opencl"};
#endif
}

}  // namespace sycl_kernels
