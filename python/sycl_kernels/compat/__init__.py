"""sycl_kernels.compat: SGLang's sgl_kernel and vLLM's custom-op call shapes on the core ops."""
