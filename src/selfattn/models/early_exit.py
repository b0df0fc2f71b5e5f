"""Early exit (lecture 003, dynamic computation: "classifiers at the intermediate layer").

With ``model.exit_heads = true`` a classifier reads the output of every block of a
``transformer`` or ``conformer`` encoder, the last one being the model's own head. They are
trained jointly, on Σ_i w_i · loss_i (:func:`exit_loss_weights`); at inference an example
leaves the stack at the first block whose classifier is confident enough
(:func:`confidence` ≥ a threshold), so easy examples cost a few blocks and hard ones all
of them (Teerapittayanon et al. 2016, BranchyNet; Xin et al. 2020, DeeBERT).

:meth:`EarlyExitModel.early_exit` runs a batch this way without padding waste: the rows that
exit after a block are taken out of the batch (and trailing padding columns no remaining
row needs are cut) before the next block runs, so later blocks work only on what is left.

:class:`~selfattn.models.pretrained_exit.PretrainedExitModel` does the same for a model
fine-tuned from a pretrained BERT or DistilBERT.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from selfattn.datatypes import Batch
from selfattn.models.checkpointing import run_block
from selfattn.models.composed import TaskModel
from selfattn.models.embedding import InputEmbedding
from selfattn.models.encoder import BlockStack
from selfattn.models.encoders import AttentionSequenceEncoder
from selfattn.models.heads import ClsToken, SequenceClassifier, TokenClassifier
from selfattn.models.option_groups import EncoderOptions, ExitOptions
from selfattn.models.spec import TaskSpec
from selfattn.models.vision import ImageEmbedding

#: How an exit classifier's confidence is measured (``--exit-criterion``).
ExitCriterion = Literal["max-prob", "entropy"]
EXIT_CRITERIA: tuple[str, ...] = ("max-prob", "entropy")

Head = TokenClassifier | SequenceClassifier


def exit_loss_weights(scheme: str, num_layers: int) -> list[float]:
    """The weights w_1 … w_N of the per-block losses, summing to 1.

    Args:
        scheme: ``"uniform"`` (1/N each) or ``"linear"`` (w_i = i / (1 + … + N): deeper
            blocks, which must also serve the hard examples, count more; Zhou et al. 2020).
        num_layers: N.
    """
    if scheme == "uniform":
        raw = [1.0] * num_layers
    elif scheme == "linear":
        raw = [float(i) for i in range(1, num_layers + 1)]
    else:
        raise ValueError(f"unknown exit loss weighting {scheme!r}; choose uniform or linear")
    total = sum(raw)
    return [w / total for w in raw]


def confidence(logits: Tensor, key_padding_mask: Tensor, criterion: str = "max-prob") -> Tensor:
    """How sure a classifier is of each example, in [0, 1].

    ``max-prob``: the largest class probability; ``entropy``: 1 − H(p) / log C (1 for a
    one-hot p, 0 for the uniform one). A token task's example is as sure as its least sure
    real position.

    Args:
        logits: ``(B, C)`` (sequence task) or ``(B, L, C)`` (token task).
        key_padding_mask: ``(B, L)``, True at padding (read for a token task).
        criterion: ``"max-prob"`` or ``"entropy"``.

    Returns:
        ``(B,)``.
    """
    probs = torch.softmax(logits.float(), dim=-1)
    if criterion == "max-prob":
        sure = probs.max(dim=-1).values
    elif criterion == "entropy":
        classes = probs.shape[-1]
        entropy = -(probs * probs.clamp(min=1e-12).log()).sum(dim=-1)
        sure = 1.0 - entropy / math.log(classes) if classes > 1 else torch.ones_like(entropy)
    else:
        raise ValueError(f"unknown exit criterion {criterion!r}; choose max-prob or entropy")
    if sure.dim() == 2:  # a token task: its least sure real position
        sure = sure.masked_fill(key_padding_mask[:, : sure.shape[1]], 1.0).min(dim=1).values
    return sure


def weighted_exit_loss(
    per_layer: Sequence[Tensor], weights: Sequence[float], loss: Callable[[Tensor], Tensor]
) -> Tensor:
    """Σ_i w_i · ``loss(per_layer[i])``: the joint training loss of every exit."""
    if len(per_layer) != len(weights) or not per_layer:
        raise ValueError(f"{len(per_layer)} exits but {len(weights)} loss weights")
    total = weights[0] * loss(per_layer[0])
    for w, logits in zip(weights[1:], per_layer[1:], strict=True):
        total = total + w * loss(logits)
    return total


@dataclass
class ExitResult:
    """What :meth:`EarlyExitModel.early_exit` returns.

    Attributes:
        logits: ``(B, C)`` or ``(B, L, C)``: each example's logits at the block it left
            after (a token task's positions past its shortened batch are 0).
        layers: ``(B,)`` the number of blocks each example ran, 1 to N.
    """

    logits: Tensor
    layers: Tensor


def check_exit_arguments(threshold: float, criterion: str) -> None:
    """Refuse a threshold below 0 (or NaN) and an unknown criterion.

    Raises:
        ValueError: naming the value.
    """
    if not threshold >= 0:  # NaN too
        raise ValueError(f"exit threshold must be >= 0, got {threshold}")
    if criterion not in EXIT_CRITERIA:
        raise ValueError(f"unknown exit criterion {criterion!r}; choose max-prob or entropy")


def keep_rows(keep: Tensor, mask: Tensor, *tensors: Tensor) -> tuple[Tensor, tuple[Tensor, ...]]:
    """The rows of ``mask`` (``(B, L)``, True at trailing padding) and of each ``(B, L, …)``
    tensor where ``keep`` is True, cut to the longest remaining row."""
    mask = mask[keep]
    length = int((~mask).sum(dim=1).max().clamp(min=1))  # padding trails
    return mask[:, :length], tuple(t[keep][:, :length] for t in tensors)


def exit_early(
    num_layers: int,
    batch_size: int,
    step: Callable[[int, Tensor | None], tuple[Tensor, Tensor]],
    threshold: float,
    criterion: str,
) -> ExitResult:
    """The adaptive-depth loop of early exit: each example leaves after the first block
    whose classifier's :func:`confidence` is at least ``threshold`` (the last block's,
    whatever it is).

    Args:
        num_layers: N, the blocks.
        batch_size: B.
        step: ``step(index, keep)`` drops the rows where ``keep`` is False (``None``: the
            first block, nothing to drop), runs block ``index`` (0-based) on the rest and
            returns its classifier's logits ``(B', C)`` or ``(B', L', C)`` and the padding
            mask ``(B', L')`` (True at padding) that :func:`confidence` reads.
        threshold: T ≥ 0.
        criterion: ``"max-prob"`` or ``"entropy"``.
    """
    check_exit_arguments(threshold, criterion)
    rows: Tensor | None = None  # each remaining row's example
    layers = torch.full((batch_size,), num_layers, dtype=torch.long)
    out: Tensor | None = None
    keep: Tensor | None = None
    for index in range(num_layers):
        logits, mask = step(index, keep)
        if rows is None or out is None:  # (B, C) or (B, L', C), zeros where a row ends
            rows = torch.arange(batch_size, device=logits.device)
            layers = layers.to(logits.device)
            out = logits.new_zeros((batch_size, *mask.shape[1:2], logits.shape[-1]))
            out = out if logits.dim() == 3 else out[:, 0]
        elif keep is not None:
            rows = rows[keep]
        last = index == num_layers - 1
        done = (
            torch.ones_like(rows, dtype=torch.bool)
            if last
            else (confidence(logits, mask, criterion) >= threshold)
        )
        if logits.dim() == 3:
            out[rows[done], : logits.shape[1]] = logits[done]
        else:
            out[rows[done]] = logits[done]
        layers[rows[done]] = index + 1
        keep = ~done
        if not keep.any():
            break
    assert out is not None
    return ExitResult(out, layers)


class ExitHead(nn.Module):
    """A classifier on one block's output: a LayerNorm (when the stack ends in one, since a
    pre-LN block's output is not normalised) and a head of the model's kind.

    Args:
        head: a :class:`TokenClassifier` or :class:`SequenceClassifier`.
        embed_dim: E, for the norm.
        norm: put a LayerNorm before the head.
    """

    def __init__(self, head: Head, embed_dim: int, *, norm: bool) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(embed_dim) if norm else nn.Identity()
        self.head = head

    def forward(self, h: Tensor, key_padding_mask: Tensor) -> Tensor:
        """``(B, L, E), (B, L) →`` the head's logits."""
        return self.head(self.norm(h), key_padding_mask)


