"""Fine-tuning a Whisper checkpoint (``model.pretrained`` naming one) on recordings with
transcripts: a tiny random Whisper-shaped folder fine-tunes through the CLI's road, its
loss falls, the run folder predicts, evaluates and resumes, and a user's ``path,text``
CSV refuses bad rows in one line naming the file and line."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from selfattn.cli.main import main
from selfattn.data.readers.speech_text_csv import read_speech_text_csv
from selfattn.datatypes import DataError, Example
from selfattn.pretrained.transcribe import WhisperTokenizer
from selfattn.pretrained.whisper import load_whisper
from selfattn.pretrained.whisper_finetune import (
    IGNORE,
    WhisperCollator,
    encoder_samples,
    whisper_loss,
)
from selfattn.tasks import Predictor

from ..helpers_cli import epochs_logged, one_line_error, write_config
from .whisper_fixtures import SPECIALS

pytestmark = pytest.mark.usefixtures("one_thread")

RATE = 16_000
#: What the tiny recordings say (the tiny tokenizer's words), each said twice.
SAYINGS = ["w1 w2", "w3", "w4 w5 w6", "w7 w8"]


def write_wav(path: Path, seed: int, seconds: float = 0.2) -> Path:
    """``seconds`` of seeded noise at 16 kHz."""
    samples = 0.3 * np.random.default_rng(seed).standard_normal(int(seconds * RATE))
    soundfile.write(path, samples.astype(np.float32), RATE)
    return path


def write_csv(folder: Path, name: str, rows: list[str]) -> Path:
    """A ``path,text`` CSV of ``rows`` (written as given)."""
    path = folder / name
    path.write_text("path,text\n" + "".join(row + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``train.csv`` (8 recordings) and ``test.csv`` (4 of them)."""
    folder = tmp_path_factory.mktemp("recordings")
    rows = []
    for i, text in enumerate(SAYINGS * 2):
        write_wav(folder / f"r{i}.wav", seed=i % len(SAYINGS))
        rows.append(f"r{i}.wav,{text}")
    write_csv(folder, "train.csv", rows)
    write_csv(folder, "test.csv", rows[: len(SAYINGS)])
    return folder


def whisper_config(folder: Path, recordings: Path, tmp: Path, **train: object) -> Path:
    """A fine-tuning config of the Whisper ``folder`` on ``recordings``' CSVs."""
    return write_config(
        tmp / "c.toml",
        run_dir=tmp / "run",
        data={
            "dataset": recordings / "train.csv",
            "test": recordings / "test.csv",
            "batch_size": 4,
        },
        model={"pretrained": folder},
        train={"epochs": 6, "lr": 3e-3, "warmup_steps": 0, "seed": 0, "threads": 1, **train},
    )


def train_losses(run_dir: Path) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["train_loss"] for line in lines]


# ------------------------------------------------------------------ the batch


def test_targets_are_the_transcript_and_end_of_text_after_the_prefix(tiny_folder: Path) -> None:
    model = load_whisper(tiny_folder)
    collate = WhisperCollator(WhisperTokenizer.from_folder(tiny_folder), model.config)
    wave = np.zeros((800, 1), dtype=np.float32)
    batch = collate([Example(None, wave, ("w1", "w2"), "a"), Example(None, wave, ("w3",), "b")])
    prefix = [51, 52, 55, 56]  # start of transcript, en, transcribe, no timestamps
    eot = SPECIALS["<|endoftext|>"]
    assert batch.tokens.tolist() == [[*prefix, 1, 2], [*prefix, 3, eot]]
    # The prefix is given, never predicted: targets start at its last position.
    assert batch.targets.tolist() == [
        [IGNORE, IGNORE, IGNORE, 1, 2, eot],
        [IGNORE, IGNORE, IGNORE, 3, eot, IGNORE],
    ]
    # The encoder reads the tiny model's whole window (12 positions: 24 frames).
    assert tuple(batch.features.shape) == (2, 8, 24)


def test_encoder_seconds_pads_to_whole_positions_within_the_window() -> None:
    window = 30 * RATE
    assert encoder_samples(16_000, None, window) == window
    assert encoder_samples(16_000, 4.0, window) == 64_000
    assert encoder_samples(70_001, 4.0, window) == 70_080  # the longest, to 20 ms
    assert encoder_samples(16_000, 0.001, window) == 16_000  # the recording's own frames
    assert encoder_samples(16_000, 60.0, window) == window


