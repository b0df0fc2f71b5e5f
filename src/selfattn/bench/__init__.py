"""Measuring attention variants: peak memory and timing helpers, and the
``selfattn bench attention`` table."""

from __future__ import annotations

from selfattn.bench.memory import MemoryReport, measure_memory

__all__ = ["MemoryReport", "measure_memory"]
