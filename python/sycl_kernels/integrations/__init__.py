"""sycl_kernels.integrations: the kernels swapped into other libraries' models.

One submodule per library (transformers, diffusers); each imports its library, so
import the one you use. Neither library is a dependency of sycl_kernels.
"""