class EarlyExitModel(TaskModel):
    """A :class:`TaskModel` with a classifier after every block of its encoder.

    ``forward(batch)`` is the normal model's (the last block's head), so training's dev
    metrics, ``predict`` and ``eval`` without a threshold read the full depth;
    ``forward(batch, exits=True)`` returns every block's logits for the joint loss, and
    :meth:`early_exit` runs the stack adaptively.

    Args:
        embedding, encoder, head, spec, cls_token: as :class:`TaskModel`; ``encoder`` is a
            stack of attention blocks.
        exits: the N − 1 classifiers after blocks 1 … N − 1.
        loss_weights: w_1 … w_N (:func:`exit_loss_weights`).
        weighting: the scheme that gave them, for ``repr``.
    """

    has_exit_heads = True

    def task_loss(
        self, forward: Callable[..., Any], batch: Any, loss_of: Callable[[Tensor], Tensor]
    ) -> Tensor:
        """Every exit's loss, weighted (:func:`weighted_exit_loss`), through ``forward``."""
        return weighted_exit_loss(forward(batch, exits=True), self.loss_weights, loss_of)

    def __init__(
        self,
        embedding: InputEmbedding | ImageEmbedding,
        encoder: AttentionSequenceEncoder,
        head: Head,
        *,
        exits: Sequence[ExitHead],
        loss_weights: Sequence[float],
        weighting: str,
        spec: TaskSpec | None = None,
        cls_token: ClsToken | None = None,
    ) -> None:
        super().__init__(embedding, encoder, head, spec=spec, cls_token=cls_token)
        blocks = self.stack.num_layers
        if len(exits) != blocks - 1 or len(loss_weights) != blocks:
            raise ValueError(
                f"{blocks} blocks need {blocks - 1} exit heads and {blocks} loss weights, "
                f"got {len(exits)} and {len(loss_weights)}"
            )
        self.exits = nn.ModuleList(exits)
        self.loss_weights = list(loss_weights)
        self.weighting = weighting

    @property
    def stack(self) -> BlockStack:
        """The encoder's stack of blocks (a property, not a second submodule: its weights
        are stored once, under ``encoder.``)."""
        assert isinstance(self.encoder, AttentionSequenceEncoder)
        stack = self.encoder.encoder
        assert isinstance(stack, BlockStack), "adaptive depth has no exit heads (refused at build)"
        return stack

    @property
    def num_layers(self) -> int:
        """N, the blocks of the encoder (and exits)."""
        return self.stack.num_layers

    def extra_repr(self) -> str:
        weights = ", ".join(f"{w:.3f}" for w in self.loss_weights)
        return f"exit_loss_weights={self.weighting} ({weights})"

    def forward(self, batch: Batch, exits: bool = False) -> Tensor | list[Tensor]:  # type: ignore[override]
        """The last block's logits, or with ``exits`` every block's, N tensors."""
        if not exits:
            return super().forward(batch)
        x, mask = self.encoder_inputs(batch)
        hidden = self.stack(x, key_padding_mask=mask).hidden_states[1:]  # last: normalised
        logits = [head(h, mask) for head, h in zip(self.exits, hidden, strict=False)]
        return [*logits, self.head(hidden[-1], mask)]

    def exit_mask(self, batch: Batch) -> Tensor:
        """``(B, L)``, True at padding: the positions of a token task's logits that
        :func:`confidence` skips."""
        return self.embedding.padding_mask(batch)

    def _exit_logits(self, index: int, h: Tensor, mask: Tensor) -> Tensor:
        """Block ``index``'s (0-based) classifier on that block's raw output ``h``."""
        if index < len(self.exits):
            return self.exits[index](h, mask)
        if self.stack.norm is not None:
            h = self.stack.norm(h)
        return self.head(h, mask)

    @torch.no_grad()
    def early_exit(self, batch: Batch, threshold: float, criterion: str = "max-prob") -> ExitResult:
        """Each example leaves after the first block whose classifier's :func:`confidence`
        is at least ``threshold`` (the last block's, whatever it is): ``threshold`` 0 stops
        every example after block 1, one above 1 runs every block.

        Rows that exit leave the batch before the next block runs, and padding columns no
        remaining row needs are cut, so the answers are those of running each example
        alone. Call it in eval mode.

        Args:
            batch: a collated batch.
            threshold: T ≥ 0.
            criterion: ``"max-prob"`` or ``"entropy"`` (:func:`confidence`).
        """
        check_exit_arguments(threshold, criterion)
        x, mask = self.encoder_inputs(batch)
        if self.stack.absolute is not None:
            x = self.stack.absolute(x)
        x = self.stack.embed_dropout(x)

        def step(index: int, keep: Tensor | None) -> tuple[Tensor, Tensor]:
            nonlocal x, mask
            if keep is not None:
                mask, (x,) = keep_rows(keep, mask, x)
            x, _ = run_block(self.stack, self.stack.layers[index], x, key_padding_mask=mask)
            return self._exit_logits(index, x, mask), mask

        return exit_early(self.num_layers, x.shape[0], step, threshold, criterion)

    def layer_groups(self) -> list[list[nn.Parameter]]:
        """As :meth:`TaskModel.layer_groups`, with exit i's classifier in block i's group."""
        groups = super().layer_groups()
        inside = {id(p) for p in self.exits.parameters()}
        below = [p for p in groups[0] if id(p) not in inside]
        blocks = [
            [*block, *(self.exits[i].parameters() if i < len(self.exits) else ())]
            for i, block in enumerate(groups[1:-1])
        ]
        return [below, *blocks, groups[-1]]


