"""A task model fine-tuned from a pretrained BERT checkpoint (``model.pretrained``): the
checkpoint's embeddings and encoder (:class:`~selfattn.models.bert.BertEncoder`), then
the lecture's heads.

A token task reads each word at its first wordpiece (Devlin et al. 2019 §5.3), so its
logits are one row per *word*, like every other token model's: labels, metrics and
``predict`` stay per word. A sequence task pools the wordpieces (``mean`` over the real
ones, ``[CLS]`` for ``first`` or ``cls``, or learned-query ``attention``).

The checkpoint fixes the architecture: a field of ``[model]`` that would change it is
refused in one line unless it equals the checkpoint's value (:func:`check_pretrained_fields`).
``model.dropout``, ``model.attention_dropout``, ``model.head_dropout``,
``model.dropout_masks`` and ``model.linear_layers`` are fine-tuning choices and apply;
BERT has no feed-forward hidden dropout (``model.ffn_dropout`` may only say 0).
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, replace
from typing import Any

import torch
from torch import Tensor, nn

from selfattn.datatypes import Batch, TaskType
from selfattn.models.architectures.transformer import TransformerOptions
from selfattn.models.bert import BertConfig, BertEncoder
from selfattn.models.heads import SequenceClassifier, SequenceRegressor, TokenClassifier
from selfattn.models.label_hooks import LabelModelHooks
from selfattn.models.layer_choices import use_layer_choices
from selfattn.models.option_groups import toml_value
from selfattn.models.registry import unset

#: ``[model]`` fields the checkpoint decides, with the checkpoint's value they may repeat.
_FROM_CHECKPOINT = {
    "embed_dim": "hidden_size",
    "num_heads": "num_attention_heads",
    "num_layers": "num_hidden_layers",
    "ffn_dim": "intermediate_size",
}
#: What BERT's architecture is, for the other fields a user might set to say so.
_BERT_VALUES: dict[str, Any] = {
    "architecture": "transformer",
    "positional": "learned",
    "norm_first": False,
    "ffn_dropout": 0.0,
}
#: Fields a fine-tuned model reads whatever their value.
_FINE_TUNING = frozenset(
    {
        "pretrained",
        "dropout",
        "attention_dropout",
        "head_dropout",
        "pooling",
        "dropout_masks",
        "linear_layers",
        "exit_heads",
        "exit_loss_weights",
    }
)


def check_pretrained_fields(config: TransformerOptions, bert: BertConfig) -> None:
    """Refuse, in one line, a ``[model]`` field that contradicts the checkpoint.

    Raises:
        ValueError: naming the field, its value and the checkpoint's.
    """
    for item in dataclasses.fields(config):
        name, default, value = item.name, item.default, getattr(config, item.name)
        if name in _FINE_TUNING or unset(name, value):
            continue
        if name in _FROM_CHECKPOINT:
            theirs = getattr(bert, _FROM_CHECKPOINT[name])
            if value == theirs:
                continue
            raise ValueError(
                f"model.{name} = {value} conflicts with the checkpoint "
                f"{config.pretrained!r} ({_FROM_CHECKPOINT[name]} = {theirs}); leave it out: "
                "a pretrained model's shape is the checkpoint's"
            )
        if name in _BERT_VALUES and value == _BERT_VALUES[name]:
            continue
        raise ValueError(
            f"model.{name} = {toml_value(value)}: the checkpoint {config.pretrained!r} fixes "
            f"its architecture (BERT: post-LN, learned positions, dense softmax attention, "
            f"no feed-forward hidden dropout); "
            f"leave it at its default ({toml_value(default)})"
        )


class PretrainedTaskModel(LabelModelHooks):
    """A BERT encoder and a task head: ``forward(batch) → logits``, one row per word
    (token task), per sequence, or one value (regression).

    Args:
        bert: the encoder (random until :meth:`load_pretrained`).
        head: the task head, reading ``bert``'s last hidden states.
        task: ``"token"``, ``"sequence"`` or ``"regression"``.
        spec: how it was built (kept for checkpoints).
    """

    attention_view = "wordpieces"

    def __init__(
        self,
        bert: BertEncoder,
        head: TokenClassifier | SequenceClassifier | SequenceRegressor,
        *,
        task: TaskType,
        spec: Any = None,
    ) -> None:
        super().__init__()
        self.bert = bert
        self.head = head
        self.task = task
        self.spec = spec

    def forward(self, batch: Batch) -> Tensor:
        """Logits: ``(B, L, C)`` for L words (token task), ``(B, C)``, or ``(B,)``."""
        subwords = subwords_of(batch)
        return self.forward_subwords(
            subwords.input_ids, subwords.attention_mask, subwords.first, batch.key_padding_mask
        )

    def forward_subwords(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        first: Tensor | None = None,
        word_padding_mask: Tensor | None = None,
    ) -> Tensor:
        """The model on wordpieces.

        Args:
            input_ids: ``(B, T)`` wordpiece ids.
            attention_mask: ``(B, T)``, 1 at real wordpieces.
            first: token task: ``(B, L)`` each word's first wordpiece; ``None``: logits
                for every wordpiece ``(B, T, C)``.
            word_padding_mask: token task with ``first``: ``(B, L)`` True at padded words.
        """
        h = self.bert(input_ids, attention_mask).last_hidden_state  # (B, T, E)
        return self.read(self.head, h, attention_mask == 0, first, word_padding_mask)

    def read(
        self,
        head: nn.Module,
        h: Tensor,
        padding: Tensor,
        first: Tensor | None = None,
        word_padding_mask: Tensor | None = None,
    ) -> Tensor:
        """``head`` on hidden states ``h`` ``(B, T, E)`` of wordpieces (``padding``
        ``(B, T)`` True at padding): a token task with ``first`` reads each word at its
        first wordpiece (``word_padding_mask`` True at padded words)."""
        if self.task == "token" and first is not None:
            h = torch.gather(h, 1, first[..., None].expand(-1, -1, h.shape[-1]))  # (B, L, E)
            padding = (
                word_padding_mask
                if word_padding_mask is not None
                else torch.zeros_like(first, dtype=torch.bool)
            )
        out: Tensor = head(h, padding)
        return out

    @torch.no_grad()
    def attention_maps(self, batch: Batch) -> list[Tensor]:
        """Every block's weights over the wordpieces, ``num_layers`` × ``(B, H, T, T)``
        (``[CLS]`` first and ``[SEP]`` last in every row)."""
        subwords = subwords_of(batch)
        out = self.bert(subwords.input_ids, subwords.attention_mask, need_weights=True)
        assert out.attentions is not None
        return out.attentions

    def layer_groups(self) -> list[list[nn.Parameter]]:
        """Parameters from the input up: the embeddings, each block, the head (for
        layer-wise learning-rate decay)."""
        return [
            list(self.bert.embeddings.parameters()),
            *(list(block.parameters()) for block in self.bert.encoder.layers),
            [p for name, p in self.named_parameters() if not name.startswith("bert.")],
        ]

    def encoder_parameters(self) -> list[nn.Parameter]:
        """What a linear probe freezes: everything but the head."""
        return list(self.bert.parameters())

    def load_pretrained(self, loaded: BertEncoder, source: object) -> None:
        """Take the weights of the checkpoint ``loaded`` (read from ``source``, e.g. by
        :func:`selfattn.pretrained.bert.bert_from_folder`) for the encoder; the head
        stays as initialised.

        Raises:
            ValueError: the checkpoint's shape is not the one this model was built for
                (one line naming ``source``).
        """
        if loaded.config != replace(
            self.bert.config,
            hidden_dropout_prob=loaded.config.hidden_dropout_prob,
            attention_probs_dropout_prob=loaded.config.attention_probs_dropout_prob,
        ):
            raise ValueError(f"{source}: the checkpoint changed since this run was prepared")
        self.bert.load_state_dict(loaded.state_dict())


def subwords_of(batch: Batch) -> Any:
    """The batch's wordpieces (the checkpoint's tokenizer's), refused in one line when absent."""
    if batch.subwords is None:
        raise ValueError(
            "this model was fine-tuned from a pretrained checkpoint: its batches come from "
            "the checkpoint's tokenizer (the task's collator)"
        )
    return batch.subwords


