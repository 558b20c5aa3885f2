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

DeviceImage compile_to_image(const sycl::context& context,
                             const std::vector<sycl::device>& devices,
                             const CompileRequest& request);

sycl::kernel_bundle<sycl::bundle_state::executable> load_image(
    const sycl::context& context, const std::vector<sycl::device>& devices,
    const std::string& bytes, const std::string& format);

// Looks an extern "C" kernel up by its source name in a loaded image.
sycl::kernel get_kernel(sycl::kernel_bundle<sycl::bundle_state::executable> bundle,
                        const std::string& name);

// Version of the SYCL runtime the device compiler belongs to, e.g. "libsycl 8.0.0 (compiler 20260319)".
std::string runtime_version();

}  // namespace sycl_kernels
