"""The Python face of selfattn, as short as the command line.

>>> import selfattn
>>> run = selfattn.train("configs/sentiment_rt.toml", set={"train.epochs": 1})
>>> run.metrics["dev_accuracy"]
>>> model = selfattn.load(run.path)                 # or selfattn.load("runs/sentiment_rt")
>>> model.predict("a warm and funny film")          # 'pos\\t(pos 0.93, neg 0.07)'
>>> model.evaluate("test")                          # {'loss': …, 'accuracy': …, 'count': …}
>>> model.evaluate("my_reviews.csv")                # any labelled file the task reads
>>> [figure] = model.attention("I saw a saw")       # figure.maps: per layer (H, T, S)

:func:`train` is ``selfattn train CONFIG --set FIELD=VALUE``, :meth:`Model.predict`
``selfattn predict``, :meth:`Model.evaluate` ``selfattn eval`` (``--split`` or
``--data``), :meth:`Model.attention` the maps ``selfattn attention`` draws: the same
numbers, and the same one-line ``ValueError`` for a mistake.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selfattn.config import (
    Config,
    apply_override,
    config_from_dict,
    config_to_dict,
    load_config,
    toml_literal,
)
from selfattn.datatypes import Example
from selfattn.tasks import AttentionFigure, Predictor, run
from selfattn.tasks.scored_data import SPLITS, DataFile

__all__ = ["Model", "Run", "load", "train"]

#: What a configuration may be: a TOML file, a built :class:`Config`, or its nested values.
ConfigLike = str | Path | Config | Mapping[str, Any]


@dataclass
class Run:
    """A finished training run (what :func:`train` returns).

    Attributes:
        path: the run folder (``best/``, ``last/``, ``metrics.jsonl``).
        config: the configuration it trained with.
        history: every epoch's metrics line (``train_loss``, ``dev_accuracy`` …).
        best: the best epoch's line (``None`` when no epoch ran).
        stopped_early: stopped for lack of improvement (``train.patience``).
    """

    path: Path
    config: Config
    history: list[dict[str, Any]] = field(default_factory=list)
    best: dict[str, Any] | None = None
    stopped_early: bool = False

    @property
    def metrics(self) -> dict[str, Any]:
        """The best epoch's metrics (``{}`` when no epoch ran)."""
        return dict(self.best or {})

    def load(self) -> Model:
        """The run's best checkpoint (else its last), ready to predict."""
        return load(self.path)

    def evaluate(self, data: str | Path = "test", **options: Any) -> dict[str, float]:
        """:meth:`Model.evaluate` of :meth:`load`."""
        return self.load().evaluate(data, **options)


def train(
    config: ConfigLike,
    *,
    set: Mapping[str, Any] | None = None,  # the command's --set
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = False,
    log: Callable[[str], None] | None = print,
) -> Run:
    """Train a model, as ``selfattn train``.

    Args:
        config: a TOML file (``"configs/pos_wsj.toml"``), a :class:`Config`, or nested
            values as TOML holds them (``{"data": {"dataset": "pos-wsj"}, …}``).
        set: fields to override, ``{"train.epochs": 2, "run_dir": "runs/x"}`` (the
            command's ``--set train.epochs=2 --set run_dir=runs/x``).
        resume: continue from ``run_dir/last``.
        overwrite: start afresh even if ``run_dir`` holds a run.
        progress: a progress bar instead of one line per epoch.
        log: receives what loading the data says (a held-out dev set, cut examples);
            ``None`` to drop it.

    Raises:
        ValueError: one line: a bad config, field or value; bad data (``file:line``).
    """
    overrides = [override(name, value) for name, value in (set or {}).items()]
    built = configured(config, overrides)
    result, _ = run(built, resume=resume, overwrite=overwrite, progress=progress, log=log)
    return Run(
        path=result.run_dir,
        config=built,
        history=list(result.history),
        best=result.best,
        stopped_early=result.stopped_early,
    )


def configured(config: ConfigLike, overrides: Sequence[str] = ()) -> Config:
    """``config`` (see :func:`train`) with ``overrides`` (``"section.field=value"``)."""
    if isinstance(config, str | Path):
        return load_config(Path(config), list(overrides))
    values = config_to_dict(config) if isinstance(config, Config) else json_copy(config)
    for line in overrides:
        apply_override(values, line)
    return config_from_dict(values)


