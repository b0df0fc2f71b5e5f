"""``selfattn train --nproc N``'s launcher: the ranks' exit status without torchrun's
report when they said why themselves; one line naming each failed rank otherwise."""

from __future__ import annotations

import pytest
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from selfattn.train import torchrun


def failing(*exitcodes: int):
    def run(args: object) -> None:
        failures = {
            rank: ProcessFailure(local_rank=rank, pid=100 + rank, exitcode=code, error_file="")
            for rank, code in enumerate(exitcodes)
        }
        raise ChildFailedError("selfattn", failures)

    return run


@pytest.mark.parametrize("status", [2, 130])
def test_ranks_that_said_why_give_their_status_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], status: int
) -> None:
    monkeypatch.setattr(torchrun, "run", failing(status, status))
    assert torchrun.main(["--nproc_per_node", "2", "-m", "selfattn", "train", "x"]) == status
    assert capsys.readouterr().err == ""


def test_ranks_torchrun_stopped_after_one_said_why_are_quiet_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """torchrun sends SIGTERM to the other ranks once one has failed: the one that said why
    gives the status."""
    monkeypatch.setattr(torchrun, "run", failing(-15, 2))
    assert torchrun.main(["--nproc_per_node", "2", "-m", "selfattn", "train", "x"]) == 2
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(torchrun, "run", failing(-15, -15))  # stopped, and nobody said why
    assert torchrun.main(["--nproc_per_node", "2", "-m", "selfattn", "train", "x"]) == 1


def test_another_failure_is_one_line_naming_each_rank(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(torchrun, "run", failing(2, -6))
    assert torchrun.main(["--nproc_per_node", "2", "-m", "selfattn", "train", "x"]) == 1
    error = capsys.readouterr().err
    assert error == (
        "selfattn train: a process failed (rank 0: status 2, rank 1: signal SIGABRT); "
        "its output is above\n"
    )


def test_success_is_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torchrun, "run", lambda args: None)
    assert torchrun.main(["--nproc_per_node", "2", "-m", "selfattn", "train", "x"]) == 0
