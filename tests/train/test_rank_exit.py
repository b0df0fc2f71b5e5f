"""A rank torchrun started leaves at once after its command returns (no interpreter
shutdown, where a process group still held can abort it); a plain command exits
normally."""

from __future__ import annotations

import pytest

import selfattn.__main__ as entry


def test_a_rank_leaves_without_the_interpreters_shutdown(monkeypatch: pytest.MonkeyPatch) -> None:
    left: list[int] = []
    monkeypatch.setattr(entry, "main", lambda: 2)
    monkeypatch.setattr(entry.os, "_exit", lambda status: left.append(status))
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    with pytest.raises(SystemExit):  # os._exit stubbed, so run() goes on to sys.exit
        entry.run()
    assert left == [2]


def test_a_plain_command_exits_normally(monkeypatch: pytest.MonkeyPatch) -> None:
    left: list[int] = []
    monkeypatch.setattr(entry, "main", lambda: 0)
    monkeypatch.setattr(entry.os, "_exit", lambda status: left.append(status))
    for name in ("TORCHELASTIC_RUN_ID", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as leaving:
        entry.run()
    assert leaving.value.code == 0 and left == []
