"""The training loop on synthetic batches: learning, metrics, determinism, resuming, stopping."""

from __future__ import annotations

import json
import math
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from selfattn.datatypes import Batch
from selfattn.models.registry import model_options
from selfattn.models.task_model import TaskSpec
from selfattn.tasks import build_for_spec, evaluate, task_named
from selfattn.train import (
    METRICS_FILE,
    TIMING_KEYS,
    Config,
    DataConfig,
    TrainConfig,
    TrainResult,
    WarmupDecay,
    load_checkpoint,
    load_model,
    loop,
    train,
)
from selfattn.train.loop import TrainingInterrupted

from ..conftest import BackendChoice
from ..helpers_locks import lock_is_free, locked_by_another

VOCAB, LABELS, BATCH, NUM_BATCHES = 24, 3, 8, 6
SPEC = TaskSpec(task="token", num_labels=LABELS, vocab_size=VOCAB, max_len=16)


pytestmark = pytest.mark.usefixtures("one_thread")


def _config(run_dir: Path, **train_options: Any) -> Config:
    options: dict[str, Any] = {
        "epochs": 3,
        "lr": 1e-2,
        "warmup_steps": 4,
        "device": "cpu",
        "label_smoothing": 0.05,
        **train_options,
    }
    return Config(
        DataConfig(dataset="synthetic", batch_size=BATCH),
        # Dropout on, so that resuming must restore the RNG to match.
        model_options(embed_dim=16, num_heads=2, num_layers=1, ffn_dim=32, dropout=0.1),
        TrainConfig(**options),
        run_dir=run_dir,
    )


def _token_batch(generator: torch.Generator) -> Batch:
    """Random tokens labelled ``id % 3`` (learnable from each token alone), right-padded."""
    lengths = torch.randint(3, 10, (BATCH,), generator=generator)
    length = int(lengths.max())
    mask = torch.arange(length)[None, :] >= lengths[:, None]
    token_ids = torch.randint(1, VOCAB, (BATCH, length), generator=generator).masked_fill(mask, 0)
    labels = (token_ids % LABELS).masked_fill(mask, -100)
    return Batch(token_ids, None, None, mask, labels)


TRAIN = [_token_batch(torch.Generator().manual_seed(i)) for i in range(NUM_BATCHES)]
DEV = [_token_batch(torch.Generator().manual_seed(100 + i)) for i in range(2)]


def _train_batches(epoch: int) -> list[Batch]:
    # The global generator, as a data pipeline might use it: resuming must restore it.
    return [TRAIN[i] for i in torch.randperm(len(TRAIN)).tolist()]


def _dev_batches() -> list[Batch]:
    return DEV


def _run(config: Config, **options: Any) -> TrainResult:
    return train(
        config,
        SPEC,
        options.pop("train_batches", _train_batches),
        options.pop("dev_batches", _dev_batches),
        objective=task_named(SPEC.task, config, SPEC),
        vocabs={"tokens": [str(i) for i in range(VOCAB)]},
        progress=False,
        **options,
    )


def _without_timing(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in line.items() if k not in TIMING_KEYS} for line in lines]


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / METRICS_FILE).read_text().splitlines()]


def _assert_same_weights(a: nn.Module, b: nn.Module) -> None:
    state_a, state_b = a.state_dict(), b.state_dict()
    assert state_a.keys() == state_b.keys()
    for key in state_a:
        assert torch.equal(state_a[key], state_b[key]), key


def test_loss_decreases_and_metrics_have_one_line_per_epoch(tmp_path: Path) -> None:
    result = _run(_config(tmp_path / "run", epochs=4))
    lines = _metrics(tmp_path / "run")
    assert [line["epoch"] for line in lines] == [1, 2, 3, 4]
    assert lines == result.history
    assert lines[-1]["step"] == 4 * NUM_BATCHES
    assert lines[-1]["train_loss"] < 0.7 * lines[0]["train_loss"]
    expected = {"train_loss", "lr", "dev_loss", "dev_accuracy", "dev_count"} | set(TIMING_KEYS)
    assert expected <= set(lines[0])
    assert lines[-1]["dev_accuracy"] > 0.9
    assert result.best is not None and not result.stopped_early
    # best/ holds the best epoch's model: evaluating it reproduces its dev accuracy.
    best, checkpoint = load_model(tmp_path / "run" / "best", build=build_for_spec)
    assert checkpoint.state["epoch"] == result.best["epoch"]
    assert evaluate(best, DEV)["accuracy"] == result.best["dev_accuracy"]
    assert (tmp_path / "run" / "config.toml").is_file()