def json_copy(values: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of nested plain values (paths as strings)."""
    copied: dict[str, Any] = json.loads(json.dumps(values, default=str))
    return copied


def override(name: str, value: Any) -> str:
    """``name=value`` as ``--set`` reads it: ``value`` written as a TOML literal (a string
    quoted, so that ``"3"`` stays a string; ``None`` as ``"none"``)."""
    return f"{name}={toml_literal(value)}"


def load(path: str | Path) -> Model:
    """A trained model: a run folder (its best checkpoint, else its last) or a checkpoint
    folder.

    Raises:
        ValueError: no checkpoint there, or one this selfattn cannot read.
    """
    return Model(Predictor(path), Path(path))


class Model:
    """A trained model with its vocabularies and labels (what :func:`load` returns).

    Attributes:
        path: the folder it was loaded from.
        task: its task type (``"token"``, ``"sequence"``, ``"regression"``,
            ``"multilabel"``, ``"seq2seq"``, ``"bits"``, or a task type of your own).
        layout: what its labels look like (the task type's ``layout``: one of the
            built-in names above).
        input: ``"text"`` or ``"vectors"``: what it reads.
        config: the configuration it was trained with.
        predictor: the :class:`~selfattn.tasks.Predictor` underneath.
    """

    def __init__(self, predictor: Predictor, path: Path) -> None:
        self.predictor = predictor
        self.path = path
        self.task: str = predictor.spec.task_type
        self.layout: str = predictor.spec.task
        self.input: str = predictor.input
        self.config: Config = predictor.config

    def __repr__(self) -> str:
        return f"Model({str(self.path)!r}, task={self.task!r}, input={self.input!r})"

    def predict(
        self, x: str | Path | Sequence[str | Path], *, truncate: bool = False, **options: Any
    ) -> str | list[str]:
        """What ``selfattn predict`` prints, one string per input.

        Args:
            x: a text model: the text (one prediction), a list of texts, or a
                :class:`~pathlib.Path` of one text a line (a list). Any other model: a file
                of the kind it reads (an image, a WAV, a graph's JSON, an ``.npz``), or a
                list of them.
            truncate: cut an input longer than the model reads (with a warning) instead
                of refusing it.
            options: seq2seq decoding (``method="beam", beam_size=4`` …); a multilabel
                model's ``threshold``.
        """
        examples, single = self._read(x)
        predictions = [self.predictor.predict(self._fit(e, truncate), **options) for e in examples]
        return predictions[0] if single else predictions

    def evaluate(
        self,
        data: str | Path = "test",
        *,
        format: str | None = None,  # eval's --format
        truncate: bool = False,
        **options: Any,
    ) -> dict[str, float]:
        """What ``selfattn eval`` prints (without its ``split`` / ``data`` key): the metrics
        on a split of the run's dataset (``"train"``, ``"dev"``, ``"test"``) or on a
        labelled file in a format ``selfattn train`` reads for this task (a
        :class:`~pathlib.Path` is always a file).

        Args:
            format: read the file as if its name ended in ``.FORMAT``.
            truncate, options: as in :meth:`predict`.

        Raises:
            ValueError: one line: an empty split; a missing, empty or malformed file, one
                of another task type, or with a label the model does not know
                (``file:line``).
        """
        scored: str | DataFile
        if isinstance(data, str) and data in SPLITS:
            if format is not None:
                raise ValueError(f"format={format!r} reads a file; {data!r} is a split")
            scored = data
        else:
            scored = DataFile(Path(data), format)
        metrics = self.predictor.evaluate(scored, truncate=truncate, **options)
        return {**self.predictor.task.describe(options), **metrics}

    def attention(
        self, x: str | Path, *, truncate: bool = False, **options: Any
    ) -> list[AttentionFigure]:
        """Every attention map the model has for one input (``selfattn attention``): one
        :class:`~selfattn.tasks.AttentionFigure` per kind of attention (a seq2seq model:
        cross-attention, then the encoder's and the decoder's self-attention), its
        ``maps`` one ``(heads, queries, keys)`` tensor per layer, each row summing to 1.

        Raises:
            ValueError: not one input; a model without attention weights.
        """
        examples, single = self._read(x)
        if not single or len(examples) != 1:
            raise ValueError(f"{len(examples)} inputs; attention reads one at a time")
        return self.predictor.attention(self._fit(examples[0], truncate), **options)

    def _read(self, x: str | Path | Sequence[str | Path]) -> tuple[list[Example], bool]:
        """The examples ``x`` names, and whether it was one input."""
        if not isinstance(x, str | Path):  # several inputs
            return [example for item in x for example in self._read(item)[0]], False
        if self.input != "text":
            return self.predictor.read(str(x)), True
        if isinstance(x, Path):
            if not x.is_file():
                raise ValueError(f"{x}: not a file of inputs (a text model reads one a line)")
            return self.predictor.read(f"@{x.absolute()}"), False
        return [self.predictor.example(x)], True

    def _fit(self, example: Example, truncate: bool) -> Example:
        """``example`` as the model reads it; a warning when ``truncate`` cut it."""
        fit = self.predictor.fit(example, truncate=truncate)
        if len(fit) != len(example):
            warnings.warn(
                f"{example.source}: input of {len(example)} cut to the model's max_len = "
                f"{len(fit)}",
                stacklevel=3,
            )
        return fit
