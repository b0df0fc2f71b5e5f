"""A task model as plain tensors in, logits out: what an exported graph needs.

:class:`~selfattn.models.composed.TaskModel` reads a :class:`~selfattn.datatypes.Batch`; an
exported graph (ONNX, ``torch.export``) reads tensors. The wrappers here take the
batch's tensors as named arguments, build the batch inside ``forward`` and call the model,
so the exported graph is exactly the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from selfattn.datatypes import Batch
from selfattn.models.composed import TaskModel
from selfattn.models.pretrained import PretrainedTaskModel
from selfattn.models.spec import TaskSpec
from selfattn.models.task_model import input_length_limit


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of the exported graph.

    Attributes:
        name: the graph's name for it.
        dtype: ``"int64"``, ``"float32"`` or ``"bool"``.
        shape: a number per fixed axis, a name (``"batch"``, ``"length"``) per dynamic one.
    """

    name: str
    dtype: str
    shape: tuple[int | str, ...]

    def describe(self) -> str:
        """``token_ids (batch, length)``."""
        return f"{self.name} ({', '.join(str(axis) for axis in self.shape)})"


def _batch(
    padding_mask: Tensor,
    *,
    token_ids: Tensor | None = None,
    char_ids: Tensor | None = None,
    features: Tensor | None = None,
) -> Batch:
    # The labels are never read for logits; image embeddings take the batch size from them.
    labels = torch.zeros(padding_mask.shape[0], dtype=torch.long, device=padding_mask.device)
    return Batch(token_ids, char_ids, features, padding_mask, labels)


class _Wrapper(nn.Module):
    """Holds the task model; a subclass's ``forward`` names the tensors it reads."""

    def __init__(self, model: TaskModel) -> None:
        super().__init__()
        self.model = model


class TextModel(_Wrapper):
    """``(token_ids (B, L) int64, padding_mask (B, L) bool) → logits``."""

    def forward(self, token_ids: Tensor, padding_mask: Tensor) -> Tensor:
        return self.model(_batch(padding_mask, token_ids=token_ids))


class CharTextModel(_Wrapper):
    """``(token_ids (B, L), char_ids (B, L, C) int64, padding_mask (B, L) bool) → logits``."""

    def forward(self, token_ids: Tensor, char_ids: Tensor, padding_mask: Tensor) -> Tensor:
        return self.model(_batch(padding_mask, token_ids=token_ids, char_ids=char_ids))


class VectorModel(_Wrapper):
    """``(features (B, L, F) float32, padding_mask (B, L) bool) → logits``."""

    def forward(self, features: Tensor, padding_mask: Tensor) -> Tensor:
        return self.model(_batch(padding_mask, features=features))


class ImageModel(_Wrapper):
    """``features (B, H·W, C) float32 → logits``: every image has all its pixels, so there
    is no padding mask."""

    def forward(self, features: Tensor) -> Tensor:
        mask = torch.zeros(features.shape[:2], dtype=torch.bool, device=features.device)
        return self.model(_batch(mask, features=features))


class SubwordModel(nn.Module):
    """A model fine-tuned from BERT: ``(input_ids (B, T), attention_mask (B, T) int64)
    → logits`` (sequence) or, with ``first (B, L)`` (each word's first wordpiece), one row
    per word (token)."""

    def __init__(self, model: PretrainedTaskModel) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, first: Tensor | None = None
    ) -> Tensor:
        return self.model.forward_subwords(input_ids, attention_mask, first)