def test_training_runs_within_the_varying_shape_attention_backends(
    tmp_path: Path, backend_choice: BackendChoice
) -> None:
    """No cuDNN attention plans per batch shape on CUDA: the whole run is inside
    :func:`selfattn.attention.backends.varying_shapes` for the trainer's device."""
    asked: list[bool] = []

    def batches(epoch: int) -> list[Batch]:
        asked.append(backend_choice.inside)
        return _train_batches(epoch)

    backend_choice.watch("selfattn.train.loop.varying_shapes")
    _run(_config(tmp_path / "run", epochs=2), train_batches=batches)
    assert backend_choice.entered == [torch.device("cpu")] and asked == [True, True]
    assert not backend_choice.inside


def test_same_seed_same_run(tmp_path: Path) -> None:
    first = _run(_config(tmp_path / "a", epochs=2))
    second = _run(_config(tmp_path / "b", epochs=2))
    assert _without_timing(first.history) == _without_timing(second.history)
    _assert_same_weights(first.model, second.model)
    third = _run(_config(tmp_path / "c", epochs=2, seed=1))
    assert _without_timing(third.history) != _without_timing(first.history)


def _lazy_batches(epoch: int) -> Iterator[Batch]:
    """Each batch drawn when it is needed, between the steps' dropout draws."""
    for _ in range(NUM_BATCHES):
        yield TRAIN[int(torch.randint(len(TRAIN), ()))]


def _killed(train_batches: Any, epoch: int, at: int, kill: Callable[[], None]) -> Any:
    """``train_batches`` whose epoch ``epoch`` (from 1) calls ``kill()`` before its batch
    ``at`` (from 0)."""

    def batches(index: int) -> Iterator[Batch]:
        for i, batch in enumerate(train_batches(index)):
            if index + 1 == epoch and i == at:
                kill()
            yield batch

    return batches


def _die() -> None:
    raise KeyboardInterrupt  # the process dies here


@pytest.mark.parametrize(
    ("checkpoint_every", "train_batches", "resumed_at"),
    [
        (None, _train_batches, (2, 0)),  # no save within these short epochs: from epoch 2's start
        (4, _train_batches, (2, 2)),  # saved at step 8, epoch 2's second: from there
        (4, _lazy_batches, (2, 2)),
        (1, _lazy_batches, (2, 4)),
    ],
)
def test_killed_and_resumed_equals_uninterrupted(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    checkpoint_every: int | None,
    train_batches: Any,
    resumed_at: tuple[int, int],
) -> None:
    uninterrupted = _run(_config(tmp_path / "full"), train_batches=train_batches)

    config = _config(tmp_path / "resumed", checkpoint_every=checkpoint_every)
    with pytest.raises(KeyboardInterrupt):  # killed in epoch 2, before its fifth batch
        _run(config, train_batches=_killed(train_batches, 2, 4, _die))
    assert [line["epoch"] for line in _metrics(config.run_dir)] == [1]
    state = load_checkpoint(config.run_dir / "last").state
    assert (state["epoch"] + 1, state["batch"]) == resumed_at
    capsys.readouterr()
    resumed = _run(config, resume=True, train_batches=train_batches)
    epoch, step = resumed_at
    assert (
        f"resuming {config.run_dir} from epoch {epoch}, step {step} of 6" in capsys.readouterr().err
    )

    _assert_same_weights(uninterrupted.model, resumed.model)
    assert _without_timing(resumed.history) == _without_timing(uninterrupted.history)
    assert _without_timing(_metrics(config.run_dir)) == _without_timing(uninterrupted.history)


