// csrc/native_opencl.cpp: OpenCL program binaries (the CPU device), for csrc/native_binary.hpp.
// The OpenCL 3.0 API, as the runtime's own headers assume.
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <sycl/backend/opencl.hpp>

#include "native_backend.hpp"

namespace sycl_kernels {

namespace {

struct OpenCl {
  decltype(&clGetProgramInfo) get_program_info = nullptr;
  decltype(&clCreateProgramWithBinary) create_program_with_binary = nullptr;
  decltype(&clBuildProgram) build_program = nullptr;
  decltype(&clGetProgramBuildInfo) get_program_build_info = nullptr;
  decltype(&clCreateKernel) create_kernel = nullptr;
  decltype(&clReleaseKernel) release_kernel = nullptr;
  decltype(&clReleaseProgram) release_program = nullptr;
};

const OpenCl& opencl() {
  static const OpenCl api = [] {
    void* library = open_driver_library("libOpenCL.so.1");
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
    throw std::runtime_error(std::string(what) + " failed (OpenCL error " + std::to_string(status) +
                             ")");
  }
}

class OpenClProgram : public NativeProgram {
 public:
  OpenClProgram(const sycl::context& context, const sycl::device& device, const std::string& binary)
      : context_(context) {
    const OpenCl& cl = opencl();
    cl_context cl_ctx = sycl::get_native<sycl::backend::opencl>(context);
    cl_device_id cl_dev = sycl::get_native<sycl::backend::opencl>(device);
    const unsigned char* data = reinterpret_cast<const unsigned char*>(binary.data());
    size_t size = binary.size();
    cl_int binary_status = CL_SUCCESS;
    cl_int status = CL_SUCCESS;
    program_ =
        cl.create_program_with_binary(cl_ctx, 1, &cl_dev, &size, &data, &binary_status, &status);
    check(status, "clCreateProgramWithBinary");
    status = cl.build_program(program_, 1, &cl_dev, "", nullptr, nullptr);
    if (status != CL_SUCCESS) {
      size_t log_size = 0;
      cl.get_program_build_info(program_, cl_dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &log_size);
      std::string log(log_size, '\0');
      cl.get_program_build_info(program_, cl_dev, CL_PROGRAM_BUILD_LOG, log_size, log.data(),
                                nullptr);
      cl.release_program(program_);
      throw std::runtime_error("clBuildProgram of a native binary failed (OpenCL error " +
                               std::to_string(status) + "): " + log);
    }
  }
  OpenClProgram(const OpenClProgram&) = delete;
  OpenClProgram& operator=(const OpenClProgram&) = delete;
  ~OpenClProgram() override { opencl().release_program(program_); }

 protected:
  std::optional<sycl::kernel> find(const std::string& entry) const override {
    const OpenCl& cl = opencl();
    cl_int status = CL_SUCCESS;
    cl_kernel kernel = cl.create_kernel(program_, entry.c_str(), &status);
    if (status != CL_SUCCESS) return std::nullopt;
    // The SYCL kernel retains the OpenCL one (SYCL 2020 OpenCL interop).
    sycl::kernel k = sycl::make_kernel<sycl::backend::opencl>(kernel, context_);
    cl.release_kernel(kernel);
    return k;
  }

 private:
  sycl::context context_;
  cl_program program_ = nullptr;
};

}  // namespace

std::string opencl_native_binary(const ExecutableBundle& bundle) {
  const OpenCl& cl = opencl();
  std::vector<cl_program> programs = sycl::get_native<sycl::backend::opencl>(bundle);
  std::string binary;
  if (programs.size() == 1) {
    size_t size = 0;
    check(cl.get_program_info(programs[0], CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr),
          "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)");
    binary.resize(size);
    unsigned char* data = reinterpret_cast<unsigned char*>(binary.data());
    check(cl.get_program_info(programs[0], CL_PROGRAM_BINARIES, sizeof(data), &data, nullptr),
          "clGetProgramInfo(CL_PROGRAM_BINARIES)");
  }
  for (cl_program program : programs) cl.release_program(program);
  return binary;
}

std::shared_ptr<NativeProgram> opencl_load_native(const sycl::context& context,
                                                  const sycl::device& device,
                                                  const std::string& binary) {
  return std::make_shared<OpenClProgram>(context, device, binary);
}

}  // namespace sycl_kernels
