"""The loop's typed, versioned state: what a checkpoint stores, read back from today's dicts
and from those earlier selfattn versions stored, and refused in one line when damaged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from selfattn.train import load_checkpoint
from selfattn.train.checkpoint import MANIFEST
from selfattn.train.loop_state import LoopState

from .test_train_loop import _config, _run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints_v1"

#: The dict a run stored at an epoch's end before the state had a version.
UNVERSIONED = {
    "epoch": 1,
    "step": 3,
    "steps_per_epoch": 3,
    "best_score": 0.25,
    "best_epoch": 1,
    "bad_epochs": 0,
    "stopped_early": False,
    "threads": 1,
    "batch": 0,
    "loss_sum": 0.0,
    "units": 0,
    "tokens": 0,
    "train_seconds": 0.0,
}


def test_to_dict_and_from_dict_round_trip_every_field() -> None:
    state = LoopState(
        epoch=2,
        step=137,
        steps_per_epoch=400,
        best_score=-0.5,
        best_epoch=1,
        bad_epochs=1,
        stopped_early=True,
        threads=3,
        batch=37,
        loss_sum=12.25,
        units=300,
        tokens=4000,
        train_seconds=8.5,
        world_size=2,
    )
    stored = json.loads(json.dumps(state.to_dict()))  # as a manifest holds it
    assert stored["version"] == LoopState.version == 1
    assert LoopState.from_dict(stored) == state
    assert state.position() == "epoch 3, step 37 of 400"


def test_a_new_state_is_the_start_of_a_run() -> None:
    state = LoopState(steps_per_epoch=6)
    assert (state.epoch, state.step, state.batch, state.best_epoch) == (0, 0, 0, None)
    state.batch, state.loss_sum, state.units, state.tokens, state.train_seconds = 4, 2.0, 9, 9, 1.0
    state.start_epoch()
    assert state == LoopState(steps_per_epoch=6)


@pytest.mark.parametrize("task", ["token", "sequence", "seq2seq"])
def test_the_states_of_shipped_version_1_checkpoints_read(task: str) -> None:
    stored = json.loads((FIXTURES / task / MANIFEST).read_text())["state"]
    state = LoopState.from_dict(stored)
    assert (state.epoch, state.batch, state.threads, state.world_size) == (1, 0, 1, 1)
    assert state.to_dict() == {"version": 1, **stored, "world_size": 1}


def test_unversioned_states_read_with_the_keys_older_runs_lack() -> None:
    assert LoopState.from_dict(UNVERSIONED) == LoopState(
        epoch=1, step=3, steps_per_epoch=3, best_score=0.25, best_epoch=1, threads=1
    )
    # Before saves within epochs and the thread count: the seven keys of the first loop.
    first = {key: UNVERSIONED[key] for key in list(UNVERSIONED)[:7]}
    state = LoopState.from_dict(first)
    assert state.threads is None and state.batch == 0 and state.loss_sum == 0.0
    # A run of two processes stored its count; JSON may write a float sum as an integer.
    state = LoopState.from_dict({**UNVERSIONED, "world_size": 2, "loss_sum": 3})
    assert state.world_size == 2 and state.loss_sum == 3.0 and isinstance(state.loss_sum, float)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 2}, "loop state version 2; this selfattn reads version 1"),
        ({"step": None}, "loop state key 'step' holds None (NoneType), not int"),
        ({"epoch": "1"}, "loop state key 'epoch' holds '1' (str), not int"),
        ({"units": 1.5}, "loop state key 'units' holds 1.5 (float), not int"),
        ({"step": True}, "loop state key 'step' holds True (bool), not int"),
        ({"stopped_early": 0}, "loop state key 'stopped_early' holds 0 (int), not bool"),
        ({"best_score": "0.5"}, "loop state key 'best_score' holds '0.5' (str), not float or null"),
        ({"threads": 2.0}, "loop state key 'threads' holds 2.0 (float), not int or null"),
        ({"averaged": True}, "unknown loop state key 'averaged'"),
    ],
)
def test_a_bad_state_is_refused_in_one_line_naming_the_key(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as info:
        LoopState.from_dict({**UNVERSIONED, **change}, source="run/last")
    assert str(info.value) == f"run/last: {message}"


@pytest.mark.parametrize("key", ["epoch", "step", "steps_per_epoch", "best_score", "bad_epochs"])
def test_a_missing_key_is_refused_by_name(key: str) -> None:
    stored = {name: value for name, value in UNVERSIONED.items() if name != key}
    with pytest.raises(ValueError, match=f"^checkpoint: the loop state lacks key '{key}'$"):
        LoopState.from_dict(stored)


def test_a_state_that_is_no_object_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^checkpoint: the loop state is not a JSON object$"):
        LoopState.from_dict([1, 2])  # type: ignore[arg-type]


def test_runs_store_the_versioned_state_and_a_damaged_one_stops_resume_in_one_line(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path / "run", epochs=1)
    _run(config)
    last = config.run_dir / "last"
    stored = load_checkpoint(last).state
    assert stored["version"] == 1
    state = LoopState.from_dict(stored)
    assert (state.epoch, state.step, state.batch, state.best_epoch) == (1, 6, 0, 1)

    manifest = json.loads((last / MANIFEST).read_text())
    del manifest["state"]["steps_per_epoch"]
    (last / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ValueError) as info:
        _run(config, resume=True)
    assert str(info.value) == f"{last}: the loop state lacks key 'steps_per_epoch'"
