"""Task types with one output per vector or per set (lecture 000 §Outputs): ``token``
(a label per vector, e.g. POS tags), ``sequence`` (a label per set, e.g. sentiment,
speaker, a molecule's solubility class) and ``regression`` (a number per set).

They share their data road (a label vocabulary, text vocabularies or vectors, lengths
fitted to ``data.max_len``) and their model (:class:`~selfattn.models.TaskModel`: an
input embedding, a sequence encoder, a head); they differ in the head's output, the loss
(cross-entropy, or squared error in units of the targets' spread) and what a prediction
prints. A token model reads an input longer than its learned positions in overlapping
windows; the others refuse it, or keep its first ``max_len`` positions when asked to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from torch import Tensor, nn

from selfattn.config import Config
from selfattn.data import (
    RECIPES,
    Batch,
    CharVocabulary,
    Collator,
    DatasetSplits,
    Example,
    LabelVocabulary,
    Vocabulary,
    bpe_retokenize,
    bpe_vocabulary,
    train_bpe,
)
from selfattn.data.batching.lengths import (
    cut_note,
    fit_examples,
    fit_splits,
    slice_example,
    window_spans,
)
from selfattn.data.batching.splits import dev_note, stratified_subset
from selfattn.data.formats.text import tokenize
from selfattn.data.readers.user_input import input_format
from selfattn.data.recipes.images import image_shape
from selfattn.datatypes import DataError
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.models.task_model import (
    TaskSpec,
    build_model_from_spec,
    check_label_model,
    input_length_limit,
)
from selfattn.specials import IGNORE_INDEX, NO_LABEL
from selfattn.tasks.memory_figure import memory_figure
from selfattn.tasks.metrics import compute_loss, evaluate
from selfattn.tasks.pretrained_text import PretrainedText, refuse_freeze
from selfattn.tasks.scored_data import DataFile, scored_examples
from selfattn.tasks.task import (
    EVAL_BATCH_SIZE,
    AttentionFigure,
    Task,
    of_task_type,
    positions,
    too_long,
)


class LabelTask(Task):
    """What ``token``, ``sequence`` and ``regression`` share (module docstring)."""

    def __init__(self, config: Config, spec: TaskSpec | None = None) -> None:
        super().__init__(config, spec)
        self.vocab: Vocabulary | None = None
        self.chars: CharVocabulary | None = None
        self.labels = LabelVocabulary([])
        self.bpe: Tokenizer | None = None
        self.collator: Collator | None = None
        #: The BERT checkpoint's tokenizer and config with ``model.pretrained``.
        self.pretrained: PretrainedText | None = None

    @classmethod
    def check_config(cls, config: Config, *, text: bool | None) -> None:
        refuse_seq2seq_settings(config, cls.name)
        check_label_model(config.model, task=cls.layout, text=text)

    # ------------------------------------------------------------------ data

    def prepare(self, splits: DatasetSplits) -> list[str]:
        """Hold out dev, subset train, learn BPE (sequence tasks with
        ``data.bpe_vocab_size``), fit lengths, build vocabularies and the spec."""
        data = self.config.data
        if not splits.train:
            raise ValueError(f"dataset {data.dataset!r} has no training examples")
        refuse_seq2seq_settings(self.config, splits.task)
        refuse_freeze(self.config)
        recipe = data.dataset in RECIPES
        note = dev_note(splits, dev_file=data.dev is not None or recipe, fraction=data.dev_fraction)
        notes = [note] if note else []
        self.input = splits.input
        self.labels = self._label_vocabulary(splits, recipe=recipe)
        splits.train = stratified_subset(
            splits.train, data.train_fraction, stratify=splits.task == "sequence"
        )
        text = splits.input == "text"
        if getattr(self.config.model, "pretrained", None) is not None:
            self.pretrained = PretrainedText.for_config(self.config, input_kind=splits.input)
        if text and data.bpe_vocab_size is not None:
            # Subwords for sequence tasks (token tasks keep words: labels belong to words).
            sentences = (" ".join(example.tokens or ()) for example in splits.train)
            stored = self.inherited.get("bpe")  # a resumed / fine-tuned run's own ids
            self.bpe = (
                Tokenizer.from_str(stored)
                if stored
                else train_bpe(sentences, data.bpe_vocab_size, lowercase=data.lowercase)
            )
            splits.train, splits.dev, splits.test = (
                bpe_retokenize(part, self.bpe, label_sets=self.layout == "multilabel")
                for part in (splits.train, splits.dev, splits.test)
            )
        cut = fit_splits(splits, data.max_len, data.overlong)
        if cut:
            notes.append(cut_note(cut, data.max_len))
        if text and self.pretrained is None:
            train_tokens = [example.tokens or () for example in splits.train]
            self.vocab = (
                bpe_vocabulary(self.bpe)
                if self.bpe is not None
                else Vocabulary.build(
                    train_tokens, min_freq=data.min_freq, lowercase=data.lowercase
                )
            )
            if getattr(self.config.model, "char_features", False):
                self.chars = CharVocabulary.build(train_tokens)
        features = splits.train[0].features
        edge_features = splits.train[0].edge_features
        statistics = _target_statistics(splits)
        self.spec = TaskSpec(
            task=splits.task,
            task_type=self.name,
            num_labels=max(len(self.labels), 1),  # regression: one output
            vocab_size=len(self.vocab) if self.vocab is not None else None,
            char_vocab_size=len(self.chars) if self.chars is not None else None,
            feature_dim=None if features is None else int(features.shape[1]),
            max_len=data.max_len,
            edge_dim=None if edge_features is None else int(edge_features.shape[1]),
            image_shape=image_shape(splits),
            target_mean=statistics.get("target_mean", 0.0),
            target_std=statistics.get("target_std", 1.0),
        )
        self.reader = input_format(splits)
        self.collator = Collator(
            self.vocab, self.chars, self.labels, splits.task, max_len=self.spec.max_len
        )
        if self.pretrained is not None:
            tokenizer = self.pretrained.tokenizer
            self.spec = dataclasses.replace(
                self.spec, vocab_size=tokenizer.vocab_size, pretrained=self.pretrained.bert
            )
            self.collator = self.pretrained.collator(self.labels, self.layout, self.spec.max_len)
        return notes

    def _label_vocabulary(self, splits: DatasetSplits, *, recipe: bool) -> LabelVocabulary:
        """The task's labels: a recipe's whole label set, or a user's training file's.

        A recipe's label set is part of its definition (pos-wsj's SYM and LS occur only in
        dev/test). A user's labels come from their training file (a dev set held out of
        it included); a label of a dev or test file that the training file lacks could
        never be predicted, so it is a one-line error naming its file and line.
        """
        if splits.task == "regression":
            return LabelVocabulary([])  # a regression has numbers, not classes
        if recipe:
            return LabelVocabulary.for_splits(splits)
        from_train = splits.train + splits.dev if splits.dev_from_train else splits.train
        labels = LabelVocabulary.build(from_train)
        scored = [*([] if splits.dev_from_train else splits.dev), *splits.test]
        unseen = unseen_label(scored, labels)
        if unseen is not None:
            example, label = unseen
            raise DataError(
                f"{example.source}: label {label!r} never occurs in the training "
                f"file {splits.extra.get('train', splits.name)}"
            )
        return labels

    def state(self) -> dict[str, Any]:
        return {
            "task": self.name,
            "input": self.input,
            "vocab": None if self.vocab is None else self.vocab.to_dict(),
            "chars": None if self.chars is None else self.chars.to_dict(),
            "labels": self.labels.to_dict(),
            "bpe": None if self.bpe is None else self.bpe.to_str(),
            "reader": self.reader,
            "pretrained": None if self.pretrained is None else self.pretrained.state(),
        }

    def restore(self, stored: dict[str, Any]) -> None:
        if "labels" not in stored:
            raise ValueError("the checkpoint stores no vocabularies")
        self.input = stored["input"]
        self.vocab = Vocabulary.from_dict(stored["vocab"]) if stored.get("vocab") else None
        self.chars = CharVocabulary.from_dict(stored["chars"]) if stored.get("chars") else None
        self.labels = LabelVocabulary.from_dict(stored["labels"])
        self.bpe = Tokenizer.from_str(stored["bpe"]) if stored.get("bpe") else None
        self.reader = dict(stored.get("reader") or {})
        # No length limit here: fit() holds inputs to what the model reads.
        self.collator = Collator(self.vocab, self.chars, self.labels, self.layout)
        if stored.get("pretrained"):
            self.pretrained = PretrainedText.restore(stored["pretrained"])
            self.collator = self.pretrained.collator(self.labels, self.layout)

    def collate(self, examples: Sequence[Example]) -> Batch:
        assert self.collator is not None, "prepare() or restore() the task first"
        return self.collator(examples)

    # ------------------------------------------------------------------ training

    def build(self) -> nn.Module:
        """The model of ``spec``; a prepared task with ``model.pretrained`` loads the
        checkpoint's weights into it (a restored one leaves that to the run's
        checkpoint)."""
        assert self.spec is not None
        model = of_task_type(build_model_from_spec(self.config.model, self.spec), self.name)
        if self.pretrained is not None:
            self.pretrained.start(model, self.config)
        if self.vocab is not None:
            model.bind(self.vocab, list(self.labels.labels))
        return model

    def loss(self, model: Any, batch: Any, step: int) -> Tensor:
        """:meth:`loss_of` ``model(batch)``, as the model's ``task_loss`` weighs it in."""
        inner = getattr(model, "module", model)  # under DistributedDataParallel
        inner.start_step(step)
        return inner.task_loss(model, batch, self.loss_of(batch))

    def loss_of(self, batch: Any) -> Callable[[Tensor], Tensor]:
        """The loss of one set of logits: label-smoothed cross-entropy."""
        smoothing = self.config.train.label_smoothing
        return lambda logits: compute_loss(logits, batch.labels, smoothing)

    def evaluate(
        self, model: Any, batches: Iterable[Any], *, device: torch.device | str | None = None
    ) -> dict[str, float]:
        return evaluate(model, batches, device=device)

    # ------------------------------------------------------------------ inference

    def example(self, text: str, source: str = "<input>") -> Example:
        tokens = tuple(tokenize(text))
        if self.bpe is not None and tokens:
            tokens = tuple(self.bpe.encode(list(tokens), is_pretokenized=True).tokens)
        if not tokens:
            raise ValueError(f"{source}: empty input")
        return self.unlabelled(Example(tokens=tokens, features=None, label="", source=source))

    def unlabelled(self, example: Example) -> Example:
        """``example`` with a stand-in label the collator accepts (predictions ignore
        it)."""
        dummy: tuple[str, ...] | str = (
            tuple(self.labels.labels[0] for _ in range(len(example)))
            if self.layout == "token"
            else "0"
            if self.layout == "regression"
            else self.labels.labels[0]
        )
        return dataclasses.replace(example, label=dummy)

    def fit(
        self, model: nn.Module, example: Example, *, truncate: bool = False, windows: bool = True
    ) -> Example:
        """``example`` as ``model`` can read it (see :class:`Task`); a token model reads a
        long input in windows (``windows``)."""
        limit = input_length_limit(model)
        if limit is None or len(example) <= limit[0]:
            return example
        if windows and self.layout == "token":
            return example
        if not truncate:
            raise too_long(example, limit)
        return slice_example(example, 0, limit[0], self.layout)

    @torch.no_grad()
    def logits(self, model: nn.Module, example: Example) -> Tensor:
        """``(L, num_labels)`` for a token task (in windows past the model's limit),
        ``(num_labels,)`` for a sequence task, ``()`` for a regression.

        Raises:
            ValueError: a sequence or regression input longer than the model reads.
        """
        example = self.fit(model, example)
        limit = input_length_limit(model)
        if self.layout != "token" or limit is None or len(example) <= limit[0]:
            return model(self.model_batch(model, [example]))[0]
        size = limit[0]
        spans = window_spans(len(example), size)
        windows = [slice_example(example, start, start + size, "token") for start, _, _ in spans]
        rows = [
            model(self.model_batch(model, windows[i : i + EVAL_BATCH_SIZE]))
            for i in range(0, len(windows), EVAL_BATCH_SIZE)
        ]
        logits = torch.cat(rows)  # (W, size, C)
        out = logits.new_empty(len(example), logits.shape[-1])
        for window, (start, keep_from, keep_to) in enumerate(spans):
            out[keep_from:keep_to] = logits[window, keep_from - start : keep_to - start]
        return out

    def split_examples(self, split: str | DataFile) -> list[Example]:
        """A split of the dataset, read as training read it (the same held-out dev set;
        with ``data.overlong = "cut"`` the same cut; subwords when the task has BPE), or
        a user's file read the same way (:mod:`~selfattn.tasks.scored_data`).

        Raises:
            ValueError: an unknown or empty split; a file that cannot be scored, or with
                a label the model does not know (one line: file:line).
        """
        data = self.config.data
        examples, _ = scored_examples(self, split)
        if isinstance(split, DataFile) and self.layout != "regression":  # numbers: no classes
            unseen = unseen_label(examples, self.labels)
            if unseen is not None:
                example, label = unseen
                raise DataError(
                    f"{example.source}: label {label!r} is not one of this model's "
                    f"{len(self.labels)} labels ({_listed(self.labels.labels)})"
                )
        if self.bpe is not None:
            examples = bpe_retokenize(examples, self.bpe, label_sets=self.layout == "multilabel")
        if data.overlong == "cut":
            examples, _ = fit_examples(examples, data.max_len, "cut", self.layout)
        return list(examples)

    def score(
        self, model: nn.Module, split: str | DataFile, *, truncate: bool = False, **options: Any
    ) -> dict[str, float]:
        """Metrics of ``model`` on a split of its dataset or a file
        (:meth:`split_examples`). Longer inputs than the model reads are handled as in
        :meth:`fit`; ``truncated`` then counts the examples cut."""
        self.check_options(options)
        examples = self.split_examples(split)
        fitted = [self.fit(model, example, truncate=truncate) for example in examples]
        truncated = sum(len(a) != len(b) for a, b in zip(examples, fitted, strict=True))
        limit = input_length_limit(model)
        size = None if limit is None else limit[0]
        whole = [e for e in fitted if size is None or len(e) <= size]
        windowed = [e for e in fitted if size is not None and len(e) > size]
        metrics = self.evaluate(model, self.batches_of(whole))
        if windowed:
            metrics = self._with_windowed(model, metrics, windowed)
        if truncated:
            metrics["truncated"] = float(truncated)
        return metrics

    def _with_windowed(
        self, model: nn.Module, metrics: dict[str, float], examples: list[Example]
    ) -> dict[str, float]:
        """Token-task ``metrics`` with ``examples`` added, each read in windows."""
        count = metrics["count"]
        loss_sum, correct = metrics["loss"] * count, metrics["accuracy"] * count
        for example in examples:
            logits = self.logits(model, example).float()  # (L, C)
            labels = torch.tensor(
                [
                    IGNORE_INDEX if tag == NO_LABEL else self.labels.encode(tag, example.source)
                    for tag in example.label
                ]
            )
            real = labels != IGNORE_INDEX
            loss_sum += float(F.cross_entropy(logits[real], labels[real], reduction="sum"))
            correct += int((logits.argmax(-1)[real] == labels[real]).sum())
            count += int(real.sum())
        return {
            "loss": loss_sum / max(count, 1),
            "accuracy": correct / max(count, 1),
            "count": count,
        }

    @torch.no_grad()
    def attention(
        self, model: nn.Module, example: Example, **options: Any
    ) -> list[AttentionFigure]:
        """Every block's self-attention over ``example`` (read whole: one map needs the
        whole input at once).

        Raises:
            ValueError: longer than the model reads; a model without attention weights.
        """
        self.check_options(options)
        labelled: Any = model  # a label model: its attention_view says what its maps show
        if labelled.attention_view == "hops":
            return [memory_figure(labelled, self.model_batch(model, [example]), example)]
        example = self.fit(model, example, windows=False)
        maps = [layer[0] for layer in labelled.attention_maps(self.model_batch(model, [example]))]
        if labelled.attention_view == "wordpieces":
            assert self.pretrained is not None
            axis = self.pretrained.wordpieces(example)
        else:
            axis = labelled.attention_labels(positions(example))
        return [AttentionFigure("self-attention", maps, axis, axis)]


