"""A trained checkpoint at work: read a user's input, predict, score a split, show the
attention — the same calls for every task type and input kind (the task decides)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from selfattn.attention.backends import varying_shapes
from selfattn.config import Config
from selfattn.data.readers.user_input import (
    InputDescription,
    check_text_input,
    describe_input,
    read_input,
)
from selfattn.datatypes import Example
from selfattn.models.spec import TaskSpec
from selfattn.tasks.inputs import text_inputs
from selfattn.tasks.scored_data import DataFile
from selfattn.tasks.task import AttentionFigure, Task, task_named
from selfattn.train.checkpoint import load_model
from selfattn.train.run_dir import checkpoint_in


def _stderr(line: str) -> None:
    import sys

    print(line, file=sys.stderr)


class Predictor:
    """A checkpoint's model with its task (vocabularies, reader settings).

    Args:
        checkpoint_dir: a run folder (its best checkpoint, else its last) or a checkpoint
            folder.
        task: the :class:`Task` class that rebuilds the model (default: the one registered
            as the checkpoint's task type, ``spec.task_type``); a benchmark's variant, say.

    Raises:
        ValueError: no checkpoint there; one this selfattn cannot read (one line: why).
    """

    def __init__(self, checkpoint_dir: str | Path, *, task: type[Task] | None = None) -> None:
        directory = checkpoint_in(checkpoint_dir)
        built: list[Task] = []

        def build(config: Config, spec: TaskSpec) -> nn.Module:
            built.append(
                task_named(spec.task_type, config, spec) if task is None else task(config, spec)
            )
            return built[-1].build()

        self.model, checkpoint = load_model(directory, build=build)
        self.task: Task = built[-1]
        try:
            self.task.restore(checkpoint.vocabs)
        except (KeyError, TypeError) as error:
            raise ValueError(
                f"{directory}: the checkpoint's vocabularies are unreadable ({error})"
            ) from None
        except ValueError as error:
            raise ValueError(f"{directory}: {error}") from None
        self.config: Config = checkpoint.config
        assert checkpoint.spec is not None
        self.spec: TaskSpec = checkpoint.spec
        self.max_len = self.spec.max_len

    @property
    def input(self) -> str:
        """``"text"`` or ``"vectors"``: what the model reads."""
        return self.task.input

    def description(self) -> InputDescription:
        """What kind of input the model reads, and how a file of it is featurised."""
        spec, stored = self.spec, self.task.reader
        return describe_input(
            self.config.data.dataset,
            self.task.input,
            feature_dim=spec.feature_dim,
            image_shape=spec.image_shape,
            edge_dim=spec.edge_dim,
            max_len=spec.max_len,
            stored=stored or None,  # a checkpoint written before readers: recomputed
        )

    def example(self, text: str, source: str = "<input>") -> Example:
        """An unlabelled example of a text model."""
        if self.task.input != "text":
            raise ValueError(f"{source}: {self.description().expects()}")
        return self.task.example(text, source)

    def read(
        self, argument: str, *, command: str = "predict", note: Callable[[str], None] = _stderr
    ) -> list[Example]:
        """The inputs an argument names: for a text model the text itself or the lines
        of ``@FILE``; for any other model a file (an image, a WAV/FLAC recording, a
        molecule or graph as JSON / MOL / SDF, an ``.npz`` vector set) read as the
        training data was (:mod:`selfattn.data.readers.user_input`).

        Raises:
            ValueError: empty input; an input of the wrong kind for this model (one line
                naming what it expects); a file that cannot be read.
        """
        own = self.task.read_file(argument)
        if own is not None:
            return [self.task.unlabelled(own)]
        description = self.description()
        if self.task.input == "text":
            check_text_input(argument, description)
            return [
                self.task.example(line, source)
                for source, line in text_inputs(argument, command, note)
            ]
        example = read_input(argument, description, source=argument)
        return [self.task.unlabelled(example)]

    def fit(self, example: Example, *, truncate: bool = False) -> Example:
        """``example`` as the model reads it (see :meth:`Task.fit`)."""
        return self.task.fit(self.model, example, truncate=truncate)

    def predict(self, example: Example, **options: Any) -> str:
        """The prediction for ``example`` as one line of text."""
        with varying_shapes(self.device):
            return self.task.predict(self.model, example, **options)

    def evaluate(
        self, split: str | DataFile = "test", *, truncate: bool = False, **options: Any
    ) -> dict[str, float]:
        """Metrics on a split of the dataset the model was trained on, or on a user's
        labelled file (:class:`~selfattn.tasks.scored_data.DataFile`)."""
        with varying_shapes(self.device):
            return self.task.score(self.model, split, truncate=truncate, **options)

    def attention(self, example: Example, **options: Any) -> list[AttentionFigure]:
        """Every attention map the model has for ``example``."""
        with varying_shapes(self.device):
            return self.task.attention(self.model, example, **options)

    @property
    def device(self) -> torch.device:
        """Where the model's weights are."""
        weight = next(self.model.parameters(), None)
        return torch.device("cpu") if weight is None else weight.device
