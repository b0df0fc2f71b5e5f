"""Adaptive depth from the command line: a Universal Transformer with ACT halting trains,
reports its mean ponder steps, saves, loads, resumes, predicts, draws its attention and
exports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from selfattn.cli.main import main
from selfattn.models.act import AdaptiveDepth
from selfattn.tasks.task import build_for_spec
from selfattn.train.checkpoint import load_model

from ..tiny_runs import train_config, write_reviews, write_tiny_config

ACT = ("model.share_weights=true", 'model.halting="act"', "model.ponder_weight=0.05")


@pytest.mark.filterwarnings("ignore:resuming with changed settings")
def test_act_trains_saves_resumes_and_reports_ponder_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_tiny_config(tmp_path, write_reviews(tmp_path / "reviews.csv"), num_layers=3)
    run_dir = tmp_path / "run"
    assert train_config(config, run_dir, *ACT) == 0
    assert train_config(config, run_dir, *ACT, "train.epochs=2", resume=True) == 0
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [line["epoch"] for line in lines] == [1, 2]
    steps, cost = lines[-1]["dev_ponder_steps"], lines[-1]["dev_ponder_cost"]
    assert 1.0 <= steps <= 3.0 and steps < cost <= steps + 1
    capsys.readouterr()

    model = load_model(run_dir / "best", build=build_for_spec)[0]
    (act,) = [module for module in model.modules() if isinstance(module, AdaptiveDepth)]
    assert act.max_steps == 3 and act.ponder_weight == 0.05

    threads = torch.get_num_threads()
    try:
        assert main(["eval", str(run_dir), "--split", "dev", "--threads", "1"]) == 0
        metrics = json.loads(capsys.readouterr().out)
        assert 1.0 <= metrics["ponder_steps"] <= 3.0 and "accuracy" in metrics

        assert main(["predict", str(run_dir), "a warm funny film", "--threads", "1"]) == 0
        assert capsys.readouterr().out.split("\t")[0] in ("pos", "neg")

        image = tmp_path / "map.png"
        assert (
            main(["attention", str(run_dir), "a warm film", "-o", str(image), "--threads", "1"])
            == 0
        )
        assert image.read_bytes()[:4] == b"\x89PNG"

        # The exported graph runs every step (no data-dependent stop) to the same logits.
        exported = tmp_path / "model.pt2"
        assert main(["export", str(run_dir), "--format", "torch-export", "-o", str(exported)]) == 0
        assert "max |torch.export − torch| = " in capsys.readouterr().out
    finally:
        torch.set_num_threads(threads)


def test_act_without_shared_weights_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_tiny_config(tmp_path, write_reviews(tmp_path / "reviews.csv"))
    assert train_config(config, tmp_path / "run", 'model.halting="act"') != 0
    error = capsys.readouterr().err.strip()
    assert "share_weights" in error and len(error.splitlines()) == 1