def test_a_resumed_run_keeps_the_thread_count_it_started_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default thread count follows the machine's load, and the count changes the
    rounding: a run resumed under another count would not end as the uninterrupted one."""
    seen: list[int] = []

    def counting(epoch: int) -> list[Batch]:
        seen.append(torch.get_num_threads())
        return _train_batches(epoch)

    config = _config(tmp_path / "run", checkpoint_every=1)
    with pytest.raises(KeyboardInterrupt):
        _run(config, train_batches=_killed(counting, 2, 2, _die))  # started at 1 thread
    assert "1 thread" in capsys.readouterr().err
    torch.set_num_threads(2)  # the machine is idle now: the default would take 2
    seen.clear()
    _run(config, resume=True, train_batches=counting)
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == 1

    explicit = replace(config, train=replace(config.train, threads=2))
    torch.set_num_threads(1)
    seen.clear()
    _run(replace(explicit, run_dir=tmp_path / "other"), train_batches=counting)
    assert set(seen) == {2}  # train.threads (or --threads) still decides when given


def test_saving_within_epochs_does_not_change_the_run(tmp_path: Path) -> None:
    plain = _run(_config(tmp_path / "a", epochs=2))
    saving = _run(_config(tmp_path / "b", epochs=2, checkpoint_every=1))
    assert _without_timing(plain.history) == _without_timing(saving.history)
    _assert_same_weights(plain.model, saving.model)


def _send(*signals: int) -> Callable[[], None]:
    def kill() -> None:
        for signum in signals:
            os.kill(os.getpid(), signum)

    return kill


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_at_a_step_boundary_with_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], signum: int
) -> None:
    uninterrupted = _run(_config(tmp_path / "full"))
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    config = _config(tmp_path / "run")
    # The signal comes while epoch 2 fetches its fourth batch: that step still runs.
    with pytest.raises(TrainingInterrupted) as info:
        _run(config, train_batches=_killed(_train_batches, 2, 3, _send(signum)))
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    last = config.run_dir / "last"
    assert str(info.value) == f"interrupted at epoch 2, step 4 of 6; checkpoint saved in {last}"
    assert info.value.checkpoint == last
    assert isinstance(info.value, KeyboardInterrupt)
    assert "stopping after this step" in capsys.readouterr().err
    assert load_checkpoint(last).state["batch"] == 4

    resumed = _run(config, resume=True)
    _assert_same_weights(uninterrupted.model, resumed.model)
    assert _without_timing(resumed.history) == _without_timing(uninterrupted.history)


def test_a_second_ctrl_c_quits_at_once_and_names_the_last_checkpoint(tmp_path: Path) -> None:
    uninterrupted = _run(_config(tmp_path / "full"))
    config = _config(tmp_path / "run")
    kill = _send(signal.SIGINT, signal.SIGINT)
    with pytest.raises(TrainingInterrupted, match="interrupted at once") as info:
        _run(config, train_batches=_killed(_train_batches, 2, 3, kill))
    assert "epoch 2, step 0 of 6" in str(info.value)  # the checkpoint of epoch 1's end
    resumed = _run(config, resume=True)
    _assert_same_weights(uninterrupted.model, resumed.model)


class _Clock:
    """A stand-in for ``time`` in the loop whose ``monotonic()`` moves only with optimizer
    steps (``per_step`` seconds each), so that a time budget ends a run at a known step."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, per_step: float) -> None:
        self.now = 0.0
        self.perf_counter = time.perf_counter
        step = loop.Trainer._step

        def timed_step(trainer: Any, *args: Any, **kwargs: Any) -> Any:
            self.now += per_step
            return step(trainer, *args, **kwargs)

        monkeypatch.setattr(loop.Trainer, "_step", timed_step)
        monkeypatch.setattr(loop, "time", self)

    def monotonic(self) -> float:
        return self.now


def test_a_time_budget_ends_the_run_before_an_epoch_that_would_pass_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    uninterrupted = _run(_config(tmp_path / "full"))
    _Clock(monkeypatch, per_step=10.0)  # 60 s an epoch
    config = _config(tmp_path / "run", max_minutes=2.5)
    # After epoch 1: 60 s + 60 s fits in 150 s; after epoch 2: 120 s + 60 s does not.
    result = _run(config)
    assert result.out_of_time and not result.stopped_early
    assert [line["epoch"] for line in result.history] == [1, 2]
    err = capsys.readouterr().err
    assert "stopping after epoch 2: another epoch (~60 s) would pass train.max_minutes = 2.5" in err
    assert load_checkpoint(config.run_dir / "last").state["epoch"] == 2

    monkeypatch.undo()
    resumed = _run(config, resume=True)  # a new budget: it ends as an unbudgeted run
    assert not resumed.out_of_time
    _assert_same_weights(uninterrupted.model, resumed.model)
    assert _without_timing(resumed.history) == _without_timing(uninterrupted.history)


