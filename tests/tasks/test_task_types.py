"""A task type is not its label layout: what a checkpoint stores of each, how runs saved
before the task type was stored read back, the values ``data.task`` takes, and the
attention maps of every task type read on the device of the model's weights."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from selfattn.config import Config, DataConfig, load_config
from selfattn.data.batching.seq2seq_collate import Seq2SeqBatch
from selfattn.datatypes import Batch
from selfattn.models.bits import BitsBatch
from selfattn.models.spec import TaskSpec
from selfattn.tasks import TASKS, Predictor, register_task
from selfattn.tasks.bits import BitsTask
from selfattn.tasks.run import check_before_loading
from selfattn.tasks.sequence import SequenceTask

from ..helpers_cli import one_line_error, write_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints_v1"
ELSEWHERE = torch.device("meta")  # stands for a GPU: the device the model's weights are on

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_spec_stores_the_task_type_beside_the_layout() -> None:
    spec = TaskSpec(task="sequence", num_labels=2, vocab_size=9, task_type="ranking")
    stored = json.loads(json.dumps(spec.to_dict()))
    assert stored["task"] == "sequence" and stored["task_type"] == "ranking"
    assert TaskSpec.from_dict(stored).task_type == "ranking"
    # The model depends on the layout alone: built from the same fields, equal specs.
    assert "task_type" not in spec.model_fields()
    assert spec == dataclasses.replace(spec, task_type="sequence")


def test_a_manifest_saved_before_task_types_were_stored_reads_as_its_layouts_type() -> None:
    for layout in ("token", "sequence", "seq2seq"):
        manifest = json.loads((FIXTURES / layout / "manifest.json").read_text())
        assert "task_type" not in manifest["spec"]  # written before the field existed
        assert TaskSpec.from_dict(manifest["spec"]).task_type == layout
        predictor = Predictor(FIXTURES / layout)
        assert predictor.spec.task_type == layout
        assert type(predictor.task) is TASKS[layout]


def test_data_task_takes_every_registered_task_type_and_refuses_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in TASKS:
        chosen = write_config(tmp_path / "c.toml", data={"dataset": "x.csv", "task": name})
        assert load_config(chosen).data.task == name
    config = write_config(tmp_path / "bad.toml", data={"dataset": "x.csv", "task": "ranking"})
    err = one_line_error(capsys, ["train", str(config)])  # refused before reading x.csv
    assert "error: data.task = 'ranking': no such task type; choose auto, " in err
    assert all(name in err for name in TASKS)
    with pytest.raises(ValueError, match="no such task type"):
        check_before_loading(Config(DataConfig("pos-wsj", task="ranking")))


def test_a_task_type_without_a_layout_is_refused() -> None:
    class Loose(SequenceTask):
        name = "loose"
        layout = "ranked"  # type: ignore[assignment]

    with pytest.raises(ValueError, match="layout = 'ranked' must be one of token, sequence"):
        register_task(Loose)
    assert "loose" not in TASKS


# ---------------------------------------------------------------- attention's device


def _moved_to_elsewhere(monkeypatch: pytest.MonkeyPatch) -> list[torch.device]:
    """Every batch type's ``to(device)`` records the device asked for and returns a copy
    (still on the CPU, which has no second device) whose tensors are marked as moved."""
    asked: list[torch.device] = []

    def to(self: Any, device: torch.device | str, *, non_blocking: bool = False) -> Any:
        asked.append(torch.device(device))
        moved = copy.deepcopy(self)
        moved.moved_to = torch.device(device)
        for value in _tensors(moved):
            value.moved_to = torch.device(device)
        return moved

    for batch_type in (Batch, Seq2SeqBatch, BitsBatch):
        monkeypatch.setattr(batch_type, "to", to)
    return asked


def _tensors(value: Any) -> Iterator[Tensor]:
    if isinstance(value, Tensor):
        yield value
    elif dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            yield from _tensors(getattr(value, field.name))


def _recorded(model: nn.Module, names: tuple[str, ...]) -> list[torch.device | None]:
    """Put a parameter on :data:`ELSEWHERE` first among ``model``'s weights and make its
    methods ``names`` record where each batch or tensor they are given was moved to."""
    model.register_parameter("elsewhere", nn.Parameter(torch.empty(0, device=ELSEWHERE)))
    seen: list[torch.device | None] = []

    def recording(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            for value in (*args, *kwargs.values()):
                if isinstance(value, Tensor) or dataclasses.is_dataclass(value):
                    seen.append(getattr(value, "moved_to", None))
            return method(*args, **kwargs)

        return call

    for name in names:
        setattr(model, name, recording(getattr(model, name)))
    assert next(model.parameters()).device == ELSEWHERE
    return seen


@pytest.mark.parametrize(
    ("layout", "methods"),
    [("token", ("attention_maps",)), ("seq2seq", ("encode", "attention_maps"))],
)
def test_attention_reads_its_batches_on_the_models_device(
    monkeypatch: pytest.MonkeyPatch, layout: str, methods: tuple[str, ...]
) -> None:
    predictor = Predictor(FIXTURES / layout)
    example = predictor.example("a b c")
    asked = _moved_to_elsewhere(monkeypatch)
    seen = _recorded(predictor.model, methods)
    figures = predictor.task.attention(predictor.model, example)
    assert figures and seen and set(seen) == {ELSEWHERE} and set(asked) == {ELSEWHERE}


def test_the_bits_tasks_attention_reads_its_batch_on_the_models_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = load_config(
        Path(__file__).parents[2] / "configs" / "copy_ntm.toml", ["data.train_fraction=0.01"]
    )
    task = BitsTask(config)
    task.prepare(task.load_splits())
    model = task.build()
    example = task.example("10110010 01100001")
    asked = _moved_to_elsewhere(monkeypatch)
    seen = _recorded(model, ("heads",))
    assert len(task.attention(model, example)) == 2
    assert seen == [ELSEWHERE] and asked == [ELSEWHERE]
