"""From a config to a trained checkpoint and back: the glue the CLI stands on.

``prepare`` loads the dataset a config names (a recipe or a user file), holds out a dev
set when a user gives none, fits every example to ``data.max_len``, builds the
vocabularies from the training split, and returns everything the loop and the model
need; ``run`` trains; ``Predictor`` reloads a checkpoint with its vocabularies to
evaluate or tag new input — of any length its positions allow, in windows for a token
task whose learned positions end.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer
from torch import Tensor

from selfattn.data import (
    RECIPES,
    Batch,
    CharVocabulary,
    Collator,
    DatasetSplits,
    Example,
    LabelVocabulary,
    Vocabulary,
    batches,
    bpe_retokenize,
    bpe_vocabulary,
    load_dataset,
    train_bpe,
)
from selfattn.data.collate import IGNORE_INDEX
from selfattn.data.formats import tokenize
from selfattn.data.images import image_shape
from selfattn.data.lengths import cut_note, fit_examples, fit_splits, slice_example, window_spans
from selfattn.data.splits import DEV_SEED, dev_note, stratified_subset
from selfattn.data.types import NO_LABEL, DataError
from selfattn.tasks import TaskModel, TaskSpec
from selfattn.tasks.model import input_length_limit
from selfattn.train.checkpoint import MANIFEST, load_model
from selfattn.train.config import Config
from selfattn.train.loop import TrainResult, train
from selfattn.train.objectives import evaluate
from selfattn.train.run_dir import checkpoint_in
from selfattn.train.seq2seq_pipeline import (
    Seq2SeqPredictor,
    Seq2SeqPrepared,
    data_task,
    load_seq2seq_splits,
    prepare_seq2seq,
    too_long,
)

EVAL_BATCH_SIZE = 64


@dataclass
class Prepared:
    """A dataset with its vocabularies, collator and the model's task spec; ``notes`` are
    lines for the user about what loading did (a held-out dev set, cut examples)."""

    splits: DatasetSplits
    vocab: Vocabulary | None
    chars: CharVocabulary | None
    labels: LabelVocabulary
    collator: Collator
    spec: TaskSpec
    bpe: Tokenizer | None = None
    notes: list[str] = field(default_factory=list)

    def vocabs(self) -> dict[str, Any]:
        """The vocabularies as JSON-ready dicts, for the checkpoint."""
        return {
            "task": self.splits.task,
            "input": self.splits.input,
            "vocab": None if self.vocab is None else self.vocab.to_dict(),
            "chars": None if self.chars is None else self.chars.to_dict(),
            "labels": self.labels.to_dict(),
            "bpe": None if self.bpe is None else self.bpe.to_str(),
        }

    def batches_of(self, examples: list[Example]) -> list[Batch]:
        """``examples`` in file order, collated for evaluation."""
        return [self.collator(group) for group in batches(examples, EVAL_BATCH_SIZE, shuffle=False)]


def is_seq2seq(config: Config) -> bool:
    """Whether ``config`` trains an encoder–decoder (a seq2seq recipe, or data.task)."""
    recipe = RECIPES.get(config.data.dataset)
    return config.data.task == "seq2seq" or (recipe is not None and recipe.task == "seq2seq")


def load_splits(config: Config) -> DatasetSplits:
    """The dataset of ``config`` as a model reads it: a recipe's splits, or a user's files
    with a dev set held out of the training file when there is no ``data.dev``."""
    data = config.data
    return load_dataset(
        data.dataset,
        dev=data.dev,
        test=data.test,
        task=data_task(config),
        dev_fraction=data.dev_fraction,
        seed=DEV_SEED,
    )


def prepare(config: Config) -> Prepared | Seq2SeqPrepared:
    """Load ``config.data.dataset``, fit it to ``data.max_len`` and build vocabularies
    from its training split.

    Raises:
        DataError: malformed data, an example longer than ``data.max_len`` (with
            ``data.overlong = "refuse"``), a dev or test label the training file lacks.
    """
    if is_seq2seq(config):
        return prepare_seq2seq(config, load_seq2seq_splits(config))
    data = config.data
    splits = load_splits(config)
    if not splits.train:
        raise ValueError(f"dataset {data.dataset!r} has no training examples")
    note = dev_note(
        splits, dev_file=data.dev is not None or data.dataset in RECIPES, fraction=data.dev_fraction
    )
    notes = [note] if note else []
    labels = _label_vocabulary(splits, recipe=data.dataset in RECIPES)
    splits.train = stratified_subset(
        splits.train, data.train_fraction, stratify=splits.task == "sequence"
    )
    text = splits.input == "text"
    vocab = chars = None
    bpe = None
    if text and data.bpe_vocab_size is not None:
        # Subwords for sequence tasks (token tasks keep words: their labels belong to words).
        sentences = (" ".join(example.tokens or ()) for example in splits.train)
        bpe = train_bpe(sentences, data.bpe_vocab_size, lowercase=data.lowercase)
        splits.train, splits.dev, splits.test = (
            bpe_retokenize(part, bpe) for part in (splits.train, splits.dev, splits.test)
        )
    cut = fit_splits(splits, data.max_len, data.overlong)
    if cut:
        notes.append(cut_note(cut, data.max_len))
    if text:
        train_tokens = [example.tokens or () for example in splits.train]
        vocab = (
            bpe_vocabulary(bpe)
            if bpe is not None
            else Vocabulary.build(train_tokens, min_freq=data.min_freq, lowercase=data.lowercase)
        )
        if config.model.char_features:
            chars = CharVocabulary.build(train_tokens)
    features = splits.train[0].features
    spec = TaskSpec(
        task=splits.task,
        num_labels=max(len(labels), 1),  # regression: one output
        vocab_size=len(vocab) if vocab is not None else None,
        char_vocab_size=len(chars) if chars is not None else None,
        feature_dim=None if features is None else int(features.shape[1]),
        max_len=data.max_len,
        edge_dim=_edge_dim(splits.train[0]),
        image_shape=image_shape(splits),
        **_target_statistics(splits),
    )
    collator = Collator(vocab, chars, labels, splits.task, max_len=spec.max_len)
    return Prepared(splits, vocab, chars, labels, collator, spec, bpe, notes)


def _label_vocabulary(splits: DatasetSplits, *, recipe: bool) -> LabelVocabulary:
    """The task's labels: a recipe's whole label set, or a user's training file's.

    A recipe's label set is part of its definition (pos-wsj's SYM and LS occur only in
    dev/test). A user's labels come from their training file (a dev set held out of it
    included); a label of a dev or test file that the training file lacks could never be
    predicted, so it is a one-line error naming its file and line.
    """
    if splits.task == "regression":
        return LabelVocabulary([])  # a regression has numbers, not classes
    if recipe:
        return LabelVocabulary.for_splits(splits)
    from_train = splits.train + splits.dev if splits.dev_from_train else splits.train
    labels = LabelVocabulary.build(from_train)
    for part in ([] if splits.dev_from_train else splits.dev, splits.test):
        for example in part:
            names = (example.label,) if isinstance(example.label, str) else example.label
            for label in names:
                if label != NO_LABEL and label not in labels:
                    raise DataError(
                        f"{example.source}: label {label!r} never occurs in the training "
                        f"file {splits.extra.get('train', splits.name)}"
                    )
    return labels


def _target_statistics(splits: DatasetSplits) -> dict[str, float]:
    """A regression's training-target mean and standard deviation (for its head)."""
    if splits.task != "regression":
        return {}
    targets = torch.tensor([float(str(example.label)) for example in splits.train])
    std = float(targets.std()) if len(targets) > 1 else 1.0
    return {"target_mean": float(targets.mean()), "target_std": std if std > 0 else 1.0}