def unseen_label(
    examples: Iterable[Example], labels: LabelVocabulary
) -> tuple[Example, str] | None:
    """The first example with a label ``labels`` lacks, and that label (``None``: none)."""
    for example in examples:
        names = (example.label,) if isinstance(example.label, str) else example.label
        for label in names:
            if label != NO_LABEL and label not in labels:
                return example, label
    return None


def _listed(names: Sequence[str], shown: int = 8) -> str:
    """``names`` comma-separated, the first ``shown`` of them and a count of the rest."""
    rest = len(names) - shown
    return ", ".join(names[:shown]) + (f", … {rest} more" if rest > 0 else "")


def refuse_seq2seq_settings(config: Config, task: str) -> None:
    """A ``[seq2seq]`` setting on a task that decodes nothing would be ignored: one line.

    Raises:
        ValueError: a field of ``config.seq2seq`` differs from its default.
    """
    defaults = Seq2SeqConfig()
    changed = [
        f"seq2seq.{field.name}"
        for field in dataclasses.fields(Seq2SeqConfig)
        if getattr(config.seq2seq, field.name) != getattr(defaults, field.name)
    ]
    if changed:
        raise ValueError(
            f"{', '.join(changed)}: the [seq2seq] section is for seq2seq tasks; this "
            f'dataset is a {task} task (set data.task = "seq2seq" for source<TAB>target '
            "lines, or drop the section)"
        )


def _target_statistics(splits: DatasetSplits) -> dict[str, float]:
    """A regression's training-target mean and standard deviation (for its head)."""
    if splits.task != "regression":
        return {}
    targets = torch.tensor([float(str(example.label)) for example in splits.train])
    std = float(targets.std()) if len(targets) > 1 else 1.0
    return {"target_mean": float(targets.mean()), "target_std": std if std > 0 else 1.0}