def build_pretrained_model(
    config: TransformerOptions,
    *,
    task: TaskType,
    pretrained: dict[str, Any],
    num_labels: int,
    target_mean: float = 0.0,
    target_std: float = 1.0,
    spec: Any = None,
) -> PretrainedTaskModel:
    """A :class:`PretrainedTaskModel` of the checkpoint config ``pretrained`` (random
    weights: :meth:`PretrainedTaskModel.load_pretrained` or a run's checkpoint fills
    them).

    Raises:
        ValueError: a ``[model]`` field contradicts the checkpoint; a task type that has
            no head here.
    """
    bert_config = BertConfig(**pretrained)
    check_pretrained_fields(config, bert_config)
    dropout = config.dropout
    attention_dropout = dropout if config.attention_dropout is None else config.attention_dropout
    bert = BertEncoder(
        replace(
            bert_config,
            hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=attention_dropout,
        )
    )
    size = bert_config.hidden_size
    head: TokenClassifier | SequenceClassifier | SequenceRegressor
    pooling = "first" if config.pooling == "cls" else config.pooling  # [CLS] is position 0
    head_dropout = config.head_rate
    if task == "token":
        head = TokenClassifier(size, num_labels, dropout=head_dropout)
    elif task in ("sequence", "multilabel"):  # multilabel: one sigmoid logit per label
        head = SequenceClassifier(size, num_labels, pooling=pooling, dropout=head_dropout)
    elif task == "regression":
        head = SequenceRegressor(
            size,
            pooling=pooling,
            dropout=head_dropout,
            target_mean=target_mean,
            target_std=target_std,
        )
    else:
        raise ValueError(
            f"model.pretrained is for token, sequence, multilabel and regression tasks, not {task}"
        )
    model = PretrainedTaskModel(bert, head, task=task, spec=spec)
    use_layer_choices(model, config)
    return model


def checkpoint_config(bert: BertConfig) -> dict[str, Any]:
    """What a :class:`~selfattn.models.task_model.TaskSpec` stores of the checkpoint's config."""
    return asdict(bert)
