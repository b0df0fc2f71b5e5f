"""Small helpers for the one-line messages every layer prints (imports nothing)."""

from __future__ import annotations


def plural(count: int, noun: str) -> str:
    """``1 layer``, ``2 layers``; a noun ending in a hiss takes ``es``: ``2 processes``."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {noun}{'es' if noun.endswith(('s', 'sh', 'x')) else 's'}"
