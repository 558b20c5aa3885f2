// csrc/device_compiler.cpp: the runtime kernel compiler (sycl_ext_oneapi_kernel_compiler) wrapped.
#include "device_compiler.hpp"

#include <cstdint>
#include <cstring>

// The OpenCL 3.0 API, as the runtime's own headers assume (for CL_PROGRAM_IL).
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <sycl/backend/opencl.hpp>

#include "native_backend.hpp"

namespace sycl_kernels {

namespace syclexp = sycl::ext::oneapi::experimental;

namespace {

constexpr uint32_t kSpirvMagic = 0x07230203u;

sycl::kernel_bundle<sycl::bundle_state::ext_oneapi_source> sycl_source(
    const sycl::context& context, const CompileRequest& request) {
  syclexp::include_files headers;
  for (const auto& [name, text] : request.headers) headers.add(name, text);
  return syclexp::create_kernel_bundle_from_source(context, syclexp::source_language::sycl,
                                                   request.source, syclexp::properties{headers});
}

// Runs `compile` (a build or compile of the source) with its diagnostics in `log`.
template <typename Compile>
auto run_compiler(Compile compile, std::string& log) {
  try {
    return compile();
  } catch (const sycl::exception& e) {
    // On failure the diagnostics arrive in the exception text, not the log.
    throw CompileError("device compilation failed", log.empty() ? e.what() : log);
  }
}

// The extern "C" names of a SPIR-V module's entry points (OpEntryPoint instructions).
std::vector<std::string> entry_points(const std::string& spirv) {
  constexpr uint32_t kOpEntryPoint = 15;
  constexpr size_t kHeaderWords = 5;
  std::vector<uint32_t> words(spirv.size() / sizeof(uint32_t));
  std::memcpy(words.data(), spirv.data(), words.size() * sizeof(uint32_t));
  std::vector<std::string> names;
  for (size_t at = kHeaderWords; at < words.size();) {
    const uint32_t count = words[at] >> 16;
    if (count == 0 || at + count > words.size()) {
      throw std::runtime_error("malformed SPIR-V module (an instruction overruns it)");
    }
    // OpEntryPoint <execution model> <function id> <name, a nul-terminated string> ...
    if ((words[at] & 0xffffu) == kOpEntryPoint && count > 3) {
      const char* text = reinterpret_cast<const char*>(&words[at + 3]);
      std::string name(text, strnlen(text, (count - 3) * sizeof(uint32_t)));
      if (name.rfind(kSpirvEntryPrefix, 0) == 0) name.erase(0, std::strlen(kSpirvEntryPrefix));
      names.push_back(std::move(name));
    }
    at += count;
  }
  return names;
}

struct OpenClPrograms {
  decltype(&clGetProgramInfo) get_info = nullptr;
  decltype(&clReleaseProgram) release = nullptr;
};

const OpenClPrograms& opencl_programs() {
  static const OpenClPrograms api = [] {
    void* library = open_driver_library("libOpenCL.so.1");
    OpenClPrograms a;
    bind(library, "clGetProgramInfo", a.get_info);
    bind(library, "clReleaseProgram", a.release);
    return a;
  }();
  return api;
}

// The SPIR-V of each program of a compiled (not built) bundle. SYCL gives a device
// image's SPIR-V only once it is built for the device, the slow step skipped here;
// an OpenCL program keeps the SPIR-V it was created from (CL_PROGRAM_IL).
std::vector<std::string> compiled_spirv(
    const sycl::kernel_bundle<sycl::bundle_state::object>& bundle) {
  if (bundle.get_backend() != sycl::backend::opencl) {
    throw std::runtime_error(
        "compiling to SPIR-V without a device build needs an OpenCL device (the CPU device)");
  }
  const OpenClPrograms& cl = opencl_programs();
  std::vector<cl_program> programs = sycl::get_native<sycl::backend::opencl>(bundle);
  std::vector<std::string> modules;
  cl_int status = CL_SUCCESS;
  for (cl_program program : programs) {
    size_t size = 0;
    if (status == CL_SUCCESS) status = cl.get_info(program, CL_PROGRAM_IL, 0, nullptr, &size);
    std::string& spirv = modules.emplace_back(size, '\0');
    if (status == CL_SUCCESS && size > 0) {
      status = cl.get_info(program, CL_PROGRAM_IL, size, spirv.data(), nullptr);
    }
    cl.release(program);  // get_native retained it
  }
  if (status != CL_SUCCESS) {
    throw std::runtime_error("clGetProgramInfo(CL_PROGRAM_IL) failed (OpenCL error " +
                             std::to_string(status) + ")");
  }
  return modules;
}

}  // namespace

std::string image_format(const std::string& bytes) {
  uint32_t magic = 0;
  if (bytes.size() >= sizeof(magic)) std::memcpy(&magic, bytes.data(), sizeof(magic));
  return magic == kSpirvMagic ? "spirv" : "native";
}

DeviceImage compile_to_image(const sycl::context& context, const std::vector<sycl::device>& devices,
                             const CompileRequest& request) {
  auto source = sycl_source(context, request);
  std::string log;
  const auto built = run_compiler(
      [&] {
        return syclexp::build(
            source, devices,
            syclexp::properties{syclexp::build_options{request.options}, syclexp::save_log{&log}});
      },
      log);

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

std::vector<KernelImage> compile_per_kernel(const sycl::context& context,
                                            const sycl::device& device,
                                            const CompileRequest& request, bool device_build) {
  auto source = sycl_source(context, request);
  // The last split option wins: the flag set's "off" keeps a JIT translation unit
  // in one image; here each kernel gets its own. A kernel's code is the same either
  // way (one kernel alone in a unit is one image under both).
  std::vector<std::string> options = request.options;
  options.push_back("-fsycl-device-code-split=per_kernel");
  std::string log;
  const syclexp::properties props{syclexp::build_options{options}, syclexp::save_log{&log}};
  std::vector<std::string> modules;
  if (device_build) {
    const auto built = run_compiler([&] { return syclexp::build(source, {device}, props); }, log);
    for (const auto& image : built) {
      const std::vector<std::byte> content = image.ext_oneapi_get_backend_content();
      modules.emplace_back(reinterpret_cast<const char*>(content.data()), content.size());
    }
  } else {
    modules = compiled_spirv(
        run_compiler([&] { return syclexp::compile(source, {device}, props); }, log));
  }
  std::vector<KernelImage> images;
  for (std::string& module : modules) {
    if (image_format(module) != "spirv") {
      throw std::runtime_error("expected SPIR-V images, got format " + image_format(module));
    }
    const std::vector<std::string> kernels = entry_points(module);
    if (kernels.size() != 1) {
      throw CompileError(
          "a per-kernel image has " + std::to_string(kernels.size()) + " kernels, expected 1", log);
    }
    images.push_back({kernels[0], std::move(module)});
  }
  return images;
}

sycl::kernel_bundle<sycl::bundle_state::executable> load_image(
    const sycl::context& context, const std::vector<sycl::device>& devices,
    const std::string& bytes, const std::string& format) {
  if (format != "spirv" || image_format(bytes) != "spirv") {
    throw std::invalid_argument("load_image(): expected a SPIR-V image, got format '" + format +
                                "' (" + std::to_string(bytes.size()) + " bytes)");
  }
  std::vector<std::byte> spirv(bytes.size());
  std::memcpy(spirv.data(), bytes.data(), bytes.size());
  auto source_bundle =
      syclexp::create_kernel_bundle_from_source(context, syclexp::source_language::spirv, spirv);
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
         std::to_string(__LIBSYCL_MINOR_VERSION) + "." + std::to_string(__LIBSYCL_PATCH_VERSION) +
         " (compiler " + std::to_string(__SYCL_COMPILER_VERSION) + ")";
}

}  // namespace sycl_kernels
