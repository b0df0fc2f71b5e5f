"""TensorBoard events beside metrics.jsonl: the same numbers, attention images, resuming
and the switch that turns them off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from selfattn.train.tensorboard import Board, attention_image, scalar_tag

from ..tiny_runs import train_config, write_reviews, write_tiny_config

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def events(run: Path) -> event_accumulator.EventAccumulator:
    accumulator = event_accumulator.EventAccumulator(str(run), size_guidance={"images": 0})
    accumulator.Reload()
    return accumulator


def metrics(run: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_events_hold_the_metrics_lines_and_attention_images(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_tiny_config(tmp_path, write_reviews(tmp_path / "reviews.csv"), epochs=2)
    run = tmp_path / "run"
    assert train_config(config, run) == 0
    assert f"tensorboard --logdir {run}" in capsys.readouterr().err
    lines = metrics(run)
    assert len(lines) == 2
    board = events(run)
    for line in lines:
        for key, value in line.items():
            if key == "epoch":
                continue
            (event,) = [e for e in board.Scalars(scalar_tag(key)) if e.step == line["epoch"]]
            assert event.value == pytest.approx(value, rel=1e-6), key
    assert {"train/loss", "train/lr", "dev/accuracy", "speed/tokens_per_s"} <= set(
        board.Tags()["scalars"]
    )
    images = board.Images("self-attention/layer_1")
    assert [image.step for image in images] == [1, 2]
    assert images[0].width > 0 and images[0].height > 0


@pytest.mark.filterwarnings("ignore:resuming with changed settings train.epochs")
def test_resuming_shows_each_epoch_once(tmp_path: Path) -> None:
    config = write_tiny_config(tmp_path, write_reviews(tmp_path / "reviews.csv"), epochs=1)
    run = tmp_path / "run"
    assert train_config(config, run, "train.tensorboard_images=0") == 0
    assert train_config(config, run, "train.epochs=2", resume=True) == 0
    losses = events(run).Scalars("train/loss")
    assert [event.step for event in losses] == [1, 2]
    assert [event.value for event in losses] == pytest.approx(
        [line["train_loss"] for line in metrics(run)], rel=1e-6
    )
    assert len(list(run.glob("events.out.tfevents.*"))) == 2


def test_switched_off_writes_no_events(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_tiny_config(tmp_path, write_reviews(tmp_path / "reviews.csv"), epochs=1)
    run = tmp_path / "run"
    assert train_config(config, run, "train.tensorboard=false") == 0
    assert "tensorboard" not in capsys.readouterr().err
    assert not list(run.glob("events.out.tfevents.*"))
    assert (run / "metrics.jsonl").is_file()


def test_without_the_package_one_hint_and_no_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("selfattn.train.tensorboard.installed", lambda: False)
    said: list[str] = []
    board = Board(tmp_path, enabled=True, say=said.append)
    assert board.opening_line() == (
        "no tensorboard events: pip install tensorboard (or train.tensorboard = false)"
    )
    board.epoch({"epoch": 1, "train_loss": 0.5}, torch.nn.Linear(1, 1))
    board.close()
    assert not list(tmp_path.iterdir())


def test_a_wrong_switch_is_refused_at_config_load(tmp_path: Path) -> None:
    from selfattn.config import load_config

    config = write_tiny_config(tmp_path, write_reviews(tmp_path / "reviews.csv"))
    with pytest.raises(ValueError, match=r"train\.tensorboard: expected bool, got 'yes'"):
        load_config(config, ["train.tensorboard=yes"])


def test_attention_image_puts_heads_side_by_side() -> None:
    maps = torch.tensor([[[1.0, 0.0], [0.5, 0.5]], [[0.0, 1.0], [0.0, 1.0]]])
    image = attention_image(maps)
    assert image.dtype.name == "uint8"
    cell = 16  # IMAGE_PIXELS over 2 cells, capped at MAX_CELL_PIXELS
    assert image.shape == (2 * cell, 2 * 2 * cell + 2)
    assert image[0, 0] == 0 and image[0, cell] == 255  # the largest weight is black


def test_a_model_whose_attention_cannot_be_drawn_keeps_its_scalars(tmp_path: Path) -> None:
    def probe(model: torch.nn.Module) -> list[tuple[str, list[torch.Tensor], list[str]]]:
        raise ValueError("architecture 'bigru' has no attention to show")

    said: list[str] = []
    with Board(tmp_path, enabled=True, probe=probe, say=said.append) as board:
        board.epoch({"epoch": 1, "train_loss": 0.5}, torch.nn.Linear(1, 1))
        board.epoch({"epoch": 2, "train_loss": 0.25}, torch.nn.Linear(1, 1))
    assert said == [
        "no attention images in tensorboard: architecture 'bigru' has no attention to show"
    ]
    losses = events(tmp_path).Scalars("train/loss")
    assert [(event.step, event.value) for event in losses] == [(1, 0.5), (2, 0.25)]
