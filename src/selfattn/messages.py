"""Small helpers for the one-line messages every layer prints (imports nothing of
selfattn)."""

from __future__ import annotations

import math
import os
import stat


def plural(count: int, noun: str) -> str:
    """``1 layer``, ``2 layers``; a noun ending in a hiss takes ``es``: ``2 processes``."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {noun}{'es' if noun.endswith(('s', 'sh', 'x')) else 's'}"


def not_a_file(path: str | os.PathLike[str]) -> str:
    """Why ``path`` is not a file to read, for ``f"{path}: {not_a_file(path)}"``: ``no such
    file``, ``a folder, not a file``, ``not a regular file (a character device)``, …"""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as error:
        return f"cannot read it ({error.strerror})"
    if stat.S_ISDIR(mode):
        return "a folder, not a file"
    if stat.S_ISREG(mode):
        return "a regular file"
    kinds = (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    )
    kind = next((name for test, name in kinds if test(mode)), "a special file")
    return f"not a regular file ({kind})"


def check_range(
    name: str,
    value: float | None,
    *,
    above: float | None = None,
    at_least: float | None = None,
    below: float | None = None,
    at_most: float | None = None,
    none: bool = False,
) -> None:
    """Refuse ``value`` unless it is finite and within the given bounds.

    Args:
        name: the field, ``section.field``.
        value: its value; ``None`` passes when ``none`` is set.
        above: the value must be greater than this.
        at_least: the value must be at least this.
        below: the value must be less than this.
        at_most: the value must be at most this.
        none: ``None`` is allowed (an option left off).

    A range written as ``if value <= 0: raise`` lets nan through (every comparison with
    nan is false); this states the range once and tests membership instead.

    Raises:
        ValueError: ``"train.lr must be in (0, 10], got 10000.0"``; for nan or ±inf
            ``"train.lr must be finite and in (0, 10], got inf"``.
    """
    if value is None and none:
        return
    finite = value is not None and math.isfinite(value)
    if (
        finite
        and value is not None
        and (above is None or value > above)
        and (at_least is None or value >= at_least)
        and (below is None or value < below)
        and (at_most is None or value <= at_most)
    ):
        return
    rule = _rule(above, at_least, below, at_most) + (" or none" if none else "")
    qualifier = "" if finite else "finite and "
    raise ValueError(f"{name} must be {qualifier}{rule}, got {value}")


def _rule(
    above: float | None, at_least: float | None, below: float | None, at_most: float | None
) -> str:
    """``> 0``, ``>= 1``, ``in (0, 1]``: the range as the refusal spells it."""
    low = f"({_show(above)}" if above is not None else ""
    low = f"[{_show(at_least)}" if at_least is not None else low
    high = f"{_show(below)})" if below is not None else ""
    high = f"{_show(at_most)}]" if at_most is not None else high
    if low and high:
        return f"in {low}, {high}"
    if low:
        return f"{'>' if above is not None else '>='} {low[1:]}"
    if high:
        return f"{'<' if below is not None else '<='} {high[:-1]}"
    return "a number"


def _show(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"
