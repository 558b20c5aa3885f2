"""Eight Python threads calling a mix of ops on their own tensors: first calls of
uncached variants included (one shared by all threads, racing on its compile, and
one per thread), every result checked, and no thread may hang. Eight threads
making a fresh process's first calls at once. And a process forked after ops ran
keeps working."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import sycl_kernels
import torch
from sycl_kernels import jit

from tests import references

THREADS = 8
SECONDS = 3.0
# Hidden sizes outside kernels/variants.toml and the rest of the suite: compiled here.
SHARED_UNCACHED_HIDDEN = 3001
OWN_UNCACHED_HIDDEN = 3003  # + 2 * thread index
FP32 = references.tolerance(torch.float32)


def _rmsnorm(gen: torch.Generator, hidden: int) -> Callable[[], None]:
    def call() -> None:
        x, weight = torch.randn(3, hidden, generator=gen), torch.randn(hidden, generator=gen)
        got = sycl_kernels.rmsnorm(x, weight, 1e-6)
        want = references.rmsnorm(x, weight, 1e-6)
        torch.testing.assert_close(got.double(), want, **FP32)

    return call


def _fused_add_rmsnorm(gen: torch.Generator) -> None:
    x, residual = torch.randn(5, 4096, generator=gen), torch.randn(5, 4096, generator=gen)
    weight = torch.randn(4096, generator=gen)
    want_x, want_residual = references.fused_add_rmsnorm(x, residual, weight, 1e-6)
    sycl_kernels.fused_add_rmsnorm(x, residual, weight, 1e-6)
    torch.testing.assert_close(x.double(), want_x, **FP32)
    torch.testing.assert_close(residual.double(), want_residual, **FP32)


def _qknorm_and_rope(gen: torch.Generator) -> None:
    qkv = torch.randn(7, (8 + 2 * 2) * 128, generator=gen).to(torch.bfloat16)
    q, k = qkv[:, : 8 * 128].view(7, 8, 128), qkv[:, 8 * 128 : 10 * 128].view(7, 2, 128)
    q_weight, k_weight = torch.randn(128, generator=gen), torch.randn(128, generator=gen)
    q_weight, k_weight = q_weight.to(torch.bfloat16), k_weight.to(torch.bfloat16)
    positions = torch.randint(0, 512, (7,), generator=gen)
    cos_sin_cache = references.rope_cache(512, 128)
    normed_q = references.rmsnorm(q, q_weight, 1e-6)
    normed_k = references.rmsnorm(k, k_weight, 1e-6)
    sycl_kernels.qknorm(q, k, q_weight, k_weight, 1e-6)
    tol = references.tolerance(torch.bfloat16)
    torch.testing.assert_close(q.double(), normed_q, **tol)
    torch.testing.assert_close(k.double(), normed_k, **tol)
    want_q = references.rope(positions, q, cos_sin_cache, is_neox=True)
    sycl_kernels.apply_rope(positions, q, k, cos_sin_cache, True)
    torch.testing.assert_close(q.double(), want_q, **tol)


def _silu_and_mul(gen: torch.Generator) -> None:
    x = torch.randn(4, 2 * 11008, generator=gen).to(torch.float16)
    got = sycl_kernels.silu_and_mul(x)
    want = references.act_and_mul("silu_and_mul", x)
    torch.testing.assert_close(got.double(), want, **references.tolerance(torch.float16))


def _timestep_embedding(gen: torch.Generator) -> None:
    t = torch.rand(16, generator=gen) * 1000
    got = sycl_kernels.timestep_embedding(t, 320)
    torch.testing.assert_close(
        got.double(), references.timestep_embedding(t, 320), rtol=0, atol=1e-4
    )


@pytest.mark.needs_bundled(
    "rmsnorm_fp32_h4096_cpu",
    "fused_add_rmsnorm_fp32_h4096_cpu",
    "qknorm_bf16_d128_cpu",
    "rope_bf16_d128_r128_neox_i64_cpu",
    "silu_and_mul_fp16_d11008_cpu",
    "timestep_embedding_fp32_d320",
)
def test_eight_threads_mix_ops_and_first_calls(fresh_cache: Path) -> None:
    before = jit.stats()
    start = threading.Barrier(THREADS)
    calls = [0] * THREADS
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        gen = torch.Generator().manual_seed(index)
        mix = [
            lambda: _fused_add_rmsnorm(gen),
            lambda: _qknorm_and_rope(gen),
            lambda: _silu_and_mul(gen),
            lambda: _timestep_embedding(gen),
            _rmsnorm(gen, 4096),
        ]
        try:
            start.wait(timeout=60)
            # All threads at once on one uncached variant, then one of their own.
            _rmsnorm(gen, SHARED_UNCACHED_HIDDEN)()
            _rmsnorm(gen, OWN_UNCACHED_HIDDEN + 2 * index)()
            calls[index] += 2
            end = time.monotonic() + SECONDS
            while time.monotonic() < end:
                mix[calls[index] % len(mix)]()
                calls[index] += 1
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads), "a thread hung (deadlock?)"
    if errors:
        raise errors[0]
    assert all(count > 2 for count in calls), calls
    after = jit.stats()
    # The shared variant compiles once for all eight threads, each own variant once.
    assert after.compiles - before.compiles == 1 + THREADS
    print(f"\n{THREADS} threads x {SECONDS} s: {sum(calls)} checked calls ({calls})")


def test_a_forked_child_runs_ops_and_first_calls(fresh_cache: Path) -> None:
    # Workers forked from a process that already ran ops (multiprocessing's fork
    # start method) keep working, a first call compiling in the child included.
    gen = torch.Generator().manual_seed(0)
    _rmsnorm(gen, 4096)()
    with warnings.catch_warnings():
        # Python 3.12+ warns that forking a multi-threaded process may deadlock.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        status = 1
        try:
            _rmsnorm(gen, 4096)()
            _rmsnorm(gen, SHARED_UNCACHED_HIDDEN + 100)()
            status = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(status)
    deadline = time.monotonic() + 120
    while (waited := os.waitpid(pid, os.WNOHANG)) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            raise AssertionError("the forked child hung")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(waited[1]) == 0, "the forked child failed"


# The process's first op calls, from eight threads at once: the host module and the
# CPU queue load once, with every thread waiting for them.
FIRST_CALLS = """
import threading, torch, sycl_kernels
start, results = threading.Barrier(8), []
x, w = torch.randn(2, 64), torch.randn(64)
def call():
    start.wait(timeout=60)
    results.append(sycl_kernels.rmsnorm(x, w, 1e-6))
threads = [threading.Thread(target=call) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join(timeout=120)
want = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6) * w
assert len(results) == 8, len(results)
for got in results: torch.testing.assert_close(got, want)
print("ok")
"""


def test_eight_threads_make_a_fresh_process_first_calls_at_once() -> None:
    result = subprocess.run(
        [sys.executable, "-c", FIRST_CALLS], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]
