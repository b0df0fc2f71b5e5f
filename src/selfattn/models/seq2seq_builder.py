"""The encoder–decoder a config describes (lecture 001 §3–5): the ``[model]`` section's
encoder (any architecture with attention, any kernel) and a Transformer decoder shaped by
``[seq2seq]``, or the RNN encoder–decoder with attention (``architecture = "rnn"``,
lecture 003). Training and decoding it is :mod:`selfattn.tasks.seq2seq`'s work.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from selfattn.models.architectures.rnn import RNNOptions
from selfattn.models.encoders import stack_config
from selfattn.models.layer_choices import use_layer_choices
from selfattn.models.option_groups import AttentionOptions, ModelOptions, toml_value
from selfattn.models.rnn_seq2seq import RNNSeq2Seq
from selfattn.models.seq2seq import ENCODER_STACKS, Seq2SeqTransformer, decoder_like
from selfattn.models.seq2seq_options import Seq2SeqConfig
from selfattn.models.task_model import TaskSpec, check_fields


def check_seq2seq_model(model: ModelOptions, seq2seq: Seq2SeqConfig, *, text: bool | None) -> None:
    """Refuse, in one line, a ``[model]`` section the Transformer encoder–decoder cannot
    use with ``seq2seq``: an encoder it cannot cross-attend to, a field a seq2seq model
    does not read, a clash of the two sections. It needs no data (``text``: the source is
    words, ``None`` when not known yet).
    """
    if model.architecture not in ENCODER_STACKS:
        raise ValueError(
            f"seq2seq needs model.architecture = {' or '.join(map(repr, ENCODER_STACKS))} "
            f"or 'rnn', got {model.architecture!r} (an encoder the decoder can cross-attend to)"
        )
    check_fields(model, task="seq2seq", text=text)
    if seq2seq.encoder_seconds is not None:
        raise ValueError(
            f"seq2seq.encoder_seconds = {seq2seq.encoder_seconds:g} is read by a Whisper "
            'checkpoint only (model.pretrained = "whisper-base"); leave it out'
        )
    assert isinstance(model, AttentionOptions)  # ENCODER_STACKS: attention stacks
    if seq2seq.alignment != "content" and model.normalizer != "softmax":
        raise ValueError(
            f"seq2seq.alignment = {seq2seq.alignment!r} normalises the cross-attention with a "
            f'softmax: it needs model.normalizer = "softmax", got {model.normalizer!r}'
        )


def build_seq2seq_model(
    model: ModelOptions, seq2seq: Seq2SeqConfig, spec: TaskSpec
) -> Seq2SeqModel:
    """The encoder–decoder for ``spec`` (``num_labels`` = target vocabulary size).

    The encoder honours the whole ``[model]`` section, as a sequence task's encoder does:
    ``architecture`` (``transformer`` or ``conformer``), sizes, positions, any attention
    kernel (``attention = "window"`` for long speech), score, normaliser, ``include_self``,
    ``share_weights``, dropouts, the Conformer's ``window_k``. The decoder
    (:func:`~selfattn.models.seq2seq.decoder_like`) shares all of it but attention, which
    is dense and includes itself (incremental decoding keeps a KV cache), and its depth is
    ``seq2seq.decoder_layers``; its cross-attention keeps ``seq2seq.alignment``.
    ``model.architecture = "rnn"`` builds the RNN
    encoder–decoder instead (:func:`build_rnn_seq2seq`).

    Raises:
        ValueError: an architecture without attention (``fc``, ``bigru``, …), a field a
            seq2seq model does not use, or options that clash (one line each).
    """
    if isinstance(model, RNNOptions):
        return build_rnn_seq2seq(model, seq2seq, spec)
    check_seq2seq_model(model, seq2seq, text=spec.vocab_size is not None)
    assert isinstance(model, AttentionOptions)
    stack = stack_config(model, max_len=spec.max_len)
    encoder = stack if seq2seq.source_positional else replace(stack, positional=None)
    decoder = decoder_like(stack, num_layers=seq2seq.decoder_layers or model.num_layers)
    built = Seq2SeqTransformer(
        encoder,
        decoder,
        **_shared_arguments(seq2seq, spec),
        encoder_kind=model.architecture,  # type: ignore[arg-type]
        output=seq2seq.output,
        cross_layers=seq2seq.cross_layers,
        length_predictor=seq2seq.nat,
    )
    use_layer_choices(built, model)
    built.spec = spec
    return built


def _shared_arguments(seq2seq: Seq2SeqConfig, spec: TaskSpec) -> dict[str, Any]:
    """What every encoder–decoder reads alike: its vocabularies (or source vectors) from
    ``spec``, and ``seq2seq``'s shared embeddings, tied output and alignment."""
    return {
        "target_vocab_size": spec.num_labels,
        "source_vocab_size": spec.vocab_size,
        "source_feature_dim": spec.feature_dim,
        "share_embeddings": seq2seq.share_embeddings,
        "tie_output": seq2seq.tie_output,
        "alignment": seq2seq.alignment_config(),
    }


