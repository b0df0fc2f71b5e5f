"""One process at a time in a folder: an exclusive advisory lock on ``FOLDER/.lock``, held
while a training writes its run folder or a sweep its sweep folder.

Two trainings into one run folder (the same sweep started twice, a ``selfattn train`` of a
folder a sweep is filling) would otherwise interleave their checkpoints and metrics lines
and leave a run that is neither. The lock is the operating system's (``flock``): it goes
away with the process that held it, however that process ended, so a crash never leaves a
folder locked. The lock file stays (removing it would let a third process lock a new file
while a second still waits on the old one) and holds the holder's process id, for the
message. Where ``fcntl`` does not exist (Windows), or the filesystem cannot lock (some
network mounts), folders are not locked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".lock"
# Folders this process holds: the open lock file and how many holds are open on it (a
# process may hold a folder twice, e.g. a sweep run in-process; a second flock of the
# same file from this process would refuse it).
_HELD: dict[Path, tuple[IO[str], int]] = {}


def hold(folder: Path, what: str) -> None:
    """Take ``folder``'s lock for this process (``folder`` must exist).

    Args:
        folder: the folder.
        what: the work, as the refusal names it ("a training", "a sweep").

    Raises:
        ValueError: one line: another process holds the lock (naming its id).
    """
    key = folder.resolve()
    if key in _HELD:
        handle, count = _HELD[key]
        _HELD[key] = (handle, count + 1)
        return
    if fcntl is None:  # pragma: no cover - Windows
        return
    handle = open(folder / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115 - held open
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise ValueError(
            f"{folder} is in use by {what} in another process (process {holder}); wait for "
            "it to end, or choose another folder"
        ) from None
    except OSError:  # a filesystem without locks (some network mounts): work unlocked
        handle.close()
        return
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    _HELD[key] = (handle, 1)


def release(folder: Path) -> None:
    """Give back one hold of ``folder``'s lock (nothing when this process holds none)."""
    key = folder.resolve()
    if key not in _HELD:
        return
    handle, count = _HELD.pop(key)
    if count > 1:
        _HELD[key] = (handle, count - 1)
        return
    handle.close()  # closing the file gives the lock back


@contextmanager
def held(folder: Path, what: str) -> Iterator[None]:
    """:func:`hold` ``folder`` for the ``with`` block, :func:`release` it after."""
    hold(folder, what)
    try:
        yield
    finally:
        release(folder)
