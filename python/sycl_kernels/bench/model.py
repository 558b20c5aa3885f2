"""sycl_kernels.bench.model: `bench --model CONFIG.json`, a Hugging Face model patched vs not.

The model is built from its config.json with random weights (nothing is downloaded)
and runs on CPU tensors, so the kernels run on the SYCL CPU device. Per dtype: a
prefill of `prefill` tokens (logits of the last token only, as generate() asks),
then `decode` greedy single-token steps on its KV cache; Hugging Face's code and
the patched model take turns (the machine may be shared), after one warm-up run of
each (first calls compile kernels); medians of `repeats`. One more patched run
times the kernels where the patch calls them (on sycl_kernels.ops) for the share
of the patched model's time spent in them.
"""

from __future__ import annotations

import collections
import contextlib
import json
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .. import _runtime, ops
from .._dtypes import BY_NAME

# What integrations.transformers calls, timed for the share.
_KERNELS = ("rmsnorm", "gemma_rmsnorm", "act_and_mul", "apply_rope")


@dataclass(frozen=True)
class ModelResult:
    config: str
    dtype: str
    model: str
    """"transformers" (Hugging Face's code) or "patched"."""
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    prefill_kernel_share: float | None
    decode_kernel_share: float | None
    """Fraction of the patched run's time inside the kernels (None for transformers)."""


@dataclass(frozen=True)
class _Run:
    prefill_s: float
    decode_s: float
    prefill_kernel_s: float
    decode_kernel_s: float


def _run(
    model: torch.nn.Module,
    ids: torch.Tensor,
    decode: int,
    kernel_seconds: Callable[[], float] = lambda: 0.0,
) -> _Run:
    with torch.inference_mode():
        kernels, start = kernel_seconds(), time.perf_counter()
        out = model(ids, use_cache=True, logits_to_keep=1)
        prefill, prefill_kernels = time.perf_counter() - start, kernel_seconds() - kernels
        kernels, start = kernel_seconds(), time.perf_counter()
        for _ in range(decode):
            token = out.logits[:, -1:].argmax(-1)
            out = model(token, cache=out.cache, use_cache=True)
        return _Run(
            prefill, time.perf_counter() - start, prefill_kernels, kernel_seconds() - kernels
        )


@contextlib.contextmanager
def _timed_kernels() -> Iterator[Callable[[], float]]:
    """Yields the seconds spent so far in the kernels the patch calls (CPU calls are
    synchronous, so wall time around a call is the kernel's)."""
    spent = [0.0]
    originals = {name: getattr(ops, name) for name in _KERNELS}

    def timed(kernel: Callable) -> Callable:
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return kernel(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - start

        return call

    for name, kernel in originals.items():
        setattr(ops, name, timed(kernel))
    try:
        yield lambda: spent[0]
    finally:
        for name, kernel in originals.items():
            setattr(ops, name, kernel)


def bench_model(
    config_path: Path, dtype: str, prefill: int, decode: int, batch: int, repeats: int
) -> tuple[list[ModelResult], list[str]]:
    """HF and patched rows for one config and dtype, and the patch report."""
    import transformers

    from ..integrations import transformers as patcher

    config = transformers.AutoConfig.from_pretrained(config_path)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(
        config, dtype=BY_NAME[dtype].torch_dtype
    ).eval()
    ids = torch.randint(0, config.vocab_size, (batch, prefill))
    runs: dict[str, list[_Run]] = {"transformers": [], "patched": []}
    for _ in range(repeats + 1):
        runs["transformers"].append(_run(model, ids, decode))
        report = patcher.patch(model)
        try:
            runs["patched"].append(_run(model, ids, decode))
        finally:
            patcher.unpatch(model)
    patcher.patch(model)
    try:
        with _timed_kernels() as kernel_seconds:
            timed = _run(model, ids, decode, kernel_seconds)
    finally:
        patcher.unpatch(model)
    shares = (timed.prefill_kernel_s / timed.prefill_s, timed.decode_kernel_s / timed.decode_s)
    results = [
        ModelResult(
            config_path.name,
            dtype,
            name,
            # timings[0] was the warm-up.
            batch * prefill / statistics.median(r.prefill_s for r in timings[1:]),
            batch * decode / statistics.median(r.decode_s for r in timings[1:]),
            *(shares if name == "patched" else (None, None)),
        )
        for name, timings in runs.items()
    ]
    return results, report


def _summary(report: list[str]) -> str:
    """The report's lines (`path: kernel (Class)`, `path: unpatched, why`) counted by kind."""
    kinds = collections.Counter(
        line.split(": ", 1)[1].split(" (")[0].split(",")[0] for line in report
    )
    return ", ".join(f"{count} x {kind}" for kind, count in kinds.items())


def _table(results: list[ModelResult]) -> str:
    lines = [
        "| config | dtype | model | prefill tokens/s | decode tokens/s "
        "| time in kernels (prefill / decode) |",
        "|---|---|---|---|---|---|",
    ]
    hf: dict[tuple[str, str], ModelResult] = {}
    for r in results:
        base = hf.setdefault((r.config, r.dtype), r)
        prefill, decode = f"{r.prefill_tokens_per_s:.1f}", f"{r.decode_tokens_per_s:.2f}"
        share = "-"
        if r is not base:
            prefill += f" ({r.prefill_tokens_per_s / base.prefill_tokens_per_s:.2f}x)"
            decode += f" ({r.decode_tokens_per_s / base.decode_tokens_per_s:.2f}x)"
            share = f"{r.prefill_kernel_share:.1%} / {r.decode_kernel_share:.1%}"
        lines.append(f"| {r.config} | {r.dtype} | {r.model} | {prefill} | {decode} | {share} |")
    return "\n".join(lines)


def run(
    configs: list[Path],
    dtypes: list[str],
    prefill: int,
    decode: int,
    batch: int,
    repeats: int,
    json_path: Path | None,
) -> int:
    if min(prefill, decode, batch, repeats) < 1:
        raise SystemExit("bench --model: --prefill, --decode, --batch and --repeats must be >= 1")
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise SystemExit("bench --model needs transformers: pip install transformers") from None
    device = _runtime.cpu_queue().device["name"]
    print(
        f"# sycl_kernels bench --model on the SYCL CPU device ({device}): batch {batch}, "
        f"prefill {prefill} tokens, {decode} decode steps, median of {repeats}, "
        f"{torch.get_num_threads()} torch threads\n"
    )
    results: list[ModelResult] = []
    for path in configs:
        for dtype in dtypes:
            rows, report = bench_model(path, dtype, prefill, decode, batch, repeats)
            results += rows
            print(f"{path.name} {dtype}: {_summary(report)}")
    print("\n" + _table(results))
    if json_path is not None:
        document = {
            "device": device,
            "batch": batch,
            "prefill": prefill,
            "decode": decode,
            "repeats": repeats,
            "results": [asdict(r) for r in results],
        }
        json_path.write_text(json.dumps(document, indent=1) + "\n")
    return 0
