"""Early exit on a fine-tuned BERT or DistilBERT (``model.pretrained`` with
``model.exit_heads``; DeeBERT's setting, lecture 003's dynamic computation).

BERT's post-LN blocks end in their own LayerNorm, so the exits read each block's output as
it is, and a token task's rows lose their wordpiece and word columns alike when they exit
(:func:`~selfattn.models.early_exit.exit_early`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from selfattn.datatypes import Batch
from selfattn.models.architectures.transformer import TransformerOptions
from selfattn.models.checkpointing import run_block
from selfattn.models.early_exit import (
    EarlyExitModel,
    ExitHead,
    ExitResult,
    exit_early,
    exit_heads,
    exit_loss_weights,
    keep_rows,
    weighted_exit_loss,
)
from selfattn.models.heads import SequenceClassifier, TokenClassifier
from selfattn.models.pretrained import PretrainedTaskModel, subwords_of


class PretrainedExitModel(PretrainedTaskModel):
    """A :class:`PretrainedTaskModel` with a classifier after every block of its encoder.

    ``forward(batch)`` is the fine-tuned model's (the last block's head), so training's dev
    metrics and ``predict`` read the full depth; ``forward(batch, exits=True)`` returns
    every block's logits for the joint loss, and :meth:`early_exit` runs the stack
    adaptively.

    Args:
        model: the fine-tuned model without exits (its encoder and head are taken over).
        exits: the N − 1 classifiers after blocks 1 … N − 1.
        loss_weights: w_1 … w_N (:func:`~selfattn.models.early_exit.exit_loss_weights`).
        weighting: the scheme that gave them, for ``repr``.
    """

    has_exit_heads = True

    def __init__(
        self,
        model: PretrainedTaskModel,
        *,
        exits: list[ExitHead],
        loss_weights: list[float],
        weighting: str,
    ) -> None:
        super().__init__(model.bert, model.head, task=model.task, spec=model.spec)
        blocks = self.num_layers
        if len(exits) != blocks - 1 or len(loss_weights) != blocks:
            raise ValueError(
                f"{blocks} blocks need {blocks - 1} exit heads and {blocks} loss weights, "
                f"got {len(exits)} and {len(loss_weights)}"
            )
        self.exits = nn.ModuleList(exits)
        self.loss_weights = loss_weights
        self.weighting = weighting

    @property
    def num_layers(self) -> int:
        """N, the blocks of the encoder (and exits)."""
        return len(self.bert.encoder.layers)

    def extra_repr(self) -> str:
        weights = ", ".join(f"{w:.3f}" for w in self.loss_weights)
        return f"exit_loss_weights={self.weighting} ({weights})"

    def task_loss(
        self, forward: Callable[..., Any], batch: Any, loss_of: Callable[[Tensor], Tensor]
    ) -> Tensor:
        """Every exit's loss, weighted, through ``forward``."""
        return weighted_exit_loss(forward(batch, exits=True), self.loss_weights, loss_of)

    def encoder_parameters(self) -> list[nn.Parameter]:
        """What ``train.freeze_encoder`` freezes: the encoder and the last block's head,
        the fine-tuned model ``train.init_from`` brings, so that the exits alone train
        (DeeBERT's second stage)."""
        return [*self.bert.parameters(), *self.head.parameters()]

    def _heads(self) -> list[nn.Module]:
        return [*self.exits, self.head]

    def forward(self, batch: Batch, exits: bool = False) -> Tensor | list[Tensor]:  # type: ignore[override]
        """The last block's logits, or with ``exits`` every block's, N tensors."""
        if not exits:
            return super().forward(batch)
        pieces = subwords_of(batch)
        hidden = self.bert(pieces.input_ids, pieces.attention_mask).hidden_states[1:]
        padding = pieces.attention_mask == 0
        return [
            self.read(head, h, padding, pieces.first, batch.key_padding_mask)
            for head, h in zip(self._heads(), hidden, strict=True)
        ]

    def exit_mask(self, batch: Batch) -> Tensor:
        """``(B, L)``, True at padded words: the positions of a token task's logits that
        the confidence skips."""
        return batch.key_padding_mask

    @torch.no_grad()
    def early_exit(self, batch: Batch, threshold: float, criterion: str = "max-prob") -> ExitResult:
        """Each example leaves after the first block whose classifier's confidence is at
        least ``threshold`` (:func:`~selfattn.models.early_exit.exit_early`); the answers
        are those of running each example alone. Call it in eval mode."""
        pieces = subwords_of(batch)
        padding = pieces.attention_mask == 0
        words = batch.key_padding_mask
        first = pieces.first if self.task == "token" else None
        stack = self.bert.encoder
        x = self.bert.embeddings(pieces.input_ids)
        if stack.absolute is not None:
            x = stack.absolute(x)
        x = stack.embed_dropout(x)
        heads = self._heads()

        def step(index: int, keep: Tensor | None) -> tuple[Tensor, Tensor]:
            nonlocal x, padding, words, first
            if keep is not None:
                padding, (x,) = keep_rows(keep, padding, x)
                if first is not None:
                    words, (first,) = keep_rows(keep, words, first)
                else:
                    words = words[keep]
            x, _ = run_block(stack, stack.layers[index], x, key_padding_mask=padding)
            logits = self.read(heads[index], x, padding, first, words)
            return logits, words

        return exit_early(self.num_layers, x.shape[0], step, threshold, criterion)

    def layer_groups(self) -> list[list[nn.Parameter]]:
        """As :meth:`PretrainedTaskModel.layer_groups`, with exit i's classifier in block
        i's group."""
        groups = super().layer_groups()
        inside = {id(p) for p in self.exits.parameters()}
        blocks = [
            [*block, *(self.exits[i].parameters() if i < len(self.exits) else ())]
            for i, block in enumerate(groups[1:-1])
        ]
        head = [p for p in groups[-1] if id(p) not in inside]
        return [groups[0], *blocks, head]


def build_pretrained_exit_model(
    config: TransformerOptions, model: PretrainedTaskModel, num_labels: int
) -> PretrainedExitModel:
    """``model`` with a classifier like its head (``num_labels`` classes) after each block
    but the last."""
    head = model.head
    assert isinstance(head, TokenClassifier | SequenceClassifier), "check_fields: classes"
    blocks = len(model.bert.encoder.layers)
    pooling = "first" if config.pooling == "cls" else config.pooling
    exits = exit_heads(
        head,
        model.bert.embed_dim,
        num_labels,
        blocks - 1,
        pooling=pooling,
        dropout=config.head_rate,
        norm=False,
    )
    return PretrainedExitModel(
        model,
        exits=exits,
        loss_weights=exit_loss_weights(config.exit_loss_weights, blocks),
        weighting=config.exit_loss_weights,
    )


#: A model with exit heads: trained from scratch or fine-tuned from a checkpoint.
ExitModel = EarlyExitModel | PretrainedExitModel
