"""From a config to a trained checkpoint: the one road every task type travels.

:func:`prepare` finds the config's task type (``data.task``, the recipe's, or what the
user's files hold), loads its dataset, holds out a dev set when a user gives none, fits
every example to ``data.max_len`` and builds the vocabularies from the training split;
:func:`run` trains on it with :func:`selfattn.train.loop.train`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from selfattn.config import Config
from selfattn.data import RECIPES, DatasetSplits, batches, load_dataset
from selfattn.data.batching.splits import DEV_SEED
from selfattn.tasks.task import TASKS, Prepared, Task, task_named
from selfattn.train.checkpoint import MANIFEST, load_checkpoint
from selfattn.train.distributed import share
from selfattn.train.loop import TrainResult, train
from selfattn.train.run_dir import checkpoint_in
from selfattn.train.tensorboard import AttentionProbe


def declared_task(config: Config) -> str | None:
    """The task type ``config`` names (one that claims it, :meth:`Task.claims`; else
    ``data.task``; else the built-in one of its recipe's label layout), or ``None`` when
    only the user's files can tell.

    Raises:
        ValueError: ``data.task`` names no registered task type (one line listing them).
    """
    claimed = [name for name, kind in TASKS.items() if kind.claims(config)]
    if claimed:
        return claimed[0]
    name = config.data.task
    if name != "auto":
        if name not in TASKS:
            raise ValueError(
                f"data.task = {name!r}: no such task type; choose auto, {TASKS.choices()}"
            )
        return name
    recipe = RECIPES.get(config.data.dataset)
    return None if recipe is None else recipe.task


def inherited_state(config: Config, *, resume: bool = False) -> dict[str, Any]:
    """The stored task state of the run ``config`` continues (``resume``: its own
    ``run_dir/last``) or starts from (``train.init_from``), when that run read the same
    data with the same vocabulary settings; else ``{}`` (learn them afresh)."""
    if resume:
        last = Path(config.run_dir) / "last"
        if not (last / MANIFEST).is_file():
            return {}  # the trainer says why there is nothing to resume
        directory = last
    elif config.train.init_from is not None:
        directory = checkpoint_in(config.train.init_from)
    else:
        return {}
    stored = load_checkpoint(directory)
    same = ("dataset", "bpe_vocab_size", "lowercase", "min_freq", "train_fraction")
    if any(getattr(stored.config.data, f) != getattr(config.data, f) for f in same):
        return {}
    return stored.vocabs


def check_before_loading(config: Config) -> str | None:
    """Refuse what cannot train before reading any data (an architecture or setting the
    declared task type does not take); returns that task type (``None``: only the user's
    files can tell).

    Raises:
        ValueError: one line naming the field.
    """
    name = declared_task(config)
    if name is not None:
        recipe = RECIPES.get(config.data.dataset)
        TASKS[name].check_architecture(config)
        TASKS[name].check_config(config, text=None if recipe is None else recipe.input == "text")
    return name


def check_with_files(config: Config, read: dict[tuple[Any, ...], str] | None = None) -> str:
    """:func:`check_before_loading`, and for a config whose task type only the user's files
    tell, read them for that type and check the config against it as for a recipe: what a
    sweep does before starting any run. ``read``: the task types of files already read,
    by data setting, filled as files are read (a caller checking many configs of the same
    files reads them once).

    Raises:
        ValueError: one line naming the field (a :class:`~selfattn.datatypes.DataError`,
            naming the file and line, when the files cannot be read).
    """
    name = check_before_loading(config)
    if name is None:
        data = config.data
        key = (data.dataset, data.dev, data.test, data.dev_fraction)
        known = {} if read is None else read
        if key not in known:
            known[key] = _user_files(config).task
        name = known[key]
        TASKS[name].check_architecture(config)
        TASKS[name].check_config(config, text=None)
    return name


def _user_files(config: Config) -> DatasetSplits:
    """A user's files as ``data`` names them, a dev set held out when none is given."""
    data = config.data
    return load_dataset(
        data.dataset, dev=data.dev, test=data.test, dev_fraction=data.dev_fraction, seed=DEV_SEED
    )


def prepare(config: Config, *, inherited: dict[str, Any] | None = None) -> Prepared:
    """Load ``config.data.dataset`` for its task type, fit it to ``data.max_len`` and
    build vocabularies from its training split (reusing those of ``inherited``, a stored
    task state from :func:`inherited_state`, that cannot be learned again identically).

    Raises:
        DataError: malformed data, an example longer than ``data.max_len`` (with
            ``data.overlong = "refuse"``), a dev or test label the training file lacks.
    """
    name = check_before_loading(config)
    if name is None:  # a user's files: their columns say which task they hold
        splits = _user_files(config)
        task: Task = task_named(splits.task, config)  # the built-in type of that layout
    else:
        task = task_named(name, config)
        splits = task.load_splits()
    task.inherited = dict(inherited or {})
    notes = task.prepare(splits)
    return Prepared(task, splits, notes)


def batches_per_epoch(config: Config, prepared: Prepared) -> int:
    """How many optimizer steps an epoch of ``config`` takes (the same every epoch)."""
    return len(batches(prepared.splits.train, config.data.batch_size, shuffle=True))


def epoch_batches(config: Config, prepared: Prepared) -> Callable[[int], list[Any]]:
    """The training loop's ``train_batches``: epoch ``e``'s shuffled batches of
    ``data.batch_size`` (seed ``train.seed · 1000 + e``), collated; under torchrun, this
    process's share of each global batch."""
    seed, size = config.train.seed, config.data.batch_size
    train_split, task = prepared.splits.train, prepared.task

    def train_batches(epoch: int) -> list[Any]:
        groups = batches(train_split, size, shuffle=True, seed=seed * 1000 + epoch)
        return [share(group, task.collate) for group in groups]

    return train_batches


def attention_probe(prepared: Prepared) -> AttentionProbe | None:
    """The attention maps of the first dev example under the model being trained, for the
    run's TensorBoard images; ``None`` without a dev set."""
    if not prepared.splits.dev:
        return None
    task, example = prepared.task, prepared.splits.dev[0]

    def probe(model: nn.Module) -> Sequence[tuple[str, Sequence[Tensor], Sequence[str]]]:
        figures = task.attention(model, example)  # on the device of the model's weights
        return [(figure.title, figure.maps, figure.queries) for figure in figures]

    return probe


def run(
    config: Config,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> tuple[TrainResult, Prepared]:
    """Train the model ``config`` describes on its dataset; checkpoints go to ``run_dir``.

    ``log`` receives the notes of :func:`prepare` (a held-out dev set, cut examples)
    before training starts.
    """
    prepared = prepare(config, inherited=inherited_state(config, resume=resume))
    if log is not None:
        for note in prepared.notes:
            log(note)
    dev = prepared.batches_of(prepared.splits.dev) if prepared.splits.dev else None
    result = train(
        config,
        prepared.spec,
        epoch_batches(config, prepared),
        (lambda: dev) if dev is not None else None,
        objective=prepared.task,
        vocabs=prepared.vocabs(),
        resume=resume,
        overwrite=overwrite,
        progress=progress,
        attention=attention_probe(prepared) if config.train.tensorboard_images else None,
    )
    return result, prepared