#: ``[seq2seq]`` settings the RNN encoder–decoder has nothing for, and why (one line each).
_RNN_REFUSES = {
    "output": "it has the vocab output only; pointer and copy are the transformer's",
    "nat": "its decoder reads its outputs left to right; non-autoregressive decoding "
    "is the transformer's",
    "cross_layers": "its decoder attends to the encoder's last layer only",
    "source_positional": "an RNN reads its source in order and has no positional "
    "encoding to leave out",
}


def build_rnn_seq2seq(model: RNNOptions, seq2seq: Seq2SeqConfig, spec: TaskSpec) -> RNNSeq2Seq:
    """The RNN encoder–decoder with attention (:mod:`selfattn.models.rnn_seq2seq`) for
    ``spec``: ``embed_dim`` words, a bidirectional ``rnn_cell`` encoder of ``num_layers``
    with ``ffn_dim / 2`` per direction, a decoder of ``seq2seq.decoder_layers`` (default
    ``num_layers``) with ``ffn_dim`` units, ``score`` as the match function,
    ``input_feeding``, ``dropout``; ``seq2seq.share_embeddings``, ``tie_output`` and
    ``alignment`` (with its sizes).

    Raises:
        ValueError: a ``[model]`` field the RNN does not read, or a ``[seq2seq]`` setting
            it has nothing for (pointer / copy output, NAT, matching cross-layers, a
            source without positions), one line each.
    """
    check_fields(model, task="seq2seq", text=spec.vocab_size is not None)
    defaults = Seq2SeqConfig()
    for name, reason in _RNN_REFUSES.items():
        value = getattr(seq2seq, name)
        if value != getattr(defaults, name):
            raise ValueError(
                f"seq2seq.{name} = {toml_value(value)}: the RNN encoder–decoder "
                f'(model.architecture = "rnn") {reason}'
            )
    built = RNNSeq2Seq(
        **_shared_arguments(seq2seq, spec),
        embed_dim=model.embed_dim,
        hidden_dim=model.ffn_dim,
        max_len=spec.max_len,
        num_layers=model.num_layers,
        decoder_layers=seq2seq.decoder_layers,
        cell=model.rnn_cell,
        score=model.score,
        input_feeding=model.input_feeding,
        dropout=model.dropout,
    )
    built.spec = spec
    return built


#: The encoder–decoders a seq2seq task builds (both answer
#: :class:`~selfattn.models.encoder_decoder.EncoderDecoder`), for ``isinstance``.
SEQ2SEQ_MODELS = (Seq2SeqTransformer, RNNSeq2Seq)
Seq2SeqModel = Seq2SeqTransformer | RNNSeq2Seq

__all__ = ["SEQ2SEQ_MODELS", "Seq2SeqModel", "build_rnn_seq2seq", "build_seq2seq_model"]
