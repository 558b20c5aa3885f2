"""sycl_kernels.bench: what `python -m sycl_kernels bench` and `demo` run.

- registry.py: the ops bench and demo time, each with its shapes (Case, BenchOp).
- <family>.py: each op family's cases against their torch eager forms, registered
  (bench/ops.py imports every module here; `new-op` writes a new op's as bench/<name>.py).
- ops.py: `bench`, every op against torch and the roofline, host overhead, kernel
  latency; demo's timing, against_torch.
- model.py: `bench --model CONFIG.json`, a Hugging Face model patched vs not.
- timing.py: median wall time of a call, synchronizing its device.
"""
