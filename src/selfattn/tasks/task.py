"""The unit of the design: one registered :class:`Task` per task type.

A task type (a label per vector, a label per set, a number per set, an output sequence)
decides everything between a config and a prediction: how its data is read and its
vocabularies are built, what model it builds, its loss and its development metrics, how
a user's input becomes an example, what a prediction looks like and which attention maps
a model of it can show. The training loop, :func:`~selfattn.tasks.run.prepare`,
:class:`~selfattn.tasks.predictor.Predictor` and the CLI ask the task and never branch
on its type; a new task type is one module and one :func:`register_task`.

A task type is not its label layout (:data:`~selfattn.datatypes.TaskType`: what the
labels and the model's head look like): a new task type may read and build as a
built-in one does (subclass it) and differ in its loss or its predictions. The checkpoint
stores both (:class:`~selfattn.models.spec.TaskSpec`'s ``task_type`` and ``task``), so a
saved run reads back as the task type that trained it.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, get_args

import torch
from torch import Tensor, nn

from selfattn.config import Config
from selfattn.data import DatasetSplits, Example, load_dataset
from selfattn.data.batching.lengths import unit
from selfattn.data.batching.splits import DEV_SEED
from selfattn.datatypes import InputKind, TaskType
from selfattn.models.architectures import ARCHITECTURES
from selfattn.models.spec import TaskSpec
from selfattn.registries import Registry
from selfattn.tasks.scored_data import DataFile
from selfattn.train.fused_ce import check_fusable

EVAL_BATCH_SIZE = 64
_B = TypeVar("_B")
_M = TypeVar("_M", bound=nn.Module)


@dataclass
class AttentionFigure:
    """One set of attention maps to draw: per layer ``(H, T, S)`` weights of one example.

    Attributes:
        title: what the maps are (``"self-attention"``, ``"cross-attention"`` …).
        maps: per layer, ``(H, T, S)``.
        queries: the T row labels.
        keys: the S column labels.
        layer: what one of its layers is called (``"decoder layer"`` …).
    """

    title: str
    maps: list[Tensor]
    queries: list[str]
    keys: list[str]
    layer: str = "layer"


@dataclass
class Prepared:
    """A task with its data loaded and vocabularies fitted: what the loop trains on.

    ``notes`` are lines for the user about what loading did (a held-out dev set, cut
    examples).
    """

    task: Task
    splits: DatasetSplits
    notes: list[str] = field(default_factory=list)

    @property
    def spec(self) -> TaskSpec:
        """The model's inputs and outputs, fitted on the training split."""
        assert self.task.spec is not None
        return self.task.spec

    def vocabs(self) -> dict[str, Any]:
        """What the checkpoint stores beside the weights (:meth:`Task.state`)."""
        return self.task.state()

    def batches_of(self, examples: list[Example]) -> list[Any]:
        """``examples`` in file order, collated for evaluation."""
        return self.task.batches_of(examples)


