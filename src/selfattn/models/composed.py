"""The composed task model: input embedding → sequence encoder → head, ``forward(batch) →
logits``; :mod:`selfattn.models.task_model` builds it, and the early-exit model
(:mod:`selfattn.models.early_exit`) extends it."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from selfattn.datatypes import Batch
from selfattn.models.architectures.graph import GraphSequenceEncoder
from selfattn.models.embedding import InputEmbedding
from selfattn.models.encoders import AttentionSequenceEncoder, SequenceEncoder
from selfattn.models.heads import ClsToken, SequenceClassifier, SequenceRegressor, TokenClassifier
from selfattn.models.label_hooks import LabelModelHooks
from selfattn.models.spec import TaskSpec
from selfattn.models.vision import ImageEmbedding

#: What a [CLS] vector is called in attention-map labels.
CLS_LABEL = "[CLS]"


class TaskModel(LabelModelHooks):
    """Embedding, encoder and head composed: ``forward(batch) → logits``.

    Args:
        embedding: batch → ``(B, L, E)``.
        encoder: ``(B, L, E)`` → ``(B, L, E')``.
        head: ``(B, L, E')`` → ``(B, L, C)`` or ``(B, C)``.
        spec: how it was built (kept for checkpoints), if known.
        cls_token: a learned [CLS] vector put before every sequence (``pooling = "cls"``),
            whose output the head reads; ``None`` for none.
    """

    def __init__(
        self,
        embedding: InputEmbedding | ImageEmbedding,
        encoder: SequenceEncoder,
        head: TokenClassifier | SequenceClassifier | SequenceRegressor,
        *,
        spec: TaskSpec | None = None,
        cls_token: ClsToken | None = None,
    ) -> None:
        super().__init__()
        self.embedding = embedding
        self.encoder = encoder
        self.head = head
        self.cls_token = cls_token
        self.spec = spec

    def encoder_inputs(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """What the encoder reads: vectors ``(B, L', E)`` and padding ``(B, L')``, True at
        padding; L' is L (image patches: their number), plus one when a [CLS] vector
        comes first."""
        mask = self.embedding.padding_mask(batch)  # image patches: not the batch's length
        x = self.embedding(batch)
        if self.cls_token is not None:
            x, mask = self.cls_token(x, mask)
        return x, mask

    def forward(self, batch: Batch) -> Tensor:
        """Returns logits, ``(B, L, num_labels)`` for a token task, ``(B, num_labels)`` for
        a sequence task (``(B,)`` values for regression)."""
        x, mask = self.encoder_inputs(batch)
        if isinstance(self.encoder, GraphSequenceEncoder):  # the one encoder that reads edges
            h = self.encoder(x, mask, batch.edge_index, batch.edge_attr)
        else:
            h = self.encoder(x, mask)
        return self.head(h, mask)

    @torch.no_grad()
    def attention_maps(self, batch: Batch) -> list[Tensor]:
        """Every attention block's weights, ``num_layers`` × ``(B, H, L', L')``, row i the
        query position, column j the key (no gradients: they are for showing): transformer
        and Conformer (any attention kernel that forms weights), graph (node × node, zero
        off the graph's edges). With a [CLS] vector, position 0 is [CLS]
        (:meth:`attention_labels`); image models show patches.

        Raises:
            ValueError: the architecture has no attention (fc, fc_window, bigru, cnn,
                cnn2d), or its attention kernel forms no weights (the kernel's refusal).
        """
        x, mask = self.encoder_inputs(batch)
        if isinstance(self.encoder, GraphSequenceEncoder):
            return self.encoder.attention_maps(x, mask, batch.edge_index, batch.edge_attr)
        if isinstance(self.encoder, AttentionSequenceEncoder):
            return self.encoder.attention_maps(x, mask)
        raise ValueError(f"architecture {self.encoder.name!r} has no attention to show")

    def layer_groups(self) -> list[list[nn.Parameter]]:
        """Parameters from the input up, for layer-wise learning-rate decay: everything
        below the first block (embeddings, [CLS]), each block, the head.

        Raises:
            ValueError: the encoder is not a stack of blocks (one line).
        """
        layers = getattr(getattr(self.encoder, "encoder", None), "layers", None)
        if not isinstance(layers, nn.ModuleList):
            raise ValueError(
                f"train.layer_lr_decay: architecture {self.encoder.name!r} is not a stack of "
                "attention blocks to decay over; leave it at 1"
            )
        inside = {id(p) for p in layers.parameters()} | {id(p) for p in self.head.parameters()}
        below = [p for p in self.parameters() if id(p) not in inside]
        return [
            below,
            *(list(block.parameters()) for block in layers),
            list(self.head.parameters()),
        ]

    def attention_labels(self, labels: Sequence[str]) -> list[str]:
        """The labels of the rows and columns of :meth:`attention_maps` for an input whose
        positions are called ``labels``: an image cut into patches has one vector per
        patch, named by its place in the grid (``r0c1``); ``[CLS]`` first when the model
        has one."""
        if isinstance(self.embedding, ImageEmbedding) and self.embedding.num_vectors != len(labels):
            rows, cols = self.embedding.grid
            labels = [f"r{row}c{col}" for row in range(rows) for col in range(cols)]
        return [CLS_LABEL, *labels] if self.cls_token is not None else list(labels)
