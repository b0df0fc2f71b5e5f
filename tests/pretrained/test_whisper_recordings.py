"""whisper-base fine-tuned through the CLI on a user's ``path,text`` CSV of real recordings
(two of pocketsphinx-testdata's card recordings): a training step, then ``eval --data``
from the run folder alone (``predict`` reads a run as the tiny model's tests check).
Skipped, saying why, where whisper-base or the recordings cannot be fetched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from selfattn.cli.main import main
from selfattn.pretrained.recordings import Recording

from ..helpers_cli import write_config

pytestmark = pytest.mark.usefixtures("one_thread")


def test_whisper_base_fine_tunes_on_a_csv_of_real_recordings(
    whisper_folder: Path,
    cards: dict[str, Recording],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The user's folder: recordings beside the CSV files that name them.
    (tmp_path / "clips").mkdir()
    rows = []
    for stem in ("001", "004"):  # "ten of clubs" (1.1 s), "five five" (1.6 s)
        shutil.copyfile(cards[stem].path, tmp_path / "clips" / f"{stem}.wav")
        rows.append(f"clips/{stem}.wav,{cards[stem].reference}\n")
    (tmp_path / "train.csv").write_text("path,text\n" + "".join(rows), encoding="utf-8")
    (tmp_path / "test.csv").write_text("path,text\n" + rows[0], encoding="utf-8")
    run = tmp_path / "run"
    config = write_config(
        tmp_path / "c.toml",
        run_dir=run,
        data={"dataset": tmp_path / "train.csv", "dev_fraction": 0.0, "batch_size": 2},
        model={"pretrained": whisper_folder},
        seq2seq={"encoder_seconds": 4.0},
        # The frozen encoder keeps the step and the checkpoint's optimizer state small.
        train={"epochs": 1, "lr": 1e-6, "warmup_steps": 0, "freeze_encoder": True, "threads": 1},
    )
    assert main(["train", str(config), "--no-progress"]) == 0
    [logged] = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert logged["step"] == 1 and 0 < logged["train_loss"] < 5, logged
    capsys.readouterr()
    assert main(["eval", str(run), "--data", str(tmp_path / "test.csv")]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["count"] == 1
    # One step at a tiny rate leaves whisper-base as it was: it still hears the card
    # ("10 of clubs" or "Ten of clubs."), which the normalised word error rate scores as
    # right whatever the case, punctuation or digits; a model whose weights were lost on
    # the way (from the checkpoint, into the run, back out) would not.
    assert metrics["word_error_rate"] == 0.0, metrics
