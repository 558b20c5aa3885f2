"""Shared fixtures: every test runs on a real SYCL device (the CPU device here)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
