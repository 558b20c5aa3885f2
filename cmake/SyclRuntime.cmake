# cmake/SyclRuntime.cmake: finds the SYCL runtime of the intel-sycl-rt wheel and defines SYCL::runtime.
#
# Under pip's build isolation the wheel's data files are not under the
# interpreter's sys.prefix, so the files are located through the installed
# distribution's own file list.

find_package(Python COMPONENTS Interpreter REQUIRED)

execute_process(
  COMMAND "${Python_EXECUTABLE}" -c [=[
import importlib.metadata as md
dist = md.distribution("intel-sycl-rt")
want = {"sycl/sycl.hpp": None, "libsycl.so.8": None}
for f in dist.files or []:
    for suffix in want:
        if f.as_posix() == suffix or f.as_posix().endswith("/" + suffix):
            want[suffix] = dist.locate_file(f).resolve()
missing = [k for k, v in want.items() if v is None]
if missing:
    raise SystemExit("intel-sycl-rt lacks " + ", ".join(missing))
print(want["sycl/sycl.hpp"].parent.parent, end=";")
print(want["libsycl.so.8"], end=";")
print(dist.version, end="")
]=]
  OUTPUT_VARIABLE _sycl_found
  ERROR_VARIABLE _sycl_error
  RESULT_VARIABLE _sycl_result)
if(NOT _sycl_result EQUAL 0)
  message(FATAL_ERROR
    "The SYCL runtime wheel was not found (${_sycl_error}).\n"
    "Install it into the build environment: pip install 'intel-sycl-rt==2025.3.*'")
endif()
list(GET _sycl_found 0 SYCL_INCLUDE_DIR)
list(GET _sycl_found 1 SYCL_LIBRARY)
list(GET _sycl_found 2 SYCL_RUNTIME_VERSION)
message(STATUS "SYCL runtime ${SYCL_RUNTIME_VERSION}: ${SYCL_LIBRARY}")

# The OpenCL CPU runtime, optional: the AOT build compiles on the SYCL CPU device.
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c [=[
import importlib.metadata as md
try:
    files = md.distribution("intel-opencl-rt").files or []
except md.PackageNotFoundError:
    files = []
for f in files:
    if f.name == "libintelocl.so":
        print(f.locate().resolve(), end="")
        break
]=]
  OUTPUT_VARIABLE SYCL_CPU_RUNTIME)
message(STATUS "SYCL CPU device runtime: ${SYCL_CPU_RUNTIME}")

add_library(SYCL::runtime SHARED IMPORTED)
set_target_properties(SYCL::runtime PROPERTIES
  IMPORTED_LOCATION "${SYCL_LIBRARY}"
  IMPORTED_NO_SONAME FALSE
  INTERFACE_INCLUDE_DIRECTORIES "${SYCL_INCLUDE_DIR}"
  INTERFACE_COMPILE_DEFINITIONS SYCL_DISABLE_FSYCL_SYCLHPP_WARNING)
