"""sycl_kernels.toolchain: what turns a spec into a device image, at build time and for the JIT.

- sources.py: a kernel's compile inputs (translation unit, include tree of kernels/,
  flags) and their digest, the key of every cache and of the AOT images.
- compiler.py: runs the device compiler (the sycl-kernels-compile tool) in a process.
- aot_build.py: the wheel build's AOT steps (plan, manifest), run by CMake through
  cmake/aot_build.py (cmake/AotVariants.cmake).

Torch-free: the wheel build imports these without torch or the package's __init__.
The runtime loader (sycl_kernels.jit) calls sources and compiler when it compiles.
"""
