"""selfattn.folder_lock: one process at a time in a folder; held twice by one process,
given back once per hold; a filesystem that cannot lock does not stop the work."""

from __future__ import annotations

import errno
import fcntl
from pathlib import Path

import pytest

from selfattn import folder_lock
from selfattn.folder_lock import held, hold, release

from .helpers_locks import lock_is_free, locked_by_another


def test_another_holder_is_named_in_one_line(tmp_path: Path) -> None:
    with locked_by_another(tmp_path, pid=777), pytest.raises(ValueError) as refused:
        hold(tmp_path, "a training")
    assert str(refused.value) == (
        f"{tmp_path} is in use by a training in another process (process 777); wait for it "
        "to end, or choose another folder"
    )
    assert lock_is_free(tmp_path)  # the refusal took nothing


def test_one_process_may_hold_a_folder_twice(tmp_path: Path) -> None:
    with held(tmp_path, "a sweep"):
        hold(tmp_path, "a training")  # e.g. a training run inside the sweep's process
        assert (tmp_path / ".lock").read_text().strip().isdigit()  # the holder's id
        release(tmp_path)
        assert not lock_is_free(tmp_path)  # the outer hold still stands
    assert lock_is_free(tmp_path)
    release(tmp_path)  # nothing held: nothing to do


def test_a_filesystem_without_locks_works_unlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with held(tmp_path, "a training"):
        assert tmp_path.resolve() not in folder_lock._HELD
