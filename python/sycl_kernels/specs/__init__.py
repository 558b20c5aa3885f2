"""sycl_kernels.specs: the kernel catalog, what each kernel is and which variants exist.

- spec.py: KernelSpec (one compiled kernel: name, template arguments, parameters,
  work-group size) and its translation unit; Param; read_specs/write_specs.
- norm.py, rope.py, activation.py, quant.py, routing.py, moe.py, kv_cache.py,
  sampling.py, penalties.py, diffusion.py: the ops' spec factories, one module an
  op family (`python -m sycl_kernels new-op` writes a new op's module here).
- variants.py: the AOT manifest (kernels/variants.toml) turned into specs, through
  the factories the modules here register with @manifest_op.
- model_variants.py: the model families, and the variants a patched model calls.

Plain data and functions: importing these modules never imports torch, the SYCL
runtime (sycl_kernels._runtime) or the loader (sycl_kernels.jit; only a call of
write_specs borrows jit.cache's atomic file writer). The wheel build imports them
without torch (cmake/aot_build.py); ops/ imports them to name its kernels.
"""
