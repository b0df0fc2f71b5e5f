"""Small helpers for the one-line messages every layer prints (imports nothing)."""

from __future__ import annotations


def plural(count: int, noun: str) -> str:
    """``1 layer``, ``2 layers``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
