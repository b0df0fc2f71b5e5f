"""The ``bits`` task type: a vector in and a vector of bits out at every step, learned
with a binary cross-entropy per due bit — the neural Turing machine's copy and repeat-copy
tasks (:mod:`selfattn.data.recipes.bits`, Graves et al. 2014 §4.1–4.2).

Its models are ``ntm`` and ``lstm`` (:mod:`selfattn.models.bits`). The score is the
paper's: wrong bits per sequence, an output read as 1 above probability 0.5, counted
where an output is due; ``eval`` also gives it per group of the test split's lengths
(copy) or lengths and repeats (repeat copy), which training never saw. A user types the
sequence to copy as bit strings (``selfattn predict RUN "10110010 01100001"``; a repeat
model takes the count after ``*``: ``"10110010 01100001 *3"``) and gets back what the
model writes.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from selfattn.data import DatasetSplits, Example
from selfattn.data.batching.splits import stratified_subset
from selfattn.data.copy_task import copy_inputs
from selfattn.datatypes import DataError
from selfattn.models.bits import BitsBatch, build_bits_model, check_bits_model
from selfattn.models.spec import TaskSpec
from selfattn.specials import IGNORE_INDEX
from selfattn.tasks.scored_data import DataFile, scored_examples
from selfattn.tasks.task import AttentionFigure, Task, register_task

__all__ = ["BitsTask"]


@register_task
class BitsTask(Task):
    """The ``bits`` task type (module docstring)."""

    name = "bits"
    layout = "bits"
    accepts = frozenset({"bit_steps"})

    @classmethod
    def check_config(cls, config: Any, *, text: bool | None) -> None:
        check_bits_model(config.model)

    def __init__(self, config: Any, spec: TaskSpec | None = None) -> None:
        super().__init__(config, spec)
        #: A user types bit strings (:meth:`example`).
        self.input = "text"
        self.reader = {"kind": "text"}
        #: The channel holding the repeat count, or ``None`` for plain copy.
        self.count_channel: int | None = None
        self.max_repeats = 10

    # ------------------------------------------------------------------ data

    def prepare(self, splits: DatasetSplits) -> list[str]:
        if not splits.train:
            raise ValueError(f"dataset {self.config.data.dataset!r} has no training examples")
        first = splits.train[0]
        if first.features is None:
            raise DataError(f"{first.source}: the bits task reads vectors, not words")
        width, outputs = int(first.features.shape[1]), len(_due_row(first))
        limit = self.config.data.max_len
        for part in (splits.train, splits.dev, splits.test):
            for example in part:
                assert example.features is not None
                if example.features.shape[1] != width:
                    raise DataError(
                        f"{example.source}: {example.features.shape[1]} features per step, "
                        f"the first training example has {width}"
                    )
                if len(example) > limit:
                    raise DataError(
                        f"{example.source}: {len(example)} steps, longer than data.max_len "
                        f"= {limit}; raise it"
                    )
        data = self.config.data
        if data.bpe_vocab_size is not None:
            raise ValueError("data.bpe_vocab_size: the bits task reads vectors, not words")
        splits.train = stratified_subset(splits.train, data.train_fraction, stratify=False)
        counts = np.concatenate(
            [e.features[:, -1] for e in splits.train[:200] if e.features is not None]
        )
        self.count_channel = width - 1 if bool((counts != 0).any()) else None
        self.spec = TaskSpec(
            task=self.layout,
            task_type=self.name,
            num_labels=outputs,
            feature_dim=width,
            max_len=limit,
        )
        return []

    def state(self) -> dict[str, Any]:
        return {
            "task": self.name,
            "input": self.input,
            "reader": self.reader,
            "count_channel": self.count_channel,
            "max_repeats": self.max_repeats,
        }

    def restore(self, stored: dict[str, Any]) -> None:
        self.count_channel = stored.get("count_channel")
        self.max_repeats = int(stored.get("max_repeats", 10))

    def collate(self, examples: Sequence[Example]) -> BitsBatch:
        assert self.spec is not None and self.spec.feature_dim is not None
        length = max(len(example) for example in examples)
        inputs = torch.zeros(len(examples), length, self.spec.feature_dim)
        labels = torch.full((len(examples), length, self.spec.num_labels), IGNORE_INDEX)
        padding = torch.ones(len(examples), length, dtype=torch.bool)
        for row, example in enumerate(examples):
            assert example.features is not None
            steps = len(example)
            inputs[row, :steps] = torch.from_numpy(np.asarray(example.features, np.float32))
            padding[row, :steps] = False
            for t, bits in enumerate(example.label):
                if bits:
                    labels[row, t] = torch.tensor([int(b) for b in bits])
        return BitsBatch(inputs, labels, padding)

    # ------------------------------------------------------------------ training

    def build(self) -> nn.Module:
        assert self.spec is not None and self.spec.feature_dim is not None
        model = build_bits_model(
            self.config.model, inputs=self.spec.feature_dim, outputs=self.spec.num_labels
        )
        model.spec = self.spec
        return model

    def loss(self, model: Any, batch: Any, step: int) -> Tensor:
        """Binary cross-entropy of every due bit."""
        return _loss(model(batch), batch)

    @torch.no_grad()
    def evaluate(
        self, model: Any, batches: Iterable[Any], *, device: torch.device | str | None = None
    ) -> dict[str, float]:
        """Loss per due bit, wrong bits per sequence, and the share of sequences with
        none wrong."""
        model.eval()
        loss_sum = wrong_sum = perfect = bits = sequences = 0.0
        for batch in batches:
            if device is not None:
                batch = batch.to(device)
            logits = model(batch)
            due = batch.labels >= 0
            loss_sum += float(_loss(logits, batch)) * int(due.sum())
            wrong = _wrong(logits, batch)
            wrong_sum += float(wrong.sum())
            perfect += int((wrong == 0).sum())
            bits += int(due.sum())
            sequences += len(wrong)
        return {
            "loss": loss_sum / max(bits, 1),
            "bits_wrong": wrong_sum / max(sequences, 1),
            "perfect": perfect / max(sequences, 1),
            "count": sequences,
        }

    # ------------------------------------------------------------------ inference

    def example(self, text: str, source: str = "<input>") -> Example:
        """The input to copy, typed as bit strings (``"1011 0110"``), a repeat model's
        count after ``*`` (``"1011 0110 *3"``).

        Raises:
            ValueError: not bit strings of the model's width; a count on a copy model or
                none on a repeat model (one line each).
        """
        assert self.spec is not None and self.spec.feature_dim is not None
        width = self.spec.feature_dim - 2
        words = text.split()
        repeats = 0
        if words and words[-1].startswith("*"):
            count = words.pop()[1:]
            if self.count_channel is None:
                raise ValueError(f"{source}: a copy model takes no repeat count ({'*' + count})")
            if not count.isdigit() or int(count) < 1:
                raise ValueError(f"{source}: the repeat count after '*' must be a number ≥ 1")
            repeats = int(count)
        elif self.count_channel is not None:
            raise ValueError(f"{source}: a repeat-copy model needs the count last, as '*3'")
        if not words:
            raise ValueError(f"{source}: empty input; type the vectors to copy as bit strings")
        for word in words:
            if len(word) != width or set(word) - {"0", "1"}:
                raise ValueError(
                    f"{source}: {word!r} is not {width} bits; type each vector as {width} 0s "
                    "and 1s, separated by spaces"
                )
        sequence = torch.tensor([[[float(b) for b in word] for word in words]])
        batch = copy_inputs(sequence, repeats=repeats, max_repeats=self.max_repeats)
        label = tuple(
            "".join(str(int(b)) for b in row) if due else ""
            for row, due in zip(batch.targets[0].tolist(), batch.mask[0].tolist(), strict=True)
        )
        return Example(None, batch.inputs[0].numpy(), label, source)

    def unlabelled(self, example: Example) -> Example:
        return dataclasses.replace(example, label=tuple("" for _ in range(len(example))))

    def fit(self, model: nn.Module, example: Example, *, truncate: bool = False) -> Example:
        return example  # both models read any number of steps

    @torch.no_grad()
    def predict(self, model: nn.Module, example: Example, **options: Any) -> str:
        """What the model writes where an output is due: one bit string per step (an
        end marker, when due, as ``end`` or ``no-end``)."""
        self.check_options(options)
        model.eval()
        batch = self.collate([example])
        written = (model(batch)[0] > 0).int()
        width = written.shape[-1] - 1
        out = []
        for t in range(len(example)):
            if not example.label[t]:
                continue
            if set(example.label[t][:width]) == {"0"} and example.label[t][width] == "1":
                out.append("end" if written[t, width] else "no-end")
            else:
                out.append("".join(str(int(b)) for b in written[t, :width]))
        return " ".join(out)

    def score(
        self, model: nn.Module, split: str | DataFile, *, truncate: bool = False, **options: Any
    ) -> dict[str, float]:
        """The :meth:`evaluate` metrics on a split, and wrong bits per sequence for every
        group of its lengths (and repeats): ``bits_wrong_length_20``,
        ``bits_wrong_length_10_repeats_15``."""
        self.check_options(options)
        examples, _ = scored_examples(self, split)
        metrics = self.evaluate(model, self.batches_of(examples))
        groups: dict[str, list[Example]] = defaultdict(list)
        for example in examples:
            groups[self._group(example)].append(example)
        if len(groups) > 1:
            for name, members in sorted(groups.items(), key=lambda item: _order(item[0])):
                metrics[f"bits_wrong_{name}"] = self.evaluate(model, self.batches_of(members))[
                    "bits_wrong"
                ]
        return metrics

    def _group(self, example: Example) -> str:
        """``length_L`` or ``length_L_repeats_R`` of an example."""
        assert example.features is not None and self.spec is not None
        width = self.spec.num_labels - 1
        length = int(np.argmax(example.features[:, width] == 1))  # the delimiter's step
        if self.count_channel is None:
            return f"length_{length}"
        repeats = round(float(example.features[length + 1, -1]) * self.max_repeats)
        return f"length_{length}_repeats_{repeats}"

    @torch.no_grad()
    def attention(
        self, model: nn.Module, example: Example, **options: Any
    ) -> list[AttentionFigure]:
        """Where a neural Turing machine's write and read heads look at every step: per
        head a ``(1, T, N)`` map over the memory's slots.

        Raises:
            ValueError: an LSTM, which has no attention.
        """
        self.check_options(options)
        machine: Any = model  # a bits model: its attention_view says whether it has heads
        if machine.attention_view != "heads":
            raise ValueError(
                f'architecture "{self.config.model.architecture}" has no attention to show; '
                '"ntm" does'
            )
        machine.eval()
        writes, reads = machine.heads(self.model_batch(model, [example]).inputs)
        steps = [_step_label(example, t) for t in range(len(example))]
        slots = [str(slot) for slot in range(writes.shape[-1])]
        return [
            AttentionFigure("write head", [writes[:1]], steps, slots, "NTM"),
            AttentionFigure("read head", [reads[:1]], steps, slots, "NTM"),
        ]


def _loss(logits: Tensor, batch: BitsBatch) -> Tensor:
    due = batch.labels >= 0
    return F.binary_cross_entropy_with_logits(logits[due], batch.labels[due].float())


def _wrong(logits: Tensor, batch: BitsBatch) -> Tensor:
    """``(B,)`` wrong bits per sequence where outputs are due."""
    due = batch.labels >= 0
    wrong = ((logits > 0).long() != batch.labels) & due
    return wrong.sum((1, 2))


def _due_row(example: Example) -> str:
    for bits in example.label:
        if bits:
            return str(bits)
    raise DataError(f"{example.source}: no step has bits due")


def _order(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split("_") if part.isdigit())


def _step_label(example: Example, t: int) -> str:
    """``in 3``, ``delimiter``, ``count``, ``out 0`` … for step ``t``."""
    return f"out {t}" if example.label[t] else f"in {t}"
