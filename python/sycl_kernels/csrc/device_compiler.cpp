// csrc/device_compiler.cpp: the runtime kernel compiler (sycl_ext_oneapi_kernel_compiler) wrapped.
#include "device_compiler.hpp"

#include <cstdint>
#include <cstring>

namespace sycl_kernels {

namespace syclexp = sycl::ext::oneapi::experimental;

namespace {

constexpr uint32_t kSpirvMagic = 0x07230203u;

// Entry points of SPIR-V modules built from SYCL source carry this prefix.
constexpr const char* kSpirvEntryPrefix = "__sycl_kernel_";

}  // namespace

std::string image_format(const std::string& bytes) {
  uint32_t magic = 0;
  if (bytes.size() >= sizeof(magic)) std::memcpy(&magic, bytes.data(), sizeof(magic));
  return magic == kSpirvMagic ? "spirv" : "native";
}

DeviceImage compile_to_image(const sycl::context& context,
                             const std::vector<sycl::device>& devices,
                             const CompileRequest& request) {
  syclexp::include_files headers;
  for (const auto& [name, text] : request.headers) headers.add(name, text);

  auto source_bundle = syclexp::create_kernel_bundle_from_source(
      context, syclexp::source_language::sycl, request.source,
      syclexp::properties{headers});

  std::string log;
  auto build = [&] {
    try {
      return syclexp::build(source_bundle, devices,
                            syclexp::properties{syclexp::build_options{request.options},
                                                syclexp::save_log{&log}});
    } catch (const sycl::exception& e) {
      // On failure the diagnostics arrive in the exception text, not the log.
      throw CompileError("device compilation failed", log.empty() ? e.what() : log);
    }
  };
  const auto built = build();

  const auto images = std::distance(built.begin(), built.end());
  if (images != 1) {
    throw CompileError("the runtime compiler produced " + std::to_string(images) +
                           " device images, expected 1 (is -fsycl-device-code-split=off set?)",
                       log);
  }
  const std::vector<std::byte> content = built.begin()->ext_oneapi_get_backend_content();
  DeviceImage image;
  image.bytes.assign(reinterpret_cast<const char*>(content.data()), content.size());
  image.format = image_format(image.bytes);
  return image;
}

sycl::kernel_bundle<sycl::bundle_state::executable> load_image(
    const sycl::context& context, const std::vector<sycl::device>& devices,
    const std::string& bytes, const std::string& format) {
  if (format != "spirv" || image_format(bytes) != "spirv") {
    throw std::invalid_argument("load_image(): expected a SPIR-V image, got format '" +
                                format + "' (" + std::to_string(bytes.size()) + " bytes)");
  }
  std::vector<std::byte> spirv(bytes.size());
  std::memcpy(spirv.data(), bytes.data(), bytes.size());
  auto source_bundle = syclexp::create_kernel_bundle_from_source(
      context, syclexp::source_language::spirv, spirv);
  return syclexp::build(source_bundle, devices);
}

sycl::kernel get_kernel(sycl::kernel_bundle<sycl::bundle_state::executable> bundle,
                        const std::string& name) {
  for (const std::string& candidate : {std::string(kSpirvEntryPrefix) + name, name}) {
    if (bundle.ext_oneapi_has_kernel(candidate)) {
      return bundle.ext_oneapi_get_kernel(candidate);
    }
  }
  throw std::invalid_argument("the device image has no kernel named '" + name + "'");
}

std::string runtime_version() {
  return "libsycl " + std::to_string(__LIBSYCL_MAJOR_VERSION) + "." +
         std::to_string(__LIBSYCL_MINOR_VERSION) + "." +
         std::to_string(__LIBSYCL_PATCH_VERSION) + " (compiler " +
         std::to_string(__SYCL_COMPILER_VERSION) + ")";
}

}  // namespace sycl_kernels