def _edge_dim(example: Example) -> int | None:
    """Features per edge of a graph dataset (``None``: no graph, or edges without any)."""
    edge_features = example.edge_features
    return None if edge_features is None else int(edge_features.shape[1])


def run(
    config: Config,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> tuple[TrainResult, Prepared | Seq2SeqPrepared]:
    """Train the model ``config`` describes on its dataset; checkpoints go to ``run_dir``.

    ``log`` receives the notes of :func:`prepare` (a held-out dev set, cut examples)
    before training starts.
    """
    prepared = prepare(config)
    if log is not None:
        for note in prepared.notes:
            log(note)
    seed, size = config.train.seed, config.data.batch_size
    train_split = prepared.splits.train

    def train_batches(epoch: int) -> list[Any]:
        groups = batches(train_split, size, shuffle=True, seed=seed * 1000 + epoch)
        return [prepared.collator(group) for group in groups]

    dev = prepared.batches_of(prepared.splits.dev) if prepared.splits.dev else None
    result = train(
        config,
        prepared.spec,
        train_batches,
        (lambda: dev) if dev is not None else None,
        vocabs=prepared.vocabs(),
        resume=resume,
        overwrite=overwrite,
        progress=progress,
    )
    return result, prepared


def checkpoint_task(checkpoint_dir: str | Path) -> str:
    """The task (``token``, ``sequence``, ``seq2seq``) a run or checkpoint folder holds."""
    directory = checkpoint_in(checkpoint_dir)
    manifest = directory / MANIFEST
    if not manifest.is_file():
        raise ValueError(f"{directory}: no checkpoint here ({MANIFEST} is missing)")
    try:
        return str(json.loads(manifest.read_text(encoding="utf-8"))["vocabs"]["task"])
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise ValueError(f"{manifest}: unreadable checkpoint manifest ({error})") from None


def load_predictor(checkpoint_dir: str | Path) -> Predictor | Seq2SeqPredictor:
    """The predictor for what ``checkpoint_dir`` holds."""
    if checkpoint_task(checkpoint_dir) == "seq2seq":
        return Seq2SeqPredictor(checkpoint_dir)
    return Predictor(checkpoint_dir)


class Predictor:
    """A trained checkpoint with its vocabularies: evaluate splits, label new input.

    An input longer than the checkpoint's ``max_len`` is read whole when the model's
    positions extend to any length (:func:`~selfattn.tasks.model.input_length_limit`).
    Where they end (a learned table), a token task reads it in overlapping windows; a
    sequence or regression task refuses it, or keeps its first ``max_len`` positions when
    asked to (:meth:`fit` with ``truncate``).
    """

    def __init__(self, checkpoint_dir: str | Path) -> None:
        directory = checkpoint_in(checkpoint_dir)  # a run folder: its best checkpoint
        model, checkpoint = load_model(directory)
        if not isinstance(model, TaskModel):
            raise ValueError(f"{directory}: a seq2seq checkpoint; use Seq2SeqPredictor")
        self.model: TaskModel = model
        self.config = checkpoint.config
        stored = checkpoint.vocabs
        if "labels" not in stored:
            raise ValueError(f"{directory}: the checkpoint stores no vocabularies")
        self.task = stored["task"]
        self.input = stored["input"]
        self.vocab = Vocabulary.from_dict(stored["vocab"]) if stored.get("vocab") else None
        self.chars = CharVocabulary.from_dict(stored["chars"]) if stored.get("chars") else None
        self.labels = LabelVocabulary.from_dict(stored["labels"])
        self.bpe = Tokenizer.from_str(stored["bpe"]) if stored.get("bpe") else None
        assert checkpoint.spec is not None  # load_model refuses checkpoints without one
        self.max_len = checkpoint.spec.max_len
        #: ``(longest input, why)`` where the model's positions end, else ``None``.
        self.limit = input_length_limit(model)
        self.collator = Collator(
            self.vocab,
            self.chars,
            self.labels,
            self.task,
            max_len=None if self.limit is None else self.limit[0],
        )

    def fit(self, example: Example, *, truncate: bool = False, windows: bool = True) -> Example:
        """``example`` as the model can read it.

        Returned unchanged when the model reads it whole, or (``windows``) in windows: a
        token task. Otherwise cut to the model's limit with ``truncate``; a caller that
        wants to say so compares lengths.

        Raises:
            ValueError: too long, and neither windows nor ``truncate`` apply.
        """
        if self.limit is None or len(example) <= self.limit[0]:
            return example
        if windows and self.task == "token":
            return example
        if not truncate:
            raise too_long(example, self.limit)
        return slice_example(example, 0, self.limit[0], self.task)

    def evaluate(self, split: str = "test", *, truncate: bool = False) -> dict[str, float]:
        """Metrics of the checkpoint on a split of the dataset it was trained on.

        The split is read as training read it (the same held-out dev set; with
        ``data.overlong = "cut"`` the same cut). Longer inputs than the model reads are
        handled as in :meth:`fit`; ``truncated`` then counts the examples cut.
        """
        if split not in ("train", "dev", "test"):
            raise ValueError(f"unknown split {split!r}; choose train, dev or test")
        data = self.config.data
        examples = getattr(load_splits(self.config), split)
        if self.bpe is not None:
            examples = bpe_retokenize(examples, self.bpe)
        if not examples:
            raise ValueError(f"dataset {data.dataset!r} has no {split} split")
        if data.overlong == "cut":
            examples, _ = fit_examples(examples, data.max_len, "cut", self.task)
        fitted = [self.fit(example, truncate=truncate) for example in examples]
        truncated = sum(len(a) != len(b) for a, b in zip(examples, fitted, strict=True))
        limit = None if self.limit is None else self.limit[0]
        whole = [e for e in fitted if limit is None or len(e) <= limit]
        windowed = [e for e in fitted if limit is not None and len(e) > limit]
        groups = batches(whole, EVAL_BATCH_SIZE, shuffle=False)
        metrics = evaluate(self.model, [self.collator(group) for group in groups])
        if windowed:
            metrics = self._with_windowed(metrics, windowed)
        if truncated:
            metrics["truncated"] = float(truncated)
        return metrics

    def _with_windowed(
        self, metrics: dict[str, float], examples: list[Example]
    ) -> dict[str, float]:
        """Token-task ``metrics`` with ``examples`` added, each read in windows."""
        count = metrics["count"]
        loss_sum, correct = metrics["loss"] * count, metrics["accuracy"] * count
        for example in examples:
            logits = self.logits(example).float()  # (L, C)
            labels = torch.tensor(
                [
                    IGNORE_INDEX if tag == NO_LABEL else self.labels.encode(tag, example.source)
                    for tag in example.label
                ]
            )
            real = labels != IGNORE_INDEX
            loss_sum += float(torch.nn.functional.cross_entropy(logits, labels, reduction="sum"))
            correct += int((logits.argmax(-1)[real] == labels[real]).sum())
            count += int(real.sum())
        return {
            "loss": loss_sum / max(count, 1),
            "accuracy": correct / max(count, 1),
            "count": count,
        }

    def example(self, text: str, source: str = "<input>") -> Example:
        """Tokenise ``text`` into an unlabelled text example."""
        if self.input != "text":
            raise ValueError("this model reads vectors, not text: give an .npz file instead")
        tokens = tuple(tokenize(text))
        if self.bpe is not None and tokens:
            tokens = tuple(self.bpe.encode(list(tokens), is_pretokenized=True).tokens)
        if not tokens:
            raise ValueError(f"{source}: empty input")
        dummy: tuple[str, ...] | str = (
            tuple(self.labels.labels[0] for _ in tokens)
            if self.task == "token"
            else "0"
            if self.task == "regression"
            else self.labels.labels[0]
        )
        return Example(tokens=tokens, features=None, label=dummy, source=source)

    @torch.no_grad()
    def logits(self, example: Example) -> Tensor:
        """``(L, num_labels)`` for a token task (in windows past the model's limit),
        ``(num_labels,)`` for a sequence task, ``()`` for a regression.

        Raises:
            ValueError: a sequence or regression input longer than the model reads.
        """
        example = self.fit(example)
        if self.task != "token" or self.limit is None or len(example) <= self.limit[0]:
            return self.model(self.collator([example]))[0]
        size = self.limit[0]
        spans = window_spans(len(example), size)
        windows = [slice_example(example, start, start + size, "token") for start, _, _ in spans]
        rows = [
            self.model(self.collator(windows[i : i + EVAL_BATCH_SIZE]))
            for i in range(0, len(windows), EVAL_BATCH_SIZE)
        ]
        logits = torch.cat(rows)  # (W, size, C)
        out = logits.new_empty(len(example), logits.shape[-1])
        for window, (start, keep_from, keep_to) in enumerate(spans):
            out[keep_from:keep_to] = logits[window, keep_from - start : keep_to - start]
        return out

    def probabilities(self, example: Example) -> Tensor:
        """``(L, num_labels)`` for a token task, ``(num_labels,)`` for a sequence task."""
        return torch.softmax(self.logits(example), dim=-1)

    def value(self, example: Example) -> float:
        """A regression model's prediction for ``example``, in the targets' units."""
        if self.task != "regression":
            raise ValueError(f"value() is for regression; this is a {self.task} task")
        return float(self.logits(example))

    def predict(self, example: Example) -> list[tuple[str, float]] | list[tuple[str, str, float]]:
        """Token task: ``(token, tag, p)`` per token; sequence task: ``(label, p)`` ranked;
        regression: ``[("value", prediction)]``."""
        if self.task == "regression":
            return [("value", self.value(example))]
        probs = self.probabilities(example)
        if self.task == "token":
            best = probs.max(dim=-1)
            tokens = example.tokens or tuple(str(i) for i in range(len(example)))
            return [
                (token, self.labels.decode(int(i)), float(p))
                for token, i, p in zip(tokens, best.indices, best.values, strict=True)
            ]
        ranked = probs.argsort(descending=True)
        return [(self.labels.decode(int(i)), float(probs[i])) for i in ranked]

    @torch.no_grad()
    def attention_maps(self, example: Example) -> list[Tensor]:
        """Per layer ``(H, L, L)`` weights for one example (no windows: one map needs
        the whole input at once).

        Raises:
            ValueError: longer than the model reads.
        """
        example = self.fit(example, windows=False)
        return [maps[0] for maps in self.model.attention_maps(self.collator([example]))]