def exit_heads(
    head: Head,
    width: int,
    num_labels: int,
    count: int,
    *,
    pooling: str,
    dropout: float,
    norm: bool,
) -> list[ExitHead]:
    """``count`` classifiers of ``head``'s kind (token or sequence, ``pooling``) on
    ``width``-wide block outputs, each after a LayerNorm when ``norm``."""
    exits = []
    for _ in range(count):
        copy: Head
        if isinstance(head, TokenClassifier):
            copy = TokenClassifier(width, num_labels, dropout=dropout)
        else:
            copy = SequenceClassifier(width, num_labels, pooling=pooling, dropout=dropout)
        exits.append(ExitHead(copy, width, norm=norm))
    return exits


def build_exit_model(
    config: EncoderOptions,
    embedding: InputEmbedding | ImageEmbedding,
    encoder: AttentionSequenceEncoder,
    head: Head,
    *,
    spec: TaskSpec,
    cls_token: ClsToken | None,
) -> EarlyExitModel:
    """The :class:`EarlyExitModel` of ``config`` around the normal model's parts: one
    classifier like ``head`` after each block but the last, whose classifier is ``head``."""
    assert isinstance(config, ExitOptions), "an architecture with exit heads"
    stack = encoder.encoder
    assert isinstance(stack, BlockStack), "adaptive depth has no exit heads (refused at build)"
    exits = exit_heads(
        head,
        encoder.output_dim,
        spec.num_labels,
        stack.num_layers - 1,
        pooling=config.pooling,
        dropout=config.dropout,
        norm=stack.norm is not None,
    )
    return EarlyExitModel(
        embedding,
        encoder,
        head,
        exits=exits,
        loss_weights=exit_loss_weights(config.exit_loss_weights, stack.num_layers),
        weighting=config.exit_loss_weights,
        spec=spec,
        cls_token=cls_token,
    )
