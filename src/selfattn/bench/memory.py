"""Peak memory of a piece of work, on CPU as on GPU.

On CUDA, PyTorch's caching allocator keeps the statistics (``max_memory_allocated``). On
CPU there is no such counter, so the work runs under ``torch.profiler`` with
``profile_memory=True``: every allocation and free made through PyTorch's CPU allocator
(including the buffers a fused kernel allocates internally) is recorded with the running
total, and the peak is the highest total reached above the level at the start.

This is how the benchmark reports memory ratios and how the tests check that a variant
never materialises an ``L × L`` matrix (:attr:`MemoryReport.largest` is the biggest
single allocation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

__all__ = ["MemoryReport", "measure_memory"]


@dataclass(frozen=True)
class MemoryReport:
    """What a call allocated.

    Attributes:
        peak: bytes: the highest amount allocated at once during the call, above what was
            allocated when it started.
        largest: bytes of the biggest single allocation (CPU only; on CUDA the peak).
        result: what the call returned.
    """

    peak: int
    largest: int
    result: Any


def measure_memory(fn: Callable[[], Any], device: torch.device | str = "cpu") -> MemoryReport:
    """Run ``fn()`` once and report its peak memory on ``device``."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = fn()
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - before
        return MemoryReport(peak=peak, largest=peak, result=result)
    if device.type != "cpu":
        raise ValueError(f"measure_memory: no memory statistics for device {device}")
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    # Allocations and frees, in order, each with the allocator's running total after it.
    events = sorted(
        (
            node
            for node in _walk(prof.profiler.kineto_results.experimental_event_tree())
            if node.tag == torch._C._profiler._EventType.Allocation
        ),
        key=lambda node: node.start_time_ns,
    )
    if not events:
        return MemoryReport(peak=0, largest=0, result=result)
    first = events[0].extra_fields
    start = first.total_allocated - first.alloc_size
    peak = max(node.extra_fields.total_allocated for node in events) - start
    largest = max(node.extra_fields.alloc_size for node in events)
    return MemoryReport(peak=max(0, peak), largest=max(0, largest), result=result)


def _walk(nodes: list[Any]) -> Iterator[Any]:
    for node in nodes:
        yield node
        yield from _walk(node.children)