def test_a_time_budget_passed_within_an_epoch_stops_at_that_step_with_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    uninterrupted = _run(_config(tmp_path / "full"))
    _Clock(monkeypatch, per_step=10.0)
    config = _config(tmp_path / "run", max_minutes=0.5)  # 30 s: passed by batch 4's 40 s
    result = _run(config)
    assert result.out_of_time and result.history == [] and result.best is None
    assert not (config.run_dir / METRICS_FILE).exists() or _metrics(config.run_dir) == []
    state = load_checkpoint(config.run_dir / "last").state
    assert (state["epoch"], state["batch"]) == (0, 4)
    err = capsys.readouterr().err
    expected = "train.max_minutes = 0.5 passed at epoch 1, step 4 of 6 (that epoch is not scored)"
    assert expected in err

    monkeypatch.undo()
    resumed = _run(config, resume=True)
    _assert_same_weights(uninterrupted.model, resumed.model)
    assert _without_timing(resumed.history) == _without_timing(uninterrupted.history)


def test_resume_drops_metrics_of_lost_epochs(tmp_path: Path) -> None:
    config = _config(tmp_path / "run", epochs=2)
    _run(config)
    # A crash after epoch 3's metrics line was written but before its checkpoint was.
    with open(config.run_dir / METRICS_FILE, "a") as f:
        f.write(json.dumps({"epoch": 3, "train_loss": 0.0}) + "\n" + '{"epoch": 4, "tr')
    longer = replace(config, train=replace(config.train, epochs=3))
    with pytest.warns(UserWarning, match=r"changed settings train\.epochs"):
        result = _run(longer, resume=True)
    assert [line["epoch"] for line in _metrics(config.run_dir)] == [1, 2, 3]
    assert result.history[-1]["train_loss"] > 0.0


def test_early_stopping(tmp_path: Path) -> None:
    # A learning rate too small to change any prediction: dev accuracy never improves.
    config = _config(tmp_path / "run", epochs=10, lr=1e-9, warmup_steps=0, patience=2)
    result = _run(config)
    assert result.stopped_early
    assert [line["epoch"] for line in result.history] == [1, 2, 3]
    assert result.best is not None and result.best["epoch"] == 1
    again = _run(config, resume=True)  # a finished run stays finished
    assert again.stopped_early and len(again.history) == 3


def test_max_steps_below_the_epochs_takes_exactly_its_steps_and_the_schedule_ends_there(
    tmp_path: Path,
) -> None:
    # How equal budgets over training sets of different sizes are set (train.epochs large
    # enough for the smallest set, train.max_steps the budget): 100 epochs of 6 steps
    # would be 600; 15 end in epoch 3 (6 + 6 + 3), which is still scored on dev, and the
    # linear decay reaches 0 at step 15, not 600.
    config = _config(tmp_path / "run", epochs=100, max_steps=15, warmup_steps=0)
    config = replace(config, train=replace(config.train, schedule="linear"))
    result = _run(config)
    assert [line["step"] for line in result.history] == [6, 12, 15]
    assert "dev_accuracy" in result.history[-1]
    assert result.history[0]["lr"] == pytest.approx(1e-2 * (1 - 6 / 15))
    assert result.history[-1]["lr"] == 0.0
    again = _run(config, resume=True)  # a run that took its steps is finished
    assert [line["step"] for line in again.history] == [6, 12, 15]


def test_run_dir_is_not_silently_overwritten(tmp_path: Path) -> None:
    config = _config(tmp_path / "run", epochs=1)
    _run(config)
    with pytest.raises(ValueError, match="already holds a run"):
        _run(config)
    _run(config, overwrite=True)
    assert len(_metrics(config.run_dir)) == 1
    with pytest.raises(ValueError, match=r"nothing to resume: .*empty does not exist"):
        _run(_config(tmp_path / "empty"), resume=True)
    other = replace(config, model=replace(config.model, embed_dim=32))
    with pytest.raises(ValueError, match="different model"):
        _run(other, resume=True)


def test_one_training_at_a_time_in_a_run_folder(tmp_path: Path) -> None:
    config = _config(tmp_path / "run", epochs=1)
    refusal = r"in use by a training in another process \(process 4242\)"
    with locked_by_another(config.run_dir), pytest.raises(ValueError, match=refusal):
        _run(config)
    assert not (config.run_dir / "metrics.jsonl").exists()  # refused before anything was written
    _run(config)
    assert lock_is_free(config.run_dir)  # given back when the run ended
    with pytest.raises(ValueError, match="already holds a run"):
        _run(config)
    assert lock_is_free(config.run_dir)  # and when it was refused
    _run(config, resume=True)
    assert lock_is_free(config.run_dir)