class Task(abc.ABC):
    """Everything one task type does, from a config to a prediction.

    A task is made from a run's config and, once known, the :class:`TaskSpec` of its
    model. :meth:`prepare` fits it to a dataset's training split (setting ``spec``);
    :meth:`restore` fits it from a checkpoint's stored :meth:`state` instead.

    Attributes:
        name: the registry key, the ``task_type`` of :class:`TaskSpec` and a value of
            ``data.task``.
        layout: what its labels look like (the ``task`` of :class:`TaskSpec`): the
            layout its data is read as and its model's head is built for.
        options: the keyword options of :meth:`predict`, :meth:`score` and
            :meth:`attention` besides ``truncate`` (seq2seq: the decoding options); any
            other option is refused in one line.
        objectives: the ``train.objective`` values it trains with; others are refused.
    """

    name: ClassVar[str] = ""
    layout: ClassVar[TaskType]
    #: What it takes from an architecture (:data:`selfattn.models.registry.Product`): an
    #: architecture that produces none of it is refused before any data is read.
    accepts: ClassVar[frozenset[str]] = frozenset()
    options: ClassVar[frozenset[str]] = frozenset()
    #: The values of ``train.objective`` it trains with (sequence-level ones: seq2seq).
    objectives: ClassVar[tuple[str, ...]] = ("mle",)

    def __init__(self, config: Config, spec: TaskSpec | None = None) -> None:
        objective = config.train.objective
        if objective not in self.objectives:
            raise ValueError(
                f'train.objective = "{objective}" trains on decoded output sequences: it is '
                f"for seq2seq tasks; this dataset is a {self.name} task (choose "
                f"{', '.join(repr(o) for o in self.objectives)})"
            )
        if config.train.fused_cross_entropy == "on":
            check_fusable(self.name, config.seq2seq.output)
        self.config = config
        self.spec = spec
        #: ``"text"`` or ``"vectors"``: what the model's inputs are.
        self.input: InputKind = "text"
        #: How a user's non-text input becomes an example like the training ones
        #: (:mod:`selfattn.data.readers.user_input`), stored in the checkpoint.
        self.reader: dict[str, Any] = {}
        #: The stored :meth:`state` of the run this one continues (``--resume``) or starts
        #: from (``train.init_from``), learned on the same data settings: :meth:`prepare`
        #: reuses what cannot be learned again identically (the BPE merges' ids).
        self.inherited: dict[str, Any] = {}

    @classmethod
    def check_architecture(cls, config: Config) -> None:
        """Refuse, in one line, an architecture whose products this task type does not
        accept, naming the task types it serves and the architectures this one takes."""
        name = config.model.architecture
        if ARCHITECTURES[name].produces & cls.accepts:
            return
        serves = [task for task, kind in TASKS.items() if kind.takes(name)]
        tasks = serves[0] if len(serves) == 1 else f"{', '.join(serves[:-1])} and {serves[-1]}"
        takes = " or ".join(f'"{arch}"' for arch in ARCHITECTURES if cls.takes(arch))
        raise ValueError(
            f"model.architecture = {name!r} is for the {tasks} task{'s' * (len(serves) > 1)}, "
            f"not a {cls.name} task; a {cls.name} task takes {takes}"
        )

    @classmethod
    def claims(cls, config: Config) -> bool:
        """Whether ``config`` is this task type's whatever its data (a Whisper checkpoint
        in ``model.pretrained``); ``False``: the data decide."""
        return False

    @classmethod
    def takes(cls, architecture: str) -> bool:
        """Whether ``architecture`` produces something this task type accepts."""
        return bool(ARCHITECTURES[architecture].produces & cls.accepts)

    @classmethod
    @abc.abstractmethod
    def check_config(cls, config: Config, *, text: bool | None) -> None:
        """Refuse, in one line and before any data is read, what this task type cannot
        train with ``config``: an architecture of another task type, a model field the
        task would ignore (``text``: the input is words; ``None`` when only the data can
        tell). The build checks again, with the data's sizes."""

    # ------------------------------------------------------------------ data

    def load_splits(self) -> DatasetSplits:
        """The dataset of the config as this task reads it: a recipe's splits, or a
        user's files with a dev set held out of the training file when there is no
        ``data.dev``."""
        data = self.config.data
        return load_dataset(
            data.dataset,
            dev=data.dev,
            test=data.test,
            task=self.data_task(),
            dev_fraction=data.dev_fraction,
            seed=DEV_SEED,
        )

    def data_task(self) -> TaskType:
        """The label layout the data loader is asked for: :attr:`layout` (seq2seq on a
        dataset of label sets reads them as output sequences)."""
        return self.layout

    @abc.abstractmethod
    def prepare(self, splits: DatasetSplits) -> list[str]:
        """Fit the task to ``splits`` (subset, cut, vocabularies; sets ``spec``), in
        place; returns notes for the user.

        Raises:
            DataError: malformed data, an overlong example, an unseen label.
        """

    @abc.abstractmethod
    def state(self) -> dict[str, Any]:
        """The vocabularies and reader settings as a JSON-ready dict (the checkpoint's
        ``vocabs``); ``"task"`` names the task type."""

    @abc.abstractmethod
    def restore(self, stored: dict[str, Any]) -> None:
        """Take the vocabularies and reader settings back from :meth:`state`."""

    @abc.abstractmethod
    def collate(self, examples: Sequence[Example]) -> Any:
        """One batch of ``examples``."""

    def model_batch(self, model: nn.Module, examples: Sequence[Example]) -> Any:
        """One batch of ``examples`` on the device of ``model``'s weights (a model being
        trained on a GPU reads its attention maps there)."""
        return on_model_device(self.collate(examples), model)

    def batches_of(self, examples: list[Example]) -> list[Any]:
        """``examples`` in file order, collated for evaluation."""
        from selfattn.data import batches

        groups = batches(examples, EVAL_BATCH_SIZE, shuffle=False)
        return [self.collate(group) for group in groups]

    # ------------------------------------------------------------------ training

    @abc.abstractmethod
    def build(self) -> nn.Module:
        """A freshly initialised model for ``spec``; its ``spec`` attribute, what a
        checkpoint stores, names this task type (``task_type``)."""

    @abc.abstractmethod
    def loss(self, model: Any, batch: Any, step: int) -> Tensor:
        """The loss of ``batch`` at optimizer step ``step`` (model in training mode)."""

    @abc.abstractmethod
    def evaluate(
        self, model: Any, batches: Iterable[Any], *, device: torch.device | str | None = None
    ) -> dict[str, float]:
        """Development metrics over ``batches``: ``"loss"`` and the checkpoint-selection
        score (``"accuracy"``, or a regression's ``"rmse"``)."""

    # ------------------------------------------------------------------ inference

    @abc.abstractmethod
    def example(self, text: str, source: str = "<input>") -> Example:
        """An unlabelled example of a text model from ``text``.

        Raises:
            ValueError: empty input.
        """

    def read_file(self, argument: str) -> Example | None:
        """An input file read the task's own way (``None``: as the training data's kind
        is read, :mod:`selfattn.data.readers.user_input`)."""
        return None

    @abc.abstractmethod
    def unlabelled(self, example: Example) -> Example:
        """``example`` (read from a user's file) with the stand-in label the collator
        needs; predictions ignore it."""

    @abc.abstractmethod
    def fit(self, model: nn.Module, example: Example, *, truncate: bool = False) -> Example:
        """``example`` as ``model`` can read it: unchanged, or cut to its limit with
        ``truncate`` (a caller that wants to say so compares lengths).

        Raises:
            ValueError: longer than the model reads, and ``truncate`` is off.
        """

    @abc.abstractmethod
    def predict(self, model: nn.Module, example: Example, **options: Any) -> str:
        """The prediction for ``example`` as one line of text."""

    @abc.abstractmethod
    def score(
        self, model: nn.Module, split: str | DataFile, *, truncate: bool = False, **options: Any
    ) -> dict[str, float]:
        """Metrics of ``model`` on a split of the dataset it was trained on, or on a
        user's file of a format its task type reads
        (:func:`~selfattn.tasks.scored_data.scored_examples`)."""

    @abc.abstractmethod
    def attention(
        self, model: nn.Module, example: Example, **options: Any
    ) -> list[AttentionFigure]:
        """Every attention map ``model`` has for ``example``.

        Raises:
            ValueError: the model has no attention weights to show (one line: why).
        """

    def describe(self, options: dict[str, Any]) -> dict[str, Any]:
        """What a report of :meth:`score` with ``options`` should say besides the metrics
        (seq2seq: the decoding method)."""
        return {}

    def check_options(self, options: dict[str, Any]) -> None:
        """Refuse options this task type does not take, in one line. Every task type
        takes ``method="greedy"``: its likeliest output, what a classifier always gives."""
        unknown = sorted(
            name
            for name, value in options.items()
            if name not in self.options and not (name == "method" and value == "greedy")
        )
        if "threshold" in unknown:
            raise ValueError(
                f"--threshold: a label set's threshold is for multilabel models; a {self.name} "
                "model does not choose a set of labels"
            )
        if unknown:
            flags = {"method": options.get("method"), "beam_size": "beam"}
            # One flag may set two options (--beam K: the method and the width).
            named = ("--" + str(flags.get(name) or name).replace("_", "-") for name in unknown)
            given = ", ".join(dict.fromkeys(named))
            raise ValueError(
                f"{given}: decoding options are for seq2seq models; a {self.name} model "
                "gives its likeliest output (as --greedy)"
            )


