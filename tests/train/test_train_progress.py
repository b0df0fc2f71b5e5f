"""The loop's console output: plain lines off a terminal, a bar on one, every epoch's metrics."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from selfattn.datatypes import Batch
from selfattn.messages import plural
from selfattn.models.registry import model_options
from selfattn.models.task_model import TaskSpec
from selfattn.tasks import task_named
from selfattn.train import Config, DataConfig, TrainConfig, train
from selfattn.train import progress as progress_module
from selfattn.train.loop_state import LoopState
from selfattn.train.progress import Progress, epoch_summary, opening_lines, resolve_mode
from selfattn.train.start import Started

SPEC = TaskSpec(task="token", num_labels=3, vocab_size=12, max_len=16)


pytestmark = pytest.mark.usefixtures("one_thread")


def _batch(seed: int) -> Batch:
    generator = torch.Generator().manual_seed(seed)
    token_ids = torch.randint(1, 12, (4, 6), generator=generator)
    mask = torch.zeros(4, 6, dtype=torch.bool)
    return Batch(token_ids, None, None, mask, token_ids % 3)


BATCHES = [_batch(i) for i in range(5)]


def _train(tmp_path: Path, progress: Any, epochs: int = 2) -> None:
    config = Config(
        DataConfig(dataset="synthetic"),
        model_options(embed_dim=8, num_heads=2, num_layers=1, ffn_dim=16),
        TrainConfig(epochs=epochs, warmup_steps=1, device="cpu"),
        run_dir=tmp_path / "run",
    )
    objective = task_named(SPEC.task, config, SPEC)
    train(
        config,
        SPEC,
        lambda epoch: BATCHES,
        lambda: BATCHES[:2],
        objective=objective,
        progress=progress,
    )


@pytest.mark.parametrize("progress", [True, "auto", False, "lines"])
def test_off_a_terminal_one_plain_line_per_epoch_with_its_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], progress: Any
) -> None:
    _train(tmp_path, progress)
    out, err = capsys.readouterr()
    assert out == "" and "\r" not in err
    epochs = [line for line in err.splitlines() if line.startswith("epoch ")]
    assert len(epochs) == 2, err
    for number, line in enumerate(epochs, 1):
        assert re.match(rf"epoch {number}/2  train loss \d\.\d{{4}}  dev ", line), line
        for metric in ("accuracy", "loss", "count 48 ", "best epoch"):
            assert metric in line, line
    assert err.splitlines()[0].startswith(f"training {tmp_path / 'run'}: 2 epochs of 5 steps")


def test_long_epochs_get_a_line_every_so_often(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress_module, "LOG_SECONDS", 0.0)
    _train(tmp_path, "lines", epochs=1)
    err = capsys.readouterr().err
    steps = re.findall(r"^epoch 1/1  step (\d)/5  loss \d\.\d{4}  [\d,]+ tokens/s$", err, re.M)
    assert steps == ["1", "2", "3", "4"]  # the fifth is the epoch's summary


def test_on_a_terminal_a_bar_and_the_summaries_above_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _train(tmp_path, "bar")
    err = capsys.readouterr().err
    assert "\r" in err  # the bar
    assert len(re.findall(r"epoch \d/2  train loss .* dev loss .* accuracy", err)) == 2


def test_off_is_silent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _train(tmp_path, "off")
    assert capsys.readouterr() == ("", "")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_modes() -> None:
    assert resolve_mode(True, _Terminal()) == "bar"
    assert resolve_mode("auto", io.StringIO()) == "lines"
    assert resolve_mode(False, _Terminal()) == "lines"
    assert resolve_mode("off", _Terminal()) == "off"
    with pytest.raises(ValueError, match="progress must be one of"):
        resolve_mode("loud", io.StringIO())
    with Progress(True, total_steps=3, stream=_Terminal()) as shown:
        assert shown.bar is not None


def test_epoch_summary_names_every_dev_metric() -> None:
    line = {
        "epoch": 3,
        "train_loss": 1.23456,
        "dev_loss": 0.5,
        "dev_bleu": 12.5,
        "dev_count": 40.0,
        "best_epoch": 2,
        "seconds": 4.25,
        "tokens_per_s": 1234.5,
    }
    assert epoch_summary(line, 10) == (
        "epoch 3/10  train loss 1.2346  dev loss 0.5000 bleu 12.5000 count 40  best epoch 2"
        "  (4.2 s, 1,234 tokens/s)"
    )


def _opening(state: LoopState, where: str | None = None, **started: Any) -> list[str]:
    """The opening lines of a run of 3 epochs stopping at step 10, in one process."""
    train_config = TrainConfig(epochs=3, max_steps=10)
    run = Started(None, state, [], 10, resumed=where is None, **started)  # type: ignore[arg-type]
    return opening_lines(Path("runs/x"), train_config, run, where, 1)


def test_the_opening_lines_of_a_new_run_say_its_length_and_where_it_trains() -> None:
    assert _opening(LoopState(steps_per_epoch=5), "cpu, 1 thread") == [
        "training runs/x: 3 epochs of 5 steps (stopping at train.max_steps = 10) on cpu, 1 thread"
    ]
    lines = _opening(LoopState(steps_per_epoch=1), "cuda:0", initialised_from=Path("a/best"))
    assert lines == [
        "training runs/x: 3 epochs of 1 step on cuda:0",
        "starting from the weights of a/best",
    ]


@pytest.mark.parametrize(
    ("count", "noun", "text"),
    [
        (1, "process", "1 process"),
        (2, "process", "2 processes"),
        (0, "thread", "0 threads"),
        (3, "epoch checkpoint", "3 epoch checkpoints"),
        (2, "box", "2 boxes"),
    ],
)
def test_plural_adds_es_to_a_noun_ending_in_a_hiss(count: int, noun: str, text: str) -> None:
    assert plural(count, noun) == text


def test_the_opening_lines_of_a_resumed_run_say_where_it_goes_on() -> None:
    state = LoopState(epoch=1, step=7, steps_per_epoch=5, batch=2)
    assert _opening(state) == ["resuming runs/x from epoch 2, step 2 of 5 (3 epochs)"]
    first, processes = _opening(state, trained_by=2)
    assert first == "resuming runs/x from epoch 2, step 2 of 5 (3 epochs)"
    assert processes.startswith("resuming a run of 2 process")
    assert processes.startswith("resuming a run of 2 processes with 1")
    assert processes.endswith(" with 1: the batches are global, so it goes on as before")
    done = LoopState(epoch=3, step=15, steps_per_epoch=5)
    assert _opening(done) == [
        "runs/x has finished after epoch 3 (train.epochs is 3); nothing to do"
    ]
    early = LoopState(epoch=2, step=10, steps_per_epoch=5, stopped_early=True)
    assert _opening(early) == ["runs/x has finished after epoch 2 (stopped early); nothing to do"]