def test_amp_on_cpu_warns_and_trains_in_float32(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="amp is only used on CUDA"):
        result = _run(_config(tmp_path / "run", epochs=1, amp=True))
    assert all(p.dtype == torch.float32 for p in result.model.parameters())


def test_sequence_task_with_feature_vectors(tmp_path: Path) -> None:
    """One label per set of 5-dim vectors: the class is which feature is largest on average."""
    generator = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(4):
        labels = torch.randint(3, (BATCH,), generator=generator)
        features = torch.randn(BATCH, 7, 5, generator=generator)
        features[torch.arange(BATCH), :, labels] += 2.0
        mask = torch.zeros(BATCH, 7, dtype=torch.bool)
        mask[: BATCH // 2, 5:] = True
        batches.append(Batch(None, None, features, mask, labels))
    config = replace(_config(tmp_path / "run", epochs=6), model=replace(_config(tmp_path).model))
    spec = TaskSpec(task="sequence", num_labels=3, feature_dim=5, max_len=16)
    objective = task_named(spec.task, config, spec)
    result = train(
        config, spec, lambda epoch: batches, lambda: batches, objective=objective, progress=False
    )
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    assert result.history[-1]["dev_accuracy"] > 0.8
    assert result.history[-1]["dev_count"] == 4 * BATCH


class _FixedLogits(nn.Module):
    def __init__(self, logits: Tensor) -> None:
        super().__init__()
        self.logits = nn.Parameter(logits)

    def forward(self, batch: Batch) -> Tensor:
        return self.logits


def test_evaluate_counts_only_real_positions() -> None:
    logits = torch.tensor([[[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]]])  # predicts 0, 1, 0
    labels = torch.tensor([[0, 0, -100]])
    mask = torch.tensor([[False, False, True]])
    batch = Batch(torch.zeros(1, 3, dtype=torch.long), None, None, mask, labels)
    metrics = evaluate(_FixedLogits(logits), [batch])
    assert metrics["accuracy"] == 0.5 and metrics["count"] == 2
    log_probs = torch.log_softmax(logits[0, :2], dim=-1)
    expected = -0.5 * (log_probs[0, 0] + log_probs[1, 0])
    assert math.isclose(metrics["loss"], float(expected), rel_tol=1e-6)


@pytest.mark.parametrize(
    ("schedule", "middle", "end"), [("linear", 0.5, 0.0), ("cosine", 0.5, 0.0), ("constant", 1, 1)]
)
def test_warmup_then_decay(schedule: Any, middle: float, end: float) -> None:
    factor = WarmupDecay(warmup_steps=9, total_steps=109, schedule=schedule)
    assert factor(0) == pytest.approx(0.1) and factor(8) == pytest.approx(0.9)
    assert factor(9) == pytest.approx(1.0)
    assert factor(59) == pytest.approx(middle)
    assert factor(109) == pytest.approx(end)


def test_a_resumed_run_takes_the_learning_rate_and_weight_decay_it_is_given(
    tmp_path: Path,
) -> None:
    """``--resume --set train.lr=… --set train.weight_decay=…``: the stored optimizer state
    must not put back the rate or the weight decay the run started with (the schedule's
    shape is kept)."""
    config = _config(tmp_path / "run", epochs=1)
    first = _run(config)
    unchanged = _run(replace(config, train=replace(config.train, epochs=2)), resume=True)
    unchanged_lr = unchanged.history[1]["lr"]

    config = _config(tmp_path / "changed", epochs=1)
    _run(config)
    faster = replace(config.train, epochs=2, lr=config.train.lr * 10, weight_decay=0.5)
    changed = _run(replace(config, train=faster), resume=True)
    assert first.history[0]["lr"] == changed.history[0]["lr"]  # epoch 1 was trained at 1e-2
    assert changed.history[1]["lr"] == pytest.approx(10 * unchanged_lr, rel=1e-6)
    state = load_checkpoint(config.run_dir / "last").optimizer_state
    assert state is not None
    assert {group["weight_decay"] for group in state["param_groups"]} <= {0.5, 0.0}
    assert 0.5 in {group["weight_decay"] for group in state["param_groups"]}
