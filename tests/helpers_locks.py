"""A run or sweep folder locked as another process would lock it (selfattn.folder_lock)."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def locked_by_another(folder: Path, pid: int = 4242) -> Iterator[None]:
    """``folder``'s lock held, with ``pid`` written in it, on a file description of its own,
    as another process holds it (a second ``flock`` of the file conflicts even within one
    process)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+", encoding="utf-8") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        handle.write(f"{pid}\n")
        handle.flush()
        yield


def lock_is_free(folder: Path) -> bool:
    """Whether ``folder``'s lock can be taken now (nobody, this process included, holds it)."""
    with open(folder / ".lock", "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
