# cmake/AotVariants.cmake: compiles the variants of kernels/variants.toml into device images.
#
# At configure time sycl_kernels.toolchain.aot_build computes each variant's compile
# inputs (the ones the JIT hashes) and groups the variants (one group per op and
# dtype, toolchain/aot_build.py aot_group says why); at build time one sycl-kernels-compile
# process per group compiles the group's translation unit into one image per
# variant, the groups in parallel, each rebuilt only when its request (sources,
# flags, runtime version) or a header its unit includes changes.

option(SYCL_KERNELS_AOT "Compile the variants of kernels/variants.toml into the package" ON)
set(SYCL_KERNELS_AOT_VARIANTS "*" CACHE STRING
  "Glob patterns (;-separated) selecting the manifest variants to build, e.g. rmsnorm_bf16_*")
option(SYCL_KERNELS_AOT_DEVICE_BUILD
  "Also build each AOT image for the CPU device, so a backend that fails on one fails the build (about 5x slower)"
  OFF)

set(SYCL_KERNELS_AOT_DIR "${CMAKE_CURRENT_BINARY_DIR}/aot")

# Runs sycl_kernels.toolchain.aot_build <args> from the source tree (see cmake/aot_build.py).
function(sycl_kernels_aot_build_command out_var)
  set(${out_var} "${Python_EXECUTABLE}" "${PROJECT_SOURCE_DIR}/cmake/aot_build.py" ${ARGN}
    PARENT_SCOPE)
endfunction()

# Called from the generated variants.cmake: one compile per group, one image per variant.
function(sycl_kernels_add_aot_group name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "VARIANTS;HEADERS")
  set(request "${SYCL_KERNELS_AOT_DIR}/src/${name}.request")
  list(TRANSFORM arg_VARIANTS PREPEND "${SYCL_KERNELS_AOT_DIR}/images/" OUTPUT_VARIABLE images)
  list(TRANSFORM images APPEND ".spv")
  set(device_build "")
  if(SYCL_KERNELS_AOT_DEVICE_BUILD)
    set(device_build --device-build cpu)
  endif()
  list(LENGTH images count)
  add_custom_command(
    OUTPUT ${images}
    COMMAND "${CMAKE_COMMAND}" -E env "OCL_ICD_FILENAMES=${SYCL_CPU_RUNTIME}"
            $<TARGET_FILE:sycl_kernels_compile_sycl${SYCL_KERNELS_AOT_LINE}> --per-kernel
            "${request}" ${device_build}
    DEPENDS "${request}" ${arg_HEADERS} sycl_kernels_compile_sycl${SYCL_KERNELS_AOT_LINE}
    COMMENT "AOT ${name} (${count} kernels)"
    VERBATIM)
  set_property(GLOBAL APPEND PROPERTY SYCL_KERNELS_AOT_IMAGES ${images})
endfunction()

function(sycl_kernels_add_aot_variants)
  if(NOT SYCL_CPU_RUNTIME)
    message(FATAL_ERROR
      "SYCL_KERNELS_AOT=ON needs the SYCL CPU device at build time: "
      "pip install intel-opencl-rt (the version of intel-sycl-rt) into the build environment, "
      "or configure with -DSYCL_KERNELS_AOT=OFF")
  endif()
  sycl_kernels_aot_build_command(plan_command plan
    --kernels-dir "${PROJECT_SOURCE_DIR}/kernels"
    --build-config "${SYCL_KERNELS_BUILD_CONFIG}"
    --out-dir "${SYCL_KERNELS_AOT_DIR}"
    --select ${SYCL_KERNELS_AOT_VARIANTS})
  execute_process(COMMAND ${plan_command} RESULT_VARIABLE plan_result)
  if(NOT plan_result EQUAL 0)
    message(FATAL_ERROR "sycl_kernels.toolchain.aot_build plan failed")
  endif()
  # What shapes the plan: re-plan when any of it changes.
  file(GLOB_RECURSE plan_inputs CONFIGURE_DEPENDS
    "${PROJECT_SOURCE_DIR}/kernels/*.hpp" "${PROJECT_SOURCE_DIR}/python/sycl_kernels/specs/*.py"
    "${PROJECT_SOURCE_DIR}/python/sycl_kernels/toolchain/*.py"
    "${PROJECT_SOURCE_DIR}/cmake/aot_build.py")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
    "${PROJECT_SOURCE_DIR}/kernels/variants.toml" "${PROJECT_SOURCE_DIR}/python/sycl_kernels/_dtypes.py"
    ${plan_inputs})

  include("${SYCL_KERNELS_AOT_DIR}/variants.cmake")
  get_property(images GLOBAL PROPERTY SYCL_KERNELS_AOT_IMAGES)
  set(manifest "${SYCL_KERNELS_AOT_DIR}/images/manifest.json")
  sycl_kernels_aot_build_command(manifest_command manifest --out-dir "${SYCL_KERNELS_AOT_DIR}")
  add_custom_command(
    OUTPUT "${manifest}"
    COMMAND ${manifest_command}
    DEPENDS ${images} "${SYCL_KERNELS_AOT_DIR}/plan.json"
    COMMENT "AOT manifest"
    VERBATIM)
  add_custom_target(aot_images ALL DEPENDS "${manifest}")
  install(FILES ${images} "${manifest}" DESTINATION sycl_kernels/aot)
endfunction()
