"""Numbers that are not finite come out of no command: ``predict`` and ``eval`` refuse a
checkpoint whose weights hold nan or inf in one line (exit 2) instead of printing nan."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from selfattn.cli.main import main
from selfattn.train.checkpoint import load_checkpoint, save_checkpoint

from ..tiny_runs import train_config, write_reviews, write_tiny_config


@pytest.mark.parametrize("command", [["predict", "a great film"], ["eval", "--split", "dev"]])
def test_weights_that_are_not_finite_are_refused_at_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    config = write_tiny_config(tmp_path, write_reviews(tmp_path / "reviews.csv"))
    assert train_config(config, tmp_path / "run") == 0
    best = tmp_path / "run" / "best"
    stored = load_checkpoint(best)
    weights = dict(stored.model_state)
    name = sorted(weights)[0]
    weights[name] = torch.full_like(weights[name], math.nan)
    save_checkpoint(
        best, weights, None, None, stored.state, stored.config, stored.vocabs, spec=stored.spec
    )
    capsys.readouterr()
    threads = torch.get_num_threads()
    try:
        status = main([command[0], str(tmp_path / "run"), *command[1:]])
    finally:
        torch.set_num_threads(threads)
    captured = capsys.readouterr()
    assert status == 2, captured
    assert captured.err.splitlines() == [
        f"selfattn {command[0]}: error: {best}: the stored weights hold nan or inf ({name}): "
        "the run trained to nan; train it again with a lower train.lr, or use another checkpoint"
    ]
    assert "nan" not in captured.out
