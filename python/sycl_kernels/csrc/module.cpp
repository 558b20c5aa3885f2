// csrc/module.cpp: the nanobind host module `sycl_kernels._C`.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "device_compiler.hpp"
#include "kernel.hpp"
#include "queue.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace sycl_kernels {
namespace {

std::vector<sycl::device> all_devices() { return sycl::device::get_devices(); }

nb::dict describe(const sycl::device& d) {
  nb::dict info;
  info["name"] = d.get_info<sycl::info::device::name>();
  info["vendor"] = d.get_info<sycl::info::device::vendor>();
  info["driver_version"] = d.get_info<sycl::info::device::driver_version>();
  info["type"] = d.is_cpu() ? "cpu" : d.is_gpu() ? "gpu" : "other";
  info["backend"] = std::string(
      d.get_platform().get_backend() == sycl::backend::opencl                  ? "opencl"
      : d.get_platform().get_backend() == sycl::backend::ext_oneapi_level_zero ? "level_zero"
                                                                               : "other");
  info["max_work_group_size"] = d.get_info<sycl::info::device::max_work_group_size>();
  info["sub_group_sizes"] = d.get_info<sycl::info::device::sub_group_sizes>();
  info["system_allocations"] = d.has(sycl::aspect::usm_system_allocations);
  return info;
}

sycl::device device_at(size_t index) {
  const auto devices = all_devices();
  if (index >= devices.size()) {
    throw nb::index_error(("device index " + std::to_string(index) + " out of range (" +
                           std::to_string(devices.size()) + " SYCL devices)")
                              .c_str());
  }
  return devices[index];
}

// An int or a float, by the kernel's signature letter; a bool is neither (a flag
// given where a size is expected), and a float is not taken for an int.
KernelArg scalar_arg(const Kernel& kernel, char kind, nb::handle value, size_t index) {
  KernelArg a;
  a.kind = kind;
  const bool is_int = nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::bool_>(value);
  const bool is_float = nb::isinstance<nb::float_>(value);
  auto fail = [&](const char* expected) {
    return nb::type_error((kernel.name() + "(): argument " + std::to_string(index) + " must be " +
                           expected + ", got " + nb::inst_name(value).c_str())
                              .c_str());
  };
  switch (kind) {
    case 'i':
      if (!is_int) throw fail("an int (int32)");
      a.i = nb::cast<int32_t>(value);
      break;
    case 'l':
      if (!is_int) throw fail("an int (int64)");
      a.l = nb::cast<int64_t>(value);
      break;
    case 'f':
      if (!is_int && !is_float) throw fail("a float");
      a.f = static_cast<float>(nb::cast<double>(value));
      break;
    default:
      if (!is_int && !is_float) throw fail("a float (double)");
      a.d = nb::cast<double>(value);
      break;
  }
  return a;
}

// Converts Python arguments by the kernel's signature; tensors must live where
// the queue's device can reach them.
std::vector<KernelArg> convert_args(const Kernel& kernel, const Queue& queue,
                                    const nb::args& args) {
  const std::string& signature = kernel.signature();
  if (args.size() != signature.size()) {
    throw nb::type_error((kernel.name() + "(): expected " + std::to_string(signature.size()) +
                          " arguments, got " + std::to_string(args.size()))
                             .c_str());
  }
  std::vector<KernelArg> out(args.size());
  for (size_t index = 0; index < args.size(); ++index) {
    KernelArg& a = out[index];
    a.kind = signature[index];
    nb::handle value = args[index];
    if (a.kind != 'p') {
      a = scalar_arg(kernel, a.kind, value, index);
      continue;
    }
    nb::ndarray<> array;
    if (!nb::try_cast(value, array)) {
      throw nb::type_error((kernel.name() + "(): argument " + std::to_string(index) +
                            " must be a tensor (DLPack), got " + nb::inst_name(value).c_str())
                               .c_str());
    }
    const int32_t wanted_device =
        queue.get().get_device().is_cpu() ? nb::device::cpu::value : nb::device::oneapi::value;
    if (array.device_type() != wanted_device) {
      throw nb::value_error((kernel.name() + "(): argument " + std::to_string(index) +
                             " lives on a device the queue's " +
                             (wanted_device == nb::device::cpu::value ? "CPU" : "GPU") +
                             " device cannot access")
                                .c_str());
    }
    a.p = array.data();
  }
  return out;
}

void check_sizes(const Kernel& kernel, size_t global_size, size_t local_size) {
  if (local_size == 0 || global_size % local_size != 0) {
    throw nb::value_error((kernel.name() + "(): global size " + std::to_string(global_size) +
                           " is not a positive multiple of the work-group size " +
                           std::to_string(local_size))
                              .c_str());
  }
  if (kernel.group_size() != 0 && local_size != kernel.group_size()) {
    throw nb::value_error((kernel.name() + "(): compiled for work-groups of " +
                           std::to_string(kernel.group_size()) + ", launched with " +
                           std::to_string(local_size))
                              .c_str());
  }
}

// A kernel bound once per metadata (ops/_launch.py): the queue, the sizes and every
// scalar argument fixed; each pointer argument read at each call from one of the
// call's tensors (its data_ptr() plus a byte offset; None gives a null pointer).
class BoundLaunch {
 public:
  struct Pointer {
    size_t param;     // the kernel parameter it fills
    size_t argument;  // the call's argument it reads
    int64_t offset;   // bytes past the tensor's data_ptr()
  };

