// csrc/device_compiler.hpp: SYCL source -> device image -> executable bundle.
//
// Free of Python so the ahead-of-time build tool links the very same code the
// host module uses.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <sycl/sycl.hpp>

namespace sycl_kernels {

struct CompileRequest {
  std::string source;
  std::vector<std::pair<std::string, std::string>> headers;  // (include name, text)
  std::vector<std::string> options;
};

struct DeviceImage {
  std::string bytes;
  std::string format;  // "spirv" or "native"
};

// Thrown when the runtime compiler rejects a source; its message ends with the build log.
class CompileError : public std::runtime_error {
 public:
  CompileError(const std::string& what, const std::string& log)
      : std::runtime_error(what + ":\n" + log) {}
};

// Tells SPIR-V from native code by the module's magic number.
std::string image_format(const std::string& bytes);

DeviceImage compile_to_image(const sycl::context& context, const std::vector<sycl::device>& devices,
                             const CompileRequest& request);

// One kernel's SPIR-V image, `kernel` its extern "C" name.
struct KernelImage {
  std::string kernel;
  std::string bytes;
};

// One SPIR-V image per kernel `request` defines, from one compile: the AOT build
// compiles many variants in one process, and each is still loaded on its own (a
// fresh process pays the SPIR-V -> native step of what it loads, kernel by kernel).
// Without `device_build` the source is compiled to SPIR-V only, the device's code
// generation left to whoever loads an image; that needs an OpenCL device (the CPU
// device), whose programs hand their SPIR-V back. With it each image is also built
// for `device`, as compile_to_image does, so a backend failure shows here.
std::vector<KernelImage> compile_per_kernel(const sycl::context& context,
                                            const sycl::device& device,
                                            const CompileRequest& request, bool device_build);

sycl::kernel_bundle<sycl::bundle_state::executable> load_image(
    const sycl::context& context, const std::vector<sycl::device>& devices,
    const std::string& bytes, const std::string& format);

// Looks an extern "C" kernel up by its source name in a loaded image.
sycl::kernel get_kernel(sycl::kernel_bundle<sycl::bundle_state::executable> bundle,
                        const std::string& name);

// Version of the SYCL runtime the device compiler belongs to,
// e.g. "libsycl 8.0.0 (compiler 20260319)".
std::string runtime_version();

}  // namespace sycl_kernels
