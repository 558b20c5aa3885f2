# cmake/DeviceFlags.cmake: the one flag set device code is compiled with, ahead of time or JIT.
#
# It is exported into the package as _build_config.json; the Python JIT reads
# it from there and never spells a flag itself.

set(SYCL_KERNELS_DEVICE_COMPILER "sycl_ext_oneapi_kernel_compiler")

# Every runtime line:
# -fno-fast-math: keep IEEE semantics so results track the torch references.
# -fsycl-device-code-split=off: one device image per translation unit, however
#  many kernels it defines (an image is what the caches store).
# -fno-sycl-dead-args-optimization: keep parameters a specialization leaves
#  unused, so every kernel takes exactly the arguments its signature lists.
set(SYCL_KERNELS_DEVICE_OPTIONS
  -fno-fast-math
  -fsycl-device-code-split=off
  -fno-sycl-dead-args-optimization)

# Per runtime line (libsycl major), what only that line's kernel compiler needs.
# They do not change the kernel, so an image's portable key leaves them out.
# 8 (2025.3): -fno-sycl-device-lib=all, as the wheel ships no libsycl-crt.bc to
#  link; the 2026 compiler rejects the flag ("unknown argument").
set(SYCL_KERNELS_LINE_8_DEVICE_OPTIONS -fno-sycl-device-lib=all)
set(SYCL_KERNELS_LINE_9_DEVICE_OPTIONS "")

function(_sycl_kernels_json_list out_var)
  set(items "")
  foreach(item IN LISTS ARGN)
    list(APPEND items "\"${item}\"")
  endforeach()
  list(JOIN items ", " items)
  set(${out_var} "[${items}]" PARENT_SCOPE)
endfunction()

# Writes the flag set, per built runtime line with the release it was built
# against, to `output` (installed as sycl_kernels/_build_config.json; also read by
# the AOT plan at configure time).
function(sycl_kernels_write_build_config output)
  _sycl_kernels_json_list(options_json ${SYCL_KERNELS_DEVICE_OPTIONS})
  set(lines_json "")
  foreach(line IN LISTS SYCL_KERNELS_BUILT_LINES)
    _sycl_kernels_json_list(line_options_json ${SYCL_KERNELS_LINE_${line}_DEVICE_OPTIONS})
    list(APPEND lines_json "    \"${line}\": {\"sycl_runtime_version\": \"${SYCL_RUNTIME_VERSION_${line}}\", \"device_options\": ${line_options_json}}")
  endforeach()
  list(JOIN lines_json ",\n" lines_json)
  file(CONFIGURE OUTPUT "${output}" CONTENT [=[
{
  "device_compiler": "@SYCL_KERNELS_DEVICE_COMPILER@",
  "device_options": @options_json@,
  "aot_line": "@SYCL_KERNELS_AOT_LINE@",
  "lines": {
@lines_json@
  }
}
]=] @ONLY)
endfunction()
