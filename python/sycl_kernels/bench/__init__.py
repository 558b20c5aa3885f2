"""sycl_kernels.bench: what `python -m sycl_kernels bench` and `demo` run.

The ops import registry.py alone, and only an op that keeps its bench case in its
own module (as `python -m sycl_kernels new-op` writes it); registry.py imports
nothing of the package.

- registry.py: the ops bench and demo time, each with its shapes (Case, BenchOp).
- ops.py: `bench`, every op against torch and the roofline, host overhead, kernel latency.
- model.py: `bench --model CONFIG.json`, a Hugging Face model patched vs not.
- cases.py: the existing ops' cases, each op and its torch eager form on the same tensors.
- timing.py: median wall time of a call, synchronizing its device.
"""