  // `params`: one entry per kernel parameter, by its signature letter: for a pointer
  // an (argument index, byte offset) tuple, else the value (kinds checked here).
  BoundLaunch(const Kernel& kernel, const Queue& queue, size_t global_size, size_t local_size,
              const nb::sequence& params)
      : kernel_(kernel), queue_(queue), global_size_(global_size), local_size_(local_size) {
    check_sizes(kernel, global_size, local_size);
    const std::string& signature = kernel.signature();
    if (nb::len(params) != signature.size()) {
      throw nb::type_error((kernel.name() + "(): expected " + std::to_string(signature.size()) +
                            " parameters, got " + std::to_string(nb::len(params)))
                               .c_str());
    }
    args_.resize(signature.size());
    for (size_t index = 0; index < signature.size(); ++index) {
      nb::handle value = params[index];
      if (signature[index] != 'p') {
        args_[index] = scalar_arg(kernel, signature[index], value, index);
        continue;
      }
      std::pair<size_t, int64_t> slot;
      if (!nb::try_cast(value, slot)) {
        throw nb::type_error((kernel.name() + "(): parameter " + std::to_string(index) +
                              " is a pointer; expected (argument index, byte offset), got " +
                              nb::inst_name(value).c_str())
                                 .c_str());
      }
      args_[index].kind = 'p';
      args_[index].p = nullptr;
      pointers_.push_back({index, slot.first, slot.second});
    }
  }

  void operator()(const nb::args& call) const {
    std::vector<KernelArg> args = args_;
    for (const Pointer& pointer : pointers_) {
      if (pointer.argument >= call.size()) {
        throw nb::index_error((kernel_.name() + "(): bound to argument " +
                               std::to_string(pointer.argument) + ", called with " +
                               std::to_string(call.size()))
                                  .c_str());
      }
      nb::handle tensor = call[pointer.argument];
      if (tensor.is_none()) continue;
      const auto address = nb::cast<uintptr_t>(tensor.attr("data_ptr")());
      args[pointer.param].p = reinterpret_cast<void*>(address + pointer.offset);
    }
    nb::gil_scoped_release release;
    kernel_.launch(queue_, global_size_, local_size_, args);
  }

 private:
  Kernel kernel_;
  Queue queue_;
  size_t global_size_;
  size_t local_size_;
  std::vector<KernelArg> args_;
  std::vector<Pointer> pointers_;
};

void launch(const Kernel& kernel, const Queue& queue, size_t global_size, size_t local_size,
            const nb::args& args) {
  check_sizes(kernel, global_size, local_size);
  const std::vector<KernelArg> converted = convert_args(kernel, queue, args);
  nb::gil_scoped_release release;
  kernel.launch(queue, global_size, local_size, converted);
}

}  // namespace
}  // namespace sycl_kernels

