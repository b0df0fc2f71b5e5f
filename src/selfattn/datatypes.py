"""The data vocabulary shared by recipes, formats, collation, models and training: below
both the models and the data (:mod:`selfattn.data.types` is its documented path there).

Lecture 000 (§"What is the output?"): the input is always a *set of vectors*; the output
is one label per vector (``task="token"``), one label per set (``task="sequence"``), or a
sequence whose length the model decides (``task="seq2seq"``: translation, the convex
hull's vertices), or a set of labels whose size the model decides (``task="multilabel"``:
lecture 001's "the machine decides how many labels"). Text arrives as tokens that a
vocabulary turns into vectors; speech, images or anything else can arrive as the vectors
themselves (``features``).

A seq2seq label is a tuple of target tokens, just like a token task's labels, so the
task can never be told from the data alone: a seq2seq dataset always says so (a recipe's
``task``, or ``load_dataset(..., task="seq2seq")``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import Tensor

TaskType = Literal["token", "sequence", "seq2seq", "regression", "bits", "multilabel"]
InputKind = Literal["text", "vectors"]


def moved(tensor: Tensor, device: torch.device | str, non_blocking: bool = False) -> Tensor:
    """``tensor`` on ``device``. With ``non_blocking``, a CPU tensor bound for CUDA is staged
    in pinned memory and copied asynchronously: a copy from pageable memory makes the host
    wait until the GPU has run all the work queued before it, which keeps a training loop
    from queuing the next step while the GPU runs this one. (PyTorch's caching host
    allocator keeps the pinned copy alive until the transfer is done.)"""
    if non_blocking and tensor.device.type == "cpu" and torch.device(device).type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


class DataError(ValueError):
    """Bad user data: the message names the file and line (``path:line: problem``)."""


@dataclass(frozen=True)
class Example:
    """One vector set and its label(s).

    Exactly one of ``tokens`` (text) and ``features`` (``(L, F)`` float vectors) is set;
    ``len(example)`` is L, the input's length. ``label`` is, by task:

    * ``"token"``: a tuple of exactly L labels, one per input position;
    * ``"sequence"``: one string;
    * ``"seq2seq"``: a tuple of T ≥ 1 target tokens, T independent of L (a translation's
      words; for vector input such as the convex hull, the indices ``"0"`` … ``"L-1"`` of
      the input vectors the output points to);
    * ``"regression"``: one string holding a number (a molecule's logS, ``"-3.18"``);
    * ``"multilabel"``: a tuple of distinct labels, sorted (a set; ``()`` when none
      applies), of any size up to the label set's.

    ``source`` says where it came from (``path:line``) for error messages.

    A graph (lecture 000, §Graph) also has ``edges``: ``(E, 2)`` int node numbers
    ``(source j, target i)``, i attends to j (an undirected edge is both directions), and
    optionally ``edge_features`` ``(E, D_e)``, one row per edge.
    """

    tokens: tuple[str, ...] | None
    features: np.ndarray | None
    label: tuple[str, ...] | str
    source: str = ""
    edges: np.ndarray | None = None
    edge_features: np.ndarray | None = None

    def __len__(self) -> int:
        if self.tokens is not None:
            return len(self.tokens)
        assert self.features is not None
        return int(self.features.shape[0])


@dataclass
class DatasetSplits:
    """A recipe's (or a user's) data: fixed train / dev / test splits and what they are.

    ``dev_from_train`` says the dev split was held out of the user's training file (no
    dev file was given), so both came from one file and share its label set.
    """

    name: str
    task: TaskType
    input: InputKind
    train: list[Example]
    dev: list[Example]
    test: list[Example]
    description: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    dev_from_train: bool = False


@dataclass
class Subwords:
    """A text batch as a pretrained checkpoint's tokenizer splits it (``model.pretrained``).

    Attributes:
        input_ids: ``(B, T)`` long wordpiece ids, ``[CLS]`` first, ``[SEP]`` last, padded.
        attention_mask: ``(B, T)`` long, 1 at real wordpieces, 0 at padding.
        first: ``(B, L)`` long: the position in ``input_ids`` of each word's first
            wordpiece (0, the ``[CLS]``, at padded words), so a word's label is scored
            on its first subword.
    """

    input_ids: Tensor
    attention_mask: Tensor
    first: Tensor

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> Subwords:
        """The same tensors on ``device`` (``non_blocking``: see :func:`moved`)."""
        return Subwords(
            moved(self.input_ids, device, non_blocking),
            moved(self.attention_mask, device, non_blocking),
            moved(self.first, device, non_blocking),
        )


@dataclass
class Batch:
    """Padded tensors for one step.

    Attributes:
        token_ids: ``(B, L)`` long (text input) or ``None``.
        char_ids: ``(B, L, C)`` long character ids per token (text input) or ``None``.
        features: ``(B, L, F)`` float (vector input) or ``None``.
        key_padding_mask: ``(B, L)`` bool, True at padding.
        labels: ``(B, L)`` long with ``IGNORE_INDEX`` at padding (token task) or ``(B,)`` long.
        edge_index: graphs only: ``(2, E)`` long edges (source j, target i) between the
            flattened positions ``b·L + i`` of the batch, so ``x.reshape(B * L, ...)``
            indexes the nodes (:func:`selfattn.kernels.edge_attention`'s convention).
        edge_attr: ``(E, D_e)`` float features of those edges, or ``None``.
        subwords: the words as a pretrained checkpoint's wordpieces (then ``token_ids``
            is ``None``), or ``None``.
    """

    token_ids: Tensor | None
    char_ids: Tensor | None
    features: Tensor | None
    key_padding_mask: Tensor
    labels: Tensor
    edge_index: Tensor | None = None
    edge_attr: Tensor | None = None
    subwords: Subwords | None = None

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> Batch:
        """The same batch on ``device`` (``non_blocking``: see :func:`moved`)."""

        def move(t: Tensor | None) -> Tensor | None:
            return None if t is None else moved(t, device, non_blocking)

        return Batch(
            move(self.token_ids),
            move(self.char_ids),
            move(self.features),
            moved(self.key_padding_mask, device, non_blocking),
            moved(self.labels, device, non_blocking),
            edge_index=move(self.edge_index),
            edge_attr=move(self.edge_attr),
            subwords=None
            if self.subwords is None
            else self.subwords.to(device, non_blocking=non_blocking),
        )

    @property
    def num_tokens(self) -> int:
        """Real (non-padding) positions in the batch."""
        return int((~self.key_padding_mask).sum())
