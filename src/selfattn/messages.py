"""Small helpers for the one-line messages every layer prints (imports nothing of
selfattn)."""

from __future__ import annotations

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
