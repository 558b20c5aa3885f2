# cmake/SyclRuntime.cmake: the SYCL runtime lines the package is built for, each a SYCL::runtime<N>.
#
# A runtime line is one libsycl soname, libsycl.so.N: torch XPU builds pin one
# exactly (2025.3.x: .so.8, 2026.x: .so.9), and the package ships a host module
# and a compile tool per line, the right one picked at import. The build
# environment's intel-sycl-rt gives its own line (and, beside intel-opencl-rt, the
# CPU device the AOT variants are compiled on); every other line's headers and
# library come from its intel-sycl-rt wheel, downloaded into the build tree
# (cmake/sycl_runtime.py). Without the network a build makes its own line alone.
#
# Defines SYCL_KERNELS_BUILT_LINES (majors), SYCL_KERNELS_AOT_LINE (the build
# environment's), SYCL_RUNTIME_VERSION_<N>, SYCL_CPU_RUNTIME and SYCL::runtime<N>.

find_package(Python COMPONENTS Interpreter REQUIRED)

# libsycl major -> the intel-sycl-rt release a fetched line is built against: the
# oldest one supported, so its host module needs no symbol a later patch added.
set(SYCL_KERNELS_RUNTIME_LINES 8 9)
set(SYCL_KERNELS_LINE_8_BUILD_RUNTIME 2025.3.1)
set(SYCL_KERNELS_LINE_9_BUILD_RUNTIME 2026.0.0)
option(SYCL_KERNELS_FETCH_RUNTIMES
  "Download the intel-sycl-rt wheel of each runtime line the build environment lacks" ON)

set(_sycl_runtime_py "${CMAKE_CURRENT_LIST_DIR}/sycl_runtime.py")

# Runs cmake/sycl_runtime.py <args> and defines SYCL::runtime<N> from its answer.
function(_sycl_kernels_add_runtime out_major)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" "${_sycl_runtime_py}" ${ARGN}
    OUTPUT_VARIABLE found ERROR_VARIABLE error RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    set(${out_major} "" PARENT_SCOPE)
    message(STATUS "SYCL runtime (${ARGN}) not available: ${error}")
    return()
  endif()
  list(GET found 0 include_dir)
  list(GET found 1 library)
  list(GET found 2 major)
  list(GET found 3 version)
  add_library(SYCL::runtime${major} SHARED IMPORTED)
  set_target_properties(SYCL::runtime${major} PROPERTIES
    IMPORTED_LOCATION "${library}"
    IMPORTED_NO_SONAME FALSE
    INTERFACE_INCLUDE_DIRECTORIES "${include_dir}"
    INTERFACE_COMPILE_DEFINITIONS SYCL_DISABLE_FSYCL_SYCLHPP_WARNING)
  set(SYCL_RUNTIME_VERSION_${major} "${version}" PARENT_SCOPE)
  set(SYCL_LIBRARY_${major} "${library}" PARENT_SCOPE)
  set(${out_major} "${major}" PARENT_SCOPE)
  message(STATUS "SYCL runtime line ${major}: intel-sycl-rt ${version}, ${library}")
endfunction()

_sycl_kernels_add_runtime(SYCL_KERNELS_AOT_LINE installed)
if(NOT SYCL_KERNELS_AOT_LINE)
  message(FATAL_ERROR
    "The SYCL runtime wheel was not found in the build environment.\n"
    "Install it: pip install 'intel-sycl-rt==2026.0.*' (or 2025.3.*)")
endif()
if(NOT SYCL_KERNELS_AOT_LINE IN_LIST SYCL_KERNELS_RUNTIME_LINES)
  message(FATAL_ERROR "intel-sycl-rt ${SYCL_RUNTIME_VERSION_${SYCL_KERNELS_AOT_LINE}} is "
    "libsycl.so.${SYCL_KERNELS_AOT_LINE}, not a supported line (${SYCL_KERNELS_RUNTIME_LINES})")
endif()
set(SYCL_KERNELS_BUILT_LINES ${SYCL_KERNELS_AOT_LINE})

foreach(line IN LISTS SYCL_KERNELS_RUNTIME_LINES)
  if(line STREQUAL SYCL_KERNELS_AOT_LINE OR NOT SYCL_KERNELS_FETCH_RUNTIMES)
    continue()
  endif()
  _sycl_kernels_add_runtime(fetched fetch "${SYCL_KERNELS_LINE_${line}_BUILD_RUNTIME}"
    "${CMAKE_CURRENT_BINARY_DIR}/runtimes/sycl${line}")
  if(fetched STREQUAL line)
    list(APPEND SYCL_KERNELS_BUILT_LINES ${line})
    # Only libsycl.so.N itself is fetched, not the libraries it needs in turn
    # (libur_loader ...); the linker must not look for them.
    set_property(TARGET SYCL::runtime${line} APPEND PROPERTY
      INTERFACE_LINK_OPTIONS -Wl,--allow-shlib-undefined)
  else()
    message(WARNING "Runtime line libsycl.so.${line} is left out of this build: "
      "intel-sycl-rt==${SYCL_KERNELS_LINE_${line}_BUILD_RUNTIME} could not be fetched")
  endif()
endforeach()
list(SORT SYCL_KERNELS_BUILT_LINES)

# The OpenCL CPU runtime, optional: the AOT build compiles on the SYCL CPU device.
execute_process(
  COMMAND "${Python_EXECUTABLE}" "${_sycl_runtime_py}" cpu-device
  OUTPUT_VARIABLE SYCL_CPU_RUNTIME)
message(STATUS "SYCL CPU device runtime: ${SYCL_CPU_RUNTIME}")
