// csrc/compile_tool.cpp: the device compiler as a process, compiling one request into an image.
//
//   sycl-kernels-compile <request file> <output image> [cpu|gpu]
//
// The wheel build runs it once per AOT variant, and the JIT once per kernel: in a
// process of its own, a crash of the compiler becomes an error the caller reports
// instead of the end of the caller, and the compiler's memory goes when it exits.
//
// The request (written by sycl_kernels.jit.compiler) has tab-separated lines:
// "source <path>", "header <include name> <path>", "option <flag>"; '#' starts a
// comment. The image is written to a temporary file and renamed into place, so an
// interrupted build never leaves a truncated image behind. Exit status 1: the
// compiler rejected the source, its log on stderr.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "device_compiler.hpp"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

sycl_kernels::CompileRequest read_request(const std::string& path) {
  sycl_kernels::CompileRequest request;
  std::istringstream lines(read_file(path));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string kind, first, second;
    std::getline(fields, kind, '\t');
    std::getline(fields, first, '\t');
    std::getline(fields, second, '\t');
    if (kind == "source") {
      request.source = read_file(first);
    } else if (kind == "header") {
      request.headers.emplace_back(first, read_file(second));
    } else if (kind == "option") {
      request.options.push_back(first);
    } else {
      throw std::runtime_error(path + ": unknown line '" + line + "'");
    }
  }
  return request;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string device_type = argc == 4 ? argv[3] : "cpu";
  if ((argc != 3 && argc != 4) || (device_type != "cpu" && device_type != "gpu")) {
    std::cerr << "usage: " << argv[0] << " <request file> <output image> [cpu|gpu]\n";
    return 2;
  }
  const std::string output = argv[2];
  try {
    const sycl_kernels::CompileRequest request = read_request(argv[1]);
    sycl::queue queue = device_type == "gpu" ? sycl::queue{sycl::gpu_selector_v}
                                             : sycl::queue{sycl::cpu_selector_v};
    const sycl_kernels::DeviceImage image =
        sycl_kernels::compile_to_image(queue.get_context(), {queue.get_device()}, request);
    if (image.format != "spirv") {
      throw std::runtime_error("expected a SPIR-V image, got " + image.format);
    }
    const std::string partial = output + ".partial";
    {
      std::ofstream out(partial, std::ios::binary | std::ios::trunc);
      out.write(image.bytes.data(), static_cast<std::streamsize>(image.bytes.size()));
      if (!out.flush()) throw std::runtime_error("cannot write " + partial);
    }
    if (std::rename(partial.c_str(), output.c_str()) != 0) {
      throw std::runtime_error("cannot rename " + partial + " to " + output);
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
