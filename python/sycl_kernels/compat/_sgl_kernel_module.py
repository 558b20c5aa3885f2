"""What ``import sgl_kernel`` gives after ``sycl_kernels.compat.sgl_kernel.install()``,
which fills it with that module's ``__all__`` (sgl_kernel's names). A module file of
its own, so that importlib finds a spec for ``sgl_kernel`` as for any imported module;
empty until then (it imports nothing, which keeps compat.sgl_kernel out of a cycle)."""

__all__: list[str] = []
