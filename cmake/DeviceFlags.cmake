# cmake/DeviceFlags.cmake: the one flag set device code is compiled with, ahead of time or JIT.
#
# It is exported into the package as _build_config.json; the Python JIT reads
# it from there and never spells a flag itself.

set(SYCL_KERNELS_DEVICE_COMPILER "sycl_ext_oneapi_kernel_compiler")

# -fno-sycl-device-lib=all: the runtime wheel ships no libsycl-crt.bc to link.
# -fno-fast-math: keep IEEE semantics so results track the torch references.
# -fsycl-device-code-split=off: one device image per translation unit, however
#  many kernels it defines (an image is what the caches store).
# -fno-sycl-dead-args-optimization: keep parameters a specialization leaves
#  unused, so every kernel takes exactly the arguments its signature lists.
set(SYCL_KERNELS_DEVICE_OPTIONS
  -fno-sycl-device-lib=all
  -fno-fast-math
  -fsycl-device-code-split=off
  -fno-sycl-dead-args-optimization)

# Writes the flag set, and what it was made with, to `output` (installed as
# sycl_kernels/_build_config.json; also read by the AOT plan at configure time).
function(sycl_kernels_write_build_config output)
  set(options_json "")
  foreach(option IN LISTS SYCL_KERNELS_DEVICE_OPTIONS)
    list(APPEND options_json "\"${option}\"")
  endforeach()
  list(JOIN options_json ", " options_json)
  file(CONFIGURE OUTPUT "${output}" CONTENT [=[
{
  "device_compiler": "@SYCL_KERNELS_DEVICE_COMPILER@",
  "device_options": [@options_json@],
  "sycl_runtime_version": "@SYCL_RUNTIME_VERSION@"
}
]=] @ONLY)
endfunction()