@dataclass(frozen=True)
class Exportable:
    """A wrapped model with what describes its graph.

    Attributes:
        module: the wrapper (tensors in, logits out), in eval mode.
        inputs: its inputs in argument order.
        output: its output.
        max_length: the longest L (a learned positional table's rows), ``None``: any;
            image models: their fixed L.
        fixed_length: L cannot vary (image models).
        spec: the model's :class:`TaskSpec` (the id ranges of random inputs).
    """

    module: nn.Module
    inputs: tuple[TensorSpec, ...]
    output: TensorSpec
    max_length: int | None
    fixed_length: bool
    spec: TaskSpec

    def example_inputs(
        self, batch_size: int, length: int, *, generator: torch.Generator
    ) -> tuple[Tensor, ...]:
        """Random inputs of this shape, the later rows padded (row b has ``length - b``
        real positions, at least 1) so padding is exercised."""
        lengths = [max(length - 2 * row, 1) for row in range(batch_size)]
        mask = torch.arange(length)[None, :] >= torch.tensor(lengths)[:, None]
        words = max(length // 2, 1)
        sizes = {"batch": batch_size, "length": length, "words": words}
        values: list[Tensor] = []
        for spec in self.inputs:
            shape = [sizes[axis] if isinstance(axis, str) else axis for axis in spec.shape]
            if spec.name == "padding_mask":
                values.append(mask)
            elif spec.name == "attention_mask":
                values.append((~mask).long())
            elif spec.name == "first":  # a word's first wordpiece: a real position
                real = torch.tensor(lengths)[:, None]
                values.append((torch.rand(shape, generator=generator) * real).long())
            elif spec.dtype == "int64":
                ids = torch.randint(2, self._id_bound(spec.name), shape, generator=generator)
                pad = mask if ids.dim() == 2 else mask[..., None]
                values.append(ids.masked_fill(pad, 0))
            else:
                values.append(torch.randn(shape, generator=generator))
        return tuple(values)

    def graph_inputs(self, batch: Batch) -> tuple[Tensor, ...]:
        """A collated ``batch``'s tensors in this graph's argument order (what the model
        reads from it, so the graph's output is the model's on that batch)."""
        values = {
            "padding_mask": batch.key_padding_mask,
            "token_ids": batch.token_ids,
            "char_ids": batch.char_ids,
            "features": batch.features,
        }
        if batch.subwords is not None:
            values |= {
                "input_ids": batch.subwords.input_ids,
                "attention_mask": batch.subwords.attention_mask,
                "first": batch.subwords.first,
            }
        found = tuple(values[spec.name] for spec in self.inputs)
        assert all(value is not None for value in found), "the batch has the graph's inputs"
        return found  # type: ignore[return-value]

    def _id_bound(self, name: str) -> int:
        bound = self.spec.char_vocab_size if name == "char_ids" else self.spec.vocab_size
        assert bound is not None
        return bound


def wrap(model: TaskModel | PretrainedTaskModel, *, word_length: int = 16) -> Exportable:
    """``model`` behind the wrapper its inputs need, in eval mode.

    Args:
        model: a token, sequence or regression :class:`TaskModel` (see
            :func:`selfattn.export.refusal` for what cannot be exported).
        word_length: characters per word of ``char_ids`` (the task's character
            vocabulary's ``max_word_len``), for a model with character features.
    """
    spec = model.spec
    assert spec is not None, "a model loaded from a run folder knows its spec"
    batch_length = ("batch", "length")
    mask = TensorSpec("padding_mask", "bool", batch_length)
    module: nn.Module
    if isinstance(model, PretrainedTaskModel):
        return _wrap_pretrained(model, spec)
    if spec.image_shape is not None:
        height, width, channels = spec.image_shape
        module = ImageModel(model)
        inputs: tuple[TensorSpec, ...] = (
            TensorSpec("features", "float32", ("batch", height * width, channels)),
        )
    elif spec.vocab_size is None:
        assert spec.feature_dim is not None
        module = VectorModel(model)
        inputs = (TensorSpec("features", "float32", (*batch_length, spec.feature_dim)), mask)
    elif spec.char_vocab_size is not None:
        module = CharTextModel(model)
        inputs = (
            TensorSpec("token_ids", "int64", batch_length),
            TensorSpec("char_ids", "int64", (*batch_length, word_length)),
            mask,
        )
    else:
        module = TextModel(model)
        inputs = (TensorSpec("token_ids", "int64", batch_length), mask)
    if spec.task == "token":
        output = TensorSpec("logits", "float32", (*batch_length, spec.num_labels))
    elif spec.task in ("sequence", "multilabel"):
        output = TensorSpec("logits", "float32", ("batch", spec.num_labels))
    else:
        output = TensorSpec("values", "float32", ("batch",))
    limit = input_length_limit(model)
    fixed = spec.image_shape is not None
    max_length = int(inputs[0].shape[1]) if fixed else (None if limit is None else limit[0])
    return Exportable(module.eval(), inputs, output, max_length, fixed, spec)


def _wrap_pretrained(model: PretrainedTaskModel, spec: TaskSpec) -> Exportable:
    """A model fine-tuned from BERT: wordpiece ids and Hugging Face's attention mask in;
    a token model also takes each word's first wordpiece and gives one row per word."""
    batch_length = ("batch", "length")
    inputs: tuple[TensorSpec, ...] = (
        TensorSpec("input_ids", "int64", batch_length),
        TensorSpec("attention_mask", "int64", batch_length),
    )
    if spec.task == "token":
        inputs += (TensorSpec("first", "int64", ("batch", "words")),)
        output = TensorSpec("logits", "float32", ("batch", "words", spec.num_labels))
    elif spec.task in ("sequence", "multilabel"):
        output = TensorSpec("logits", "float32", ("batch", spec.num_labels))
    else:
        output = TensorSpec("values", "float32", ("batch",))
    positions = model.bert.config.max_position_embeddings
    return Exportable(SubwordModel(model).eval(), inputs, output, positions, False, spec)
