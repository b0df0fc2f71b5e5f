"""The encoder–decoder a config describes (lecture 001 §3–5): the ``[model]`` section's
encoder (any architecture with attention, any kernel) and a Transformer decoder shaped by
``[seq2seq]``. Training and decoding it is :mod:`selfattn.pipeline.seq2seq`'s work.
"""

from __future__ import annotations

from dataclasses import replace

from selfattn.models.seq2seq import ENCODER_STACKS, Seq2SeqTransformer, decoder_like
from selfattn.tasks.config import ModelConfig
from selfattn.tasks.dropout_masks import use_dropout_masks
from selfattn.tasks.encoders import stack_config
from selfattn.tasks.model import TaskSpec, check_fields
from selfattn.tasks.seq2seq_config import Seq2SeqConfig


def build_seq2seq_model(
    model: ModelConfig, seq2seq: Seq2SeqConfig, spec: TaskSpec
) -> Seq2SeqTransformer:
    """The encoder–decoder for ``spec`` (``num_labels`` = target vocabulary size).

    The encoder honours the whole ``[model]`` section, as a sequence task's encoder does:
    ``architecture`` (``transformer`` or ``conformer``), sizes, positions, any attention
    kernel (``attention = "window"`` for long speech), score, normaliser, ``include_self``,
    ``share_weights``, dropouts, the Conformer's ``window_k``. The decoder
    (:func:`~selfattn.models.seq2seq.decoder_like`) shares all of it but attention, which
    is dense and includes itself (incremental decoding keeps a KV cache), and its depth is
    ``seq2seq.decoder_layers``.

    Raises:
        ValueError: an architecture without attention (``fc``, ``bigru``, …), a field a
            seq2seq model does not use, or options that clash (one line each).
    """
    if model.architecture not in ENCODER_STACKS:
        raise ValueError(
            f"seq2seq needs model.architecture = {' or '.join(map(repr, ENCODER_STACKS))}, "
            f"got {model.architecture!r} (an encoder the decoder can cross-attend to)"
        )
    check_fields(model, task="seq2seq", text=spec.vocab_size is not None)
    stack = stack_config(model, max_len=spec.max_len)
    encoder = stack if seq2seq.source_positional else replace(stack, positional=None)
    decoder = decoder_like(stack, num_layers=seq2seq.decoder_layers or model.num_layers)
    built = Seq2SeqTransformer(
        encoder,
        decoder,
        target_vocab_size=spec.num_labels,
        source_vocab_size=spec.vocab_size,
        source_feature_dim=spec.feature_dim,
        encoder_kind=model.architecture,  # type: ignore[arg-type]
        share_embeddings=seq2seq.share_embeddings,
        tie_output=seq2seq.tie_output,
        output=seq2seq.output,
        cross_layers=seq2seq.cross_layers,
        length_predictor=seq2seq.nat,
    )
    built.spec = spec
    use_dropout_masks(built, model.dropout_masks)
    return built


__all__ = ["build_seq2seq_model"]