def on_model_device(batch: _B, model: nn.Module) -> _B:
    """``batch`` (anything with a ``to(device)``) on the device of ``model``'s weights."""
    weight = next(model.parameters(), None)
    return batch if weight is None else batch.to(weight.device)  # type: ignore[attr-defined]


def of_task_type(model: _M, task_type: str) -> _M:
    """``model`` with the :class:`TaskSpec` it keeps (what its checkpoints store) naming
    ``task_type``."""
    spec = model.spec
    assert isinstance(spec, TaskSpec), f"{type(model).__name__} keeps no task spec"
    model.spec = dataclasses.replace(spec, task_type=task_type)
    return model


def too_long(example: Example, limit: tuple[int, str]) -> ValueError:
    """The one-line refusal of an input longer than a model reads."""
    size, reason = limit
    return ValueError(
        f"{example.source}: input of {len(example)} {unit(example)} is longer than this "
        f"model's max_len = {size} ({reason}); pass --truncate to keep the first {size}"
    )


def positions(example: Example) -> list[str]:
    """Labels of an example's vectors for a map's axes: its tokens, else 0, 1, …"""
    if example.tokens:
        return list(example.tokens)
    return [str(i) for i in range(len(example))]


_T = TypeVar("_T", bound=type[Task])

#: Task types by name (the ``task_type`` of a :class:`TaskSpec`, a checkpoint's
#: ``vocabs``, the values of ``data.task`` besides ``"auto"``). The built-in task type of
#: each label layout bears the layout's name.
TASKS: Registry[type[Task]] = Registry("task type")


def register_task(cls: _T) -> _T:
    """Class decorator: add a task type to :data:`TASKS` under its ``name``.

    Raises:
        ValueError: no ``layout`` of :data:`~selfattn.datatypes.TaskType`; a name taken.
    """
    layouts = get_args(TaskType)
    if getattr(cls, "layout", None) not in layouts:
        raise ValueError(
            f"task type {cls.__name__}: its class attribute layout = "
            f"{getattr(cls, 'layout', None)!r} must be one of {', '.join(layouts)}"
        )
    return TASKS.add_class(cls)


def task_named(name: str, config: Config, spec: TaskSpec | None = None) -> Task:
    """The task type ``name`` for ``config``.

    Raises:
        ValueError: no such task type.
    """
    return TASKS.named(name)(config, spec)


def build_for_spec(config: Config, spec: TaskSpec) -> nn.Module:
    """The (untrained) model a checkpoint with ``config`` and ``spec`` holds: the
    ``build`` of :func:`selfattn.train.checkpoint.load_model`."""
    return task_named(spec.task_type, config, spec).build()
