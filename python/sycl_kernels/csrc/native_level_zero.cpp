// csrc/native_level_zero.cpp: Level Zero module binaries (Intel GPUs), for
// csrc/native_binary.hpp. Built only where level_zero/ze_api.h is found; no device
// here runs it (the CI machine has the CPU device only).
#include <level_zero/ze_api.h>
#include <sycl/ext/oneapi/backend/level_zero.hpp>

#include "native_backend.hpp"

namespace sycl_kernels {

namespace {

struct LevelZero {
  decltype(&zeModuleGetNativeBinary) module_get_native_binary = nullptr;
  decltype(&zeModuleCreate) module_create = nullptr;
  decltype(&zeModuleDestroy) module_destroy = nullptr;
  decltype(&zeModuleBuildLogGetString) build_log_get_string = nullptr;
  decltype(&zeModuleBuildLogDestroy) build_log_destroy = nullptr;
  decltype(&zeKernelCreate) kernel_create = nullptr;
};

const LevelZero& level_zero() {
  static const LevelZero api = [] {
    void* library = open_driver_library("libze_loader.so.1");
    LevelZero a;
    bind(library, "zeModuleGetNativeBinary", a.module_get_native_binary);
    bind(library, "zeModuleCreate", a.module_create);
    bind(library, "zeModuleDestroy", a.module_destroy);
    bind(library, "zeModuleBuildLogGetString", a.build_log_get_string);
    bind(library, "zeModuleBuildLogDestroy", a.build_log_destroy);
    bind(library, "zeKernelCreate", a.kernel_create);
    return a;
  }();
  return api;
}

void check(ze_result_t status, const char* what) {
  if (status != ZE_RESULT_SUCCESS) {
    throw std::runtime_error(std::string(what) + " failed (Level Zero error " +
                             std::to_string(static_cast<int>(status)) + ")");
  }
}

// The module's build log, destroyed after reading.
std::string take_build_log(ze_module_build_log_handle_t log) {
  if (log == nullptr) return {};
  const LevelZero& ze = level_zero();
  size_t size = 0;
  std::string text;
  if (ze.build_log_get_string(log, &size, nullptr) == ZE_RESULT_SUCCESS && size > 0) {
    text.resize(size);
    ze.build_log_get_string(log, &size, text.data());
  }
  ze.build_log_destroy(log);
  return text;
}

using sycl::ext::oneapi::level_zero::ownership;

class LevelZeroProgram : public NativeProgram {
 public:
  LevelZeroProgram(const sycl::context& context, const sycl::device& device,
                   const std::string& binary)
      : context_(context) {
    const LevelZero& ze = level_zero();
    ze_module_desc_t desc = {};
    desc.stype = ZE_STRUCTURE_TYPE_MODULE_DESC;
    desc.format = ZE_MODULE_FORMAT_NATIVE;
    desc.inputSize = binary.size();
    desc.pInputModule = reinterpret_cast<const uint8_t*>(binary.data());
    desc.pBuildFlags = "";
    ze_module_handle_t module = nullptr;
    ze_module_build_log_handle_t log = nullptr;
    ze_result_t status = ze.module_create(
        sycl::get_native<sycl::backend::ext_oneapi_level_zero>(context),
        sycl::get_native<sycl::backend::ext_oneapi_level_zero>(device), &desc, &module, &log);
    std::string log_text = take_build_log(log);
    if (status != ZE_RESULT_SUCCESS) {
      if (module != nullptr) ze.module_destroy(module);
      throw std::runtime_error("zeModuleCreate of a native binary failed (Level Zero error " +
                               std::to_string(static_cast<int>(status)) + "): " + log_text);
    }
    module_ = module;
    // The bundle owns the module from here on.
    bundle_.emplace(sycl::make_kernel_bundle<sycl::backend::ext_oneapi_level_zero,
                                             sycl::bundle_state::executable>(
        {module, ownership::transfer}, context));
  }

 protected:
  std::optional<sycl::kernel> find(const std::string& entry) const override {
    ze_kernel_desc_t desc = {};
    desc.stype = ZE_STRUCTURE_TYPE_KERNEL_DESC;
    desc.pKernelName = entry.c_str();
    ze_kernel_handle_t kernel = nullptr;
    if (level_zero().kernel_create(module_, &desc, &kernel) != ZE_RESULT_SUCCESS) {
      return std::nullopt;
    }
    return sycl::make_kernel<sycl::backend::ext_oneapi_level_zero>(
        {*bundle_, kernel, ownership::transfer}, context_);
  }

 private:
  sycl::context context_;
  ze_module_handle_t module_ = nullptr;
  std::optional<ExecutableBundle> bundle_;
};

}  // namespace

std::string level_zero_native_binary(const ExecutableBundle& bundle) {
  std::vector<ze_module_handle_t> modules =
      sycl::get_native<sycl::backend::ext_oneapi_level_zero>(bundle);
  if (modules.size() != 1) return {};
  const LevelZero& ze = level_zero();
  size_t size = 0;
  check(ze.module_get_native_binary(modules[0], &size, nullptr), "zeModuleGetNativeBinary");
  std::string binary(size, '\0');
  check(ze.module_get_native_binary(modules[0], &size, reinterpret_cast<uint8_t*>(binary.data())),
        "zeModuleGetNativeBinary");
  binary.resize(size);
  return binary;
}

std::shared_ptr<NativeProgram> level_zero_load_native(const sycl::context& context,
                                                      const sycl::device& device,
                                                      const std::string& binary) {
  return std::make_shared<LevelZeroProgram>(context, device, binary);
}

}  // namespace sycl_kernels