NB_MODULE(_C, m) {
  using namespace sycl_kernels;
  m.doc() = "sycl_kernels host module: queues, device images and kernel launches";
  // Loaded kernels live in process-wide caches until exit; torch's op registry
  // keeps those caches reachable during interpreter shutdown, so nanobind would
  // report them as leaks although nothing is lost.
  nb::set_leak_warnings(false);

  m.def("runtime_version", &runtime_version);
  m.def("native_backends", &native_backends,
        "The backends whose native binaries this build keeps and loads.");
  m.def(
      "live_objects",
      [] {
        nb::dict counts;
        counts["Queue"] = LiveCount<Queue>::live();
        counts["Bundle"] = LiveCount<Bundle>::live();
        counts["Kernel"] = LiveCount<Kernel>::live();
        return counts;
      },
      "How many Queue, Bundle and Kernel objects are alive (C++ copies included).");
  m.def(
      "devices",
      [] {
        nb::list out;
        for (const auto& d : all_devices()) out.append(describe(d));
        return out;
      },
      "Every SYCL device the runtime sees, as dicts.");

  nb::class_<Queue>(m, "Queue")
      .def_static(
          "create", [](size_t index) { return Queue::create(device_at(index)); }, "device_index"_a,
          "An owned in-order queue on device `device_index`.")
      .def_static("borrow", &Queue::borrow, "address"_a,
                  "Wraps a `sycl::queue*` given as an int (torch.xpu stream.sycl_queue).")
      .def_prop_ro("address", &Queue::address)
      .def_prop_ro("blocking", &Queue::blocking)
      .def_prop_ro("device", [](const Queue& q) { return describe(q.get().get_device()); })
      .def("wait", [](const Queue& q) {
        nb::gil_scoped_release release;
        q.get().wait_and_throw();
      });

  nb::class_<Bundle>(m, "Bundle")
      .def(
          "__init__",
          [](Bundle* self, const Queue& queue, nb::bytes image, const std::string& format) {
            std::string bytes(image.c_str(), image.size());
            nb::gil_scoped_release release;
            new (self) Bundle(queue, bytes, format);
          },
          "queue"_a, "image"_a, "format"_a,
          "Loads a device image (bytes of `format`) for the queue's device.")
      .def_static(
          "from_native",
          [](const Queue& queue, nb::bytes binary) {
            std::string bytes(binary.c_str(), binary.size());
            nb::gil_scoped_release release;
            return new Bundle(Bundle::from_native(queue, bytes));
          },
          "queue"_a, "binary"_a, nb::rv_policy::take_ownership,
          "Loads the native binary another bundle gave for this device and driver.")
      .def(
          "native_binary",
          [](const Bundle& bundle) {
            std::string binary;
            {
              nb::gil_scoped_release release;
              binary = bundle.native_binary();
            }
            return nb::bytes(binary.data(), binary.size());
          },
          "The device's native binary of this bundle; b'' where the backend gives none.");

  nb::class_<Kernel>(m, "Kernel")
      .def(nb::init<const Bundle&, const std::string&, std::string, size_t>(), "bundle"_a, "name"_a,
           "signature"_a, "group_size"_a = 0,
           "Kernel `name` of a loaded image. `signature` has one letter per parameter:\n"
           "p pointer (a tensor), i int32, l int64, f float, d double. `group_size` is the\n"
           "work-group size it was compiled for (0: any).")
      .def_prop_ro("name", &Kernel::name)
      .def_prop_ro("signature", &Kernel::signature)
      .def_prop_ro("group_size", &Kernel::group_size)
      .def(
          "launch",
          [](const Kernel& kernel, const Queue& queue, size_t global_size, size_t local_size,
             nb::args args) { launch(kernel, queue, global_size, local_size, args); },
          "queue"_a, "global_size"_a, "local_size"_a, "args"_a,
          "Submits the kernel on `queue` (and waits if the queue is blocking); pointer\n"
          "arguments are tensors, checked to be on the queue's device.")
      .def(
          "_bind",
          [](const Kernel& kernel, const Queue& queue, size_t global_size, size_t local_size,
             nb::sequence params) {
            return BoundLaunch(kernel, queue, global_size, local_size, params);
          },
          "queue"_a, "global_size"_a, "local_size"_a, "params"_a,
          "A launch with every parameter bound, in order: values for scalars (kinds\n"
          "checked), (argument index, byte offset) for pointers, read from the call's\n"
          "tensors unchecked: for the ops only (ops/_launch.py), after their checks.");

  nb::class_<BoundLaunch>(m, "BoundLaunch")
      .def(
          "__call__", [](const BoundLaunch& launch, nb::args call) { launch(call); }, "call"_a,
          "Launches, the pointers read from the call's tensors.");
}