def test_a_few_steps_lower_the_loss(tiny_folder: Path) -> None:
    model = load_whisper(tiny_folder).train()
    collate = WhisperCollator(WhisperTokenizer.from_folder(tiny_folder), model.config)
    rng = np.random.default_rng(0)
    examples = [
        Example(None, rng.standard_normal((3000, 1)).astype(np.float32), tuple(s.split()), s)
        for s in SAYINGS
    ]
    batch = collate(examples)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        loss = whisper_loss(model, batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    # Falling at every step, by a third in eight.
    assert all(b < a for a, b in itertools.pairwise(losses)), losses
    assert losses[-1] < 0.7 * losses[0], losses


# ------------------------------------------------------------------ the run


def test_a_fine_tuned_run_predicts_evaluates_and_resumes(
    tiny_folder: Path, recordings: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = whisper_config(tiny_folder, recordings, tmp_path, epochs=4)
    assert main(["train", str(config), "--no-progress"]) == 0
    run = tmp_path / "run"
    losses = train_losses(run)
    assert losses[-1] < losses[0], losses
    capsys.readouterr()
    # predict reads a recording; the run needs no pretrained folder.
    assert main(["predict", str(run), str(recordings / "r0.wav")]) == 0
    predicted = capsys.readouterr().out.strip()
    predictor = Predictor(run)
    [example] = predictor.read(str(recordings / "r0.wav"))
    assert predictor.predict(example) == predicted
    assert main(["eval", str(run), "--split", "test"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["count"] == len(SAYINGS)
    assert {"exact_match", "token_error_rate", "char_error_rate"} <= set(metrics)
    # The tiny words are lower case without punctuation: normalising changes none of them.
    assert metrics["word_error_rate"] == metrics["token_error_rate"]
    assert main(["eval", str(run), "--data", str(recordings / "train.csv")]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 2 * len(SAYINGS)
    image = tmp_path / "cross.png"
    assert main(["attention", str(run), str(recordings / "r0.wav"), "-o", str(image)]) == 0
    assert image.is_file()
    # The weights it saved are the weights it predicts with.
    trained = predictor.model.state_dict()
    reloaded = Predictor(run).model.state_dict()
    assert all(torch.equal(trained[name], reloaded[name]) for name in trained)
    resume = ["train", str(config), "--no-progress", "--resume", "--set", "train.epochs=5"]
    with pytest.warns(UserWarning, match="resuming with changed settings train.epochs"):
        assert main(resume) == 0
    assert epochs_logged(run) == [1, 2, 3, 4, 5]


def test_a_frozen_encoder_stays_as_the_checkpoint_had_it(
    tiny_folder: Path, recordings: Path, tmp_path: Path
) -> None:
    config = whisper_config(tiny_folder, recordings, tmp_path, epochs=1, freeze_encoder=True)
    assert main(["train", str(config), "--no-progress"]) == 0
    trained = Predictor(tmp_path / "run").model
    start = load_whisper(tiny_folder)
    for name, tensor in start.encoder.state_dict().items():
        assert torch.equal(trained.encoder.state_dict()[name], tensor), name
    assert not torch.equal(trained.decoder.positions, start.decoder.positions)


def test_whisper_refuses_what_it_does_not_read(
    tiny_folder: Path, recordings: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(whisper_config(tiny_folder, recordings, tmp_path))
    cases = {
        "model.num_layers=3": "model.num_layers = 3: a Whisper checkpoint fixes",
        "seq2seq.guided_attention=1.0": "seq2seq.guided_attention = 1.0: not read",
        "data.dataset=pos-wsj": "Whisper reads recordings",
        "data.max_len=64": "data.max_len = 64: a Whisper checkpoint fixes what it reads",
    }
    for setting, message in cases.items():
        err = one_line_error(capsys, ["train", config, "--set", setting])
        assert message in err, err
    err = one_line_error(capsys, ["predict", str(tiny_folder), "w1 w2"])
    assert err  # a Whisper folder transcribes recordings only
    # A model trained from scratch has no Whisper window to read.
    espeak = Path(__file__).parents[2] / "configs" / "digit_strings_espeak.toml"
    scratch = ["train", str(espeak), "--set", f"run_dir={tmp_path / 's'}"]
    err = one_line_error(capsys, [*scratch, "--set", "seq2seq.encoder_seconds=4"])
    assert "seq2seq.encoder_seconds = 4 is read by a Whisper checkpoint only" in err


# ------------------------------------------------------------------ the CSV


def test_the_csv_reads_recordings_and_their_words(recordings: Path) -> None:
    examples = read_speech_text_csv(recordings / "test.csv")
    assert [e.label for e in examples] == [tuple(s.split()) for s in SAYINGS]
    assert examples[0].features is not None and examples[0].features.shape == (3200, 1)
    assert examples[1].source == f"{recordings / 'test.csv'}:3"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["gone.wav,w1"], ":2: no such audio file"),
        (["r0.wav,w1", "r1.wav,w2,w3"], ":3: expected 2 cells (path,text), got 3"),
        (["r0.wav,"], ":2: empty text"),
        (["silent.wav,w1"], "silent.wav is silent"),
        (["long.wav,w1"], "long.wav is 2.0 s long; the model reads at most 1 s"),
        (["bad.wav,w1"], ":2: "),
        ([], "no recordings after the path,text header"),
    ],
)
def test_the_csv_refuses_a_bad_row_naming_its_line(
    recordings: Path, tmp_path: Path, rows: list[str], message: str
) -> None:
    for name in ("r0.wav", "r1.wav"):
        (tmp_path / name).write_bytes((recordings / name).read_bytes())
    soundfile.write(tmp_path / "silent.wav", np.zeros(1600, dtype=np.float32), RATE)
    write_wav(tmp_path / "long.wav", seed=0, seconds=2.0)
    (tmp_path / "bad.wav").write_text("not audio")
    path = write_csv(tmp_path, "data.csv", rows)
    with pytest.raises(DataError) as caught:
        read_speech_text_csv(path, max_seconds=1.0)
    text = str(caught.value)
    assert "\n" not in text and text.startswith(str(path)) and message in text, text


def test_a_csv_without_the_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("file,label\nr0.wav,w1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"data\.csv:1: the header must be path,text"):
        read_speech_text_csv(path)


def test_training_on_a_csv_with_a_missing_recording_exits_with_status_2(
    tiny_folder: Path, recordings: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "r0.wav").write_bytes((recordings / "r0.wav").read_bytes())
    data = write_csv(tmp_path, "train.csv", ["r0.wav,w1", "gone.wav,w2"])
    config = whisper_config(tiny_folder, recordings, tmp_path)
    err = one_line_error(capsys, ["train", str(config), "--set", f"data.dataset={data}"])
    assert f"{data}:3: no such audio file" in err
