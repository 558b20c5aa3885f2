// csrc/compile_tool.cpp: the device compiler as a process, compiling one request into images.
//
//   sycl-kernels-compile <request file> <output image> [cpu|gpu]
//   sycl-kernels-compile --per-kernel <request file> [--device-build cpu|gpu]
//
// The JIT runs the first form once per kernel: one image, built for the device.
// The second compiles a group of kernels (one translation unit defining many, as
// starting the compiler costs more than compiling a small kernel) into one SPIR-V
// image per kernel, written where the request's "image" lines say: the wheel's AOT
// build runs it once per group of variants, the JIT's precompile once per group of
// missing kernels. --device-build also builds each image for a device of that type
// (the slow step a process loading the image pays anyway), so a backend crash
// shows here.
// In a process of its own, a crash of the compiler becomes an error the caller
// reports instead of the end of the caller, and the compiler's memory goes when
// it exits.
//
// The request (written by sycl_kernels.toolchain.compiler) has tab-separated lines:
// "source <path>", "header <include name> <path>", "option <flag>",
// "image <kernel name> <path>" (--per-kernel); '#' starts a comment. Images are
// written to a temporary file and renamed into place, so an interrupted build never
// leaves a truncated image behind. Exit status 1: the compiler rejected the source,
// its log on stderr, or the kernels compiled are not the ones the image lines name.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include "device_compiler.hpp"

namespace {

struct ToolRequest {
  sycl_kernels::CompileRequest compile;
  std::map<std::string, std::string> images;  // kernel name -> output path
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

ToolRequest read_request(const std::string& path) {
  ToolRequest tool_request;
  sycl_kernels::CompileRequest& request = tool_request.compile;
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
    } else if (kind == "image") {
      tool_request.images[first] = second;
    } else {
      throw std::runtime_error(path + ": unknown line '" + line + "'");
    }
  }
  return tool_request;
}

void write_image(const std::string& output, const std::string& bytes) {
  const std::string partial = output + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) throw std::runtime_error("cannot write " + partial);
  }
  if (std::rename(partial.c_str(), output.c_str()) != 0) {
    throw std::runtime_error("cannot rename " + partial + " to " + output);
  }
}

sycl::queue queue_of_type(const std::string& device_type) {
  return device_type == "gpu" ? sycl::queue{sycl::gpu_selector_v}
                              : sycl::queue{sycl::cpu_selector_v};
}

void compile_one(const std::string& request_file, const std::string& output,
                 const std::string& device_type) {
  const ToolRequest request = read_request(request_file);
  sycl::queue queue = queue_of_type(device_type);
  const sycl_kernels::DeviceImage image =
      sycl_kernels::compile_to_image(queue.get_context(), {queue.get_device()}, request.compile);
  if (image.format != "spirv") {
    throw std::runtime_error("expected a SPIR-V image, got " + image.format);
  }
  write_image(output, image.bytes);
}

// device_type "": SPIR-V only, compiled on the CPU device.
void compile_per_kernel(const std::string& request_file, const std::string& device_type) {
  const ToolRequest request = read_request(request_file);
  if (request.images.empty()) throw std::runtime_error(request_file + ": no image lines");
  const bool device_build = !device_type.empty();
  sycl::queue queue = queue_of_type(device_build ? device_type : "cpu");
  std::vector<sycl_kernels::KernelImage> images = sycl_kernels::compile_per_kernel(
      queue.get_context(), queue.get_device(), request.compile, device_build);
  // All checked before any is written: a failed group leaves its images as they were.
  std::map<std::string, std::string> compiled;
  for (sycl_kernels::KernelImage& image : images) {
    if (!request.images.count(image.kernel)) {
      throw std::runtime_error(request_file +
                               ": compiled a kernel no image line names: " + image.kernel);
    }
    compiled[image.kernel] = std::move(image.bytes);
  }
  for (const auto& [kernel, path] : request.images) {
    if (!compiled.count(kernel)) {
      throw std::runtime_error(request_file + ": no kernel " + kernel + " in the source");
    }
  }
  for (const auto& [kernel, path] : request.images) write_image(path, compiled[kernel]);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const auto is_device_type = [](const std::string& t) { return t == "cpu" || t == "gpu"; };
  const bool per_kernel = !args.empty() && args[0] == "--per-kernel";
  const bool usage_ok =
      per_kernel ? (args.size() == 2 ||
                    (args.size() == 4 && args[2] == "--device-build" && is_device_type(args[3])))
                 : (args.size() == 2 || (args.size() == 3 && is_device_type(args[2])));
  if (!usage_ok) {
    std::cerr << "usage: " << argv[0] << " <request file> <output image> [cpu|gpu]\n"
              << "       " << argv[0] << " --per-kernel <request file> [--device-build cpu|gpu]\n";
    return 2;
  }
  try {
    if (per_kernel) {
      compile_per_kernel(args[1], args.size() == 4 ? args[3] : "");
    } else {
      compile_one(args[0], args[1], args.size() == 3 ? args[2] : "cpu");
    }
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
