"""Native binaries (jit/native.py): a fresh process loads the device's own binary of a
cached or bundled kernel instead of its SPIR-V, computes the same result, and a
corrupt or foreign binary falls back to the SPIR-V with a warning and is replaced."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sycl_kernels.jit.cache import DiskCache

from tests.jit.test_cache import STATS_AFTER_RMSNORM, _run

HIDDEN = 4030  # outside kernels/variants.toml: compiled, then served by the disk cache


def _native_entries(cache_root: Path) -> list:
    return DiskCache(cache_root / "native").entries()


def test_second_process_loads_the_native_binary(fresh_cache: Path) -> None:
    script = STATS_AFTER_RMSNORM.format(hidden=HIDDEN)
    first, second = _run(script), _run(script)
    assert first["ok"] and second["ok"]
    assert (first["compiles"], first["native_loads"]) == (1, 0)
    assert (second["compiles"], second["disk_hits"], second["native_loads"]) == (0, 1, 1)
    assert [e.name for e in _native_entries(fresh_cache)] == [f"rmsnorm_fp32_h{HIDDEN}_cpu"]


@pytest.mark.needs_bundled("rmsnorm_fp32_h4096_cpu")
def test_bundled_kernel_gets_a_native_binary_too(fresh_cache: Path) -> None:
    script = STATS_AFTER_RMSNORM.format(hidden=4096)
    first, second = _run(script), _run(script)
    assert first["ok"] and second["ok"]
    assert (first["aot_loads"], first["native_loads"]) == (1, 0)
    assert (second["aot_loads"], second["native_loads"], second["compiles"]) == (0, 1, 0)


def test_native_cache_can_be_turned_off(fresh_cache: Path) -> None:
    script = STATS_AFTER_RMSNORM.format(hidden=HIDDEN + 2)
    env = {"SYCL_KERNELS_NATIVE_CACHE": "0"}
    first, second = _run(script, env), _run(script, env)
    assert first["ok"] and second["ok"] and second["native_loads"] == 0
    assert _native_entries(fresh_cache) == []


# The rmsnorm of STATS_AFTER_RMSNORM, printing its stats and the warnings it gave.
WARNINGS_AND_STATS = """
import json, warnings, torch, sycl_kernels
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    h = {hidden}
    x, w = torch.randn(5, h), torch.randn(h)
    got = sycl_kernels.rmsnorm(x, w).double()
x64 = x.double()
ref = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
ok = bool(torch.allclose(got, ref, rtol=1e-5, atol=1e-5))
stats = vars(sycl_kernels.jit.stats())
print(json.dumps({{"ok": ok, "warnings": [str(c.message) for c in caught], **stats}}))
"""


@pytest.mark.parametrize("damage", ["corrupt", "foreign"])
def test_bad_native_binary_falls_back_and_is_replaced(fresh_cache: Path, damage: str) -> None:
    script = WARNINGS_AND_STATS.format(hidden=HIDDEN + 4)
    _run(script)
    (entry,) = _native_entries(fresh_cache)
    good = entry.path.read_bytes()
    if damage == "corrupt":
        entry.path.write_bytes(good[: len(good) // 2])
        warning = "deleting corrupt cache entry"
    else:
        # Another kernel's binary under this key: a whole entry that lacks the kernel.
        _run(WARNINGS_AND_STATS.format(hidden=HIDDEN + 6))
        other = next(e for e in _native_entries(fresh_cache) if e.path != entry.path)
        shutil.copyfile(other.path, entry.path)
        warning = "did not load"
    fallback = _run(script)
    assert fallback["ok"] and fallback["native_loads"] == 0 and fallback["compiles"] == 0
    assert any(warning in w for w in fallback["warnings"]), fallback["warnings"]
    assert entry.path.read_bytes() == good
    healed = _run(script)
    assert healed["ok"] and healed["native_loads"] == 1 and healed["warnings"] == []
