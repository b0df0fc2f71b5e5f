"""No efficient kernel ever materialises an L × L matrix, forward or backward: at L = 8192
the largest single allocation stays far below L·L·4 bytes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import selfattn.kernels.linear
import selfattn.kernels.linformer
import selfattn.kernels.lsh
import selfattn.kernels.nystrom
import selfattn.kernels.performer  # noqa: F401  (registers the kernels)
from selfattn.bench.memory import measure_memory
from selfattn.kernels import build_kernel

L, H, D = 8192, 2, 32

CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("linear", {}, False),
    ("linear", {}, True),
    # O(L·m) features: m = 128 keeps H·L·m·4 bytes at half the bound below.
    ("performer", {"num_features": 128}, False),
    ("performer", {"num_features": 128}, True),
    ("lsh", {}, False),
    ("lsh", {}, True),
    ("linformer", {"proj_dim": 256}, False),
    ("nystrom", {"num_landmarks": 64}, False),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "options", "causal"), CASES)
def test_no_quadratic_allocation(name: str, options: dict[str, Any], causal: bool) -> None:
    q, k, v = (torch.randn(1, H, L, D, requires_grad=True) for _ in range(3))
    kernel = build_kernel(name, head_dim=D, max_len=L, **options)

    def forward_backward() -> None:
        kernel(q, k, v, causal=causal)[0].sum().backward()

    report = measure_memory(forward_backward)
    assert report.largest < L * L * 4 / 16, f"{name}: largest allocation {report.largest} B"
    assert q.grad is not None and torch.isfinite(q.grad).all()
