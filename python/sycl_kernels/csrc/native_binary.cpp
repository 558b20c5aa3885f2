// csrc/native_binary.cpp: OpenCL program binaries of loaded images (csrc/native_binary.hpp).
#include "native_binary.hpp"

#include <dlfcn.h>

#include <stdexcept>

#include <CL/cl.h>
#include <sycl/backend/opencl.hpp>

namespace sycl_kernels {

namespace {

// The OpenCL entry points, from the ICD loader the runtime's OpenCL adapter has
// already loaded (looked up, not linked: a build against a fetched runtime line has
// no libOpenCL to link, and a process on another backend never needs one).
struct OpenCl {
  decltype(&clGetProgramInfo) get_program_info = nullptr;
  decltype(&clCreateProgramWithBinary) create_program_with_binary = nullptr;
  decltype(&clBuildProgram) build_program = nullptr;
  decltype(&clGetProgramBuildInfo) get_program_build_info = nullptr;
  decltype(&clCreateKernel) create_kernel = nullptr;
  decltype(&clReleaseKernel) release_kernel = nullptr;
  decltype(&clReleaseProgram) release_program = nullptr;
};

template <typename F>
void bind(void* library, const char* name, F& function) {
  function = reinterpret_cast<F>(dlsym(library, name));
  if (function == nullptr) throw std::runtime_error(std::string("OpenCL has no ") + name);
}

const OpenCl& opencl() {
  static const OpenCl api = [] {
    void* library = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (library == nullptr) library = dlopen("libOpenCL.so.1", RTLD_NOW);
    if (library == nullptr) throw std::runtime_error("libOpenCL.so.1 cannot be loaded");
    OpenCl a;
    bind(library, "clGetProgramInfo", a.get_program_info);
    bind(library, "clCreateProgramWithBinary", a.create_program_with_binary);
    bind(library, "clBuildProgram", a.build_program);
    bind(library, "clGetProgramBuildInfo", a.get_program_build_info);
    bind(library, "clCreateKernel", a.create_kernel);
    bind(library, "clReleaseKernel", a.release_kernel);
    bind(library, "clReleaseProgram", a.release_program);
    return a;
  }();
  return api;
}

void check(cl_int status, const char* what) {
  if (status != CL_SUCCESS) {
    throw std::runtime_error(std::string(what) + " failed (OpenCL error " +
                             std::to_string(status) + ")");
  }
}

// Entry points of SPIR-V modules built from SYCL source carry this prefix.
constexpr const char* kSpirvEntryPrefix = "__sycl_kernel_";

}  // namespace

std::string native_binary(const sycl::kernel_bundle<sycl::bundle_state::executable>& bundle) {
  if (bundle.get_backend() != sycl::backend::opencl) return {};
  const OpenCl& cl = opencl();
  std::vector<cl_program> programs = sycl::get_native<sycl::backend::opencl>(bundle);
  std::string binary;
  if (programs.size() == 1) {
    size_t size = 0;
    check(cl.get_program_info(programs[0], CL_PROGRAM_BINARY_SIZES, sizeof(size), &size,
                              nullptr),
          "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)");
    binary.resize(size);
    unsigned char* data = reinterpret_cast<unsigned char*>(binary.data());
    check(cl.get_program_info(programs[0], CL_PROGRAM_BINARIES, sizeof(data), &data, nullptr),
          "clGetProgramInfo(CL_PROGRAM_BINARIES)");
  }
  for (cl_program program : programs) cl.release_program(program);
  return binary;
}

NativeProgram::NativeProgram(const sycl::context& context, const sycl::device& device,
                             const std::string& binary)
    : context_(context), program_(nullptr) {
  if (context.get_backend() != sycl::backend::opencl) {
    throw std::invalid_argument("native binaries are loaded on the OpenCL backend only");
  }
  const OpenCl& cl = opencl();
  cl_context cl_ctx = sycl::get_native<sycl::backend::opencl>(context);
  cl_device_id cl_dev = sycl::get_native<sycl::backend::opencl>(device);
  const unsigned char* data = reinterpret_cast<const unsigned char*>(binary.data());
  size_t size = binary.size();
  cl_int binary_status = CL_SUCCESS;
  cl_int status = CL_SUCCESS;
  cl_program program =
      cl.create_program_with_binary(cl_ctx, 1, &cl_dev, &size, &data, &binary_status, &status);
  check(status, "clCreateProgramWithBinary");
  program_ = program;
  status = cl.build_program(program, 1, &cl_dev, "", nullptr, nullptr);
  if (status != CL_SUCCESS) {
    size_t log_size = 0;
    cl.get_program_build_info(program, cl_dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &log_size);
    std::string log(log_size, '\0');
    cl.get_program_build_info(program, cl_dev, CL_PROGRAM_BUILD_LOG, log_size, log.data(),
                              nullptr);
    cl.release_program(program);
    program_ = nullptr;
    throw std::runtime_error("clBuildProgram of a native binary failed (OpenCL error " +
                             std::to_string(status) + "): " + log);
  }
}

NativeProgram::~NativeProgram() {
  if (program_ != nullptr) opencl().release_program(static_cast<cl_program>(program_));
}

sycl::kernel NativeProgram::get(const std::string& name) const {
  const OpenCl& cl = opencl();
  for (const std::string& candidate : {std::string(kSpirvEntryPrefix) + name, name}) {
    cl_int status = CL_SUCCESS;
    cl_kernel kernel =
        cl.create_kernel(static_cast<cl_program>(program_), candidate.c_str(), &status);
    if (status == CL_SUCCESS) {
      // The SYCL kernel retains the OpenCL one (SYCL 2020 OpenCL interop).
      sycl::kernel k = sycl::make_kernel<sycl::backend::opencl>(kernel, context_);
      cl.release_kernel(kernel);
      return k;
    }
  }
  throw std::invalid_argument("the native binary has no kernel named '" + name + "'");
}

}  // namespace sycl_kernels
