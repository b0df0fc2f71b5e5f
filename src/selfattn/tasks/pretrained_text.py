"""What a label task does differently when ``model.pretrained`` names a BERT checkpoint.

The words of the dataset stay words (labels, lengths and predictions are per word); they
reach the model through the checkpoint's own WordPiece tokenizer
(:class:`~selfattn.pretrained.collate.SubwordCollator`), which the run's checkpoint stores,
so a trained run predicts without the pretrained folder. The checkpoint's weights are
loaded once, into the model a training run builds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from selfattn.config import Config, DataConfig
from selfattn.data.vocab import LabelVocabulary
from selfattn.datatypes import DataError, Example
from selfattn.models.option_groups import toml_value
from selfattn.models.pretrained import PretrainedTaskModel, checkpoint_config
from selfattn.pretrained.bert import CONFIG_FILE, bert_from_folder
from selfattn.pretrained.bert_config import bert_config_from_file
from selfattn.pretrained.collate import SubwordCollator
from selfattn.pretrained.tokenizer import WordPieceTokenizer
from selfattn.pretrained.weights import pretrained_folder

# [data] fields the checkpoint's tokenizer decides, with their defaults.
_TOKENIZER_DECIDES = {"lowercase": False, "min_freq": 1, "bpe_vocab_size": None}


class PretrainedText:
    """A BERT checkpoint's tokenizer and config for a label task.

    Args:
        tokenizer: the checkpoint's WordPiece tokenizer.
        bert: its ``config.json``, as :class:`~selfattn.models.bert.BertConfig` fields.
        folder: where the weights are (``None`` once restored from a run: the run holds
            the fine-tuned weights).
    """

    def __init__(
        self, tokenizer: WordPieceTokenizer, bert: dict[str, Any], folder: Path | None = None
    ) -> None:
        self.tokenizer = tokenizer
        self.bert = bert
        self.folder = folder

    @classmethod
    def for_config(cls, config: Config, *, input_kind: str) -> PretrainedText:
        """The checkpoint ``config.model.pretrained`` names, checked against the config.

        Raises:
            ValueError: vector data; a ``[data]`` field the tokenizer decides; a ``[train]``
                field that needs a pretrained model; the checkpoint cannot be read.
        """
        name = getattr(config.model, "pretrained", None)
        assert name is not None
        if input_kind != "text":
            raise DataError(
                f"model.pretrained = {name!r}: a BERT checkpoint reads text; dataset "
                f"{config.data.dataset!r} is {input_kind}"
            )
        refuse_tokenizer_fields(config.data, name)
        folder = pretrained_folder(name)
        bert = bert_config_from_file(folder / CONFIG_FILE)
        tokenizer = WordPieceTokenizer.from_pretrained(
            folder, max_length=bert.max_position_embeddings
        )
        return cls(tokenizer, checkpoint_config(bert), folder)

    def collator(
        self, labels: LabelVocabulary, task: str, max_len: int | None = None
    ) -> SubwordCollator:
        """Batches of words for the model."""
        return SubwordCollator(self.tokenizer, labels, task, max_len=max_len)

    def state(self) -> dict[str, Any]:
        """What the run's checkpoint keeps: the tokenizer and the checkpoint config."""
        return {"tokenizer": self.tokenizer.to_str(), "bert": self.bert}

    @classmethod
    def restore(cls, stored: dict[str, Any]) -> PretrainedText:
        """The inverse of :meth:`state`."""
        bert = dict(stored["bert"])
        tokenizer = WordPieceTokenizer.from_str(
            stored["tokenizer"], max_length=int(bert["max_position_embeddings"])
        )
        return cls(tokenizer, bert)

    def wordpieces(self, example: Example) -> list[str]:
        """The wordpieces the model reads for ``example`` (its attention maps' axes)."""
        assert example.tokens is not None
        return list(
            self.tokenizer.tokenizer.encode(list(example.tokens), is_pretokenized=True).tokens
        )

    def start(self, model: nn.Module, config: Config) -> None:
        """Load the checkpoint's weights into a freshly built ``model`` and freeze its
        encoder for a linear probe (``train.freeze_encoder``)."""
        assert isinstance(model, PretrainedTaskModel)
        if self.folder is not None:
            model.load_pretrained(bert_from_folder(self.folder), self.folder)
        if config.train.freeze_encoder:
            for parameter in model.encoder_parameters():
                parameter.requires_grad_(False)


def refuse_tokenizer_fields(data: DataConfig, name: str) -> None:
    """A ``[data]`` field the checkpoint's tokenizer decides, set: one line."""
    for field, default in _TOKENIZER_DECIDES.items():
        value = getattr(data, field)
        if value != default:
            raise ValueError(
                f"data.{field} = {toml_value(value)}: the checkpoint {name!r} brings its own "
                f"tokenizer (casing, wordpieces); leave it at its default ({toml_value(default)})"
            )


def refuse_freeze(config: Config) -> None:
    """``train.freeze_encoder`` without a pretrained encoder, or freezing a model with exit
    heads (its last head too) that does not start from a fine-tuned run: one line."""
    if config.train.freeze_encoder and getattr(config.model, "pretrained", None) is None:
        raise ValueError(
            "train.freeze_encoder = true needs model.pretrained: a random encoder would stay random"
        )
    exits = getattr(config.model, "exit_heads", False)
    if config.train.freeze_encoder and exits and config.train.init_from is None:
        raise ValueError(
            "train.freeze_encoder = true with model.exit_heads = true freezes the last "
            "block's head too: set train.init_from to a run fine-tuned without exits"
        )
