"""The ``[seq2seq]`` section of a run's configuration: what only encoder–decoders need.

The encoder is the whole ``[model]`` section (a transformer with any attention kernel,
or a Conformer; :func:`selfattn.models.build_seq2seq_model`), and the decoder shares its
block options; this section adds the decoder's depth, the output layer, the training
tricks of lecture 001 §Training and the default decoding.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from selfattn.attention.alignment import AlignmentConfig, AlignmentName
from selfattn.messages import check_range

OutputName = Literal["vocab", "pointer", "copy"]
CrossLayersName = Literal["last", "matching"]
ScheduleName = Literal["none", "constant", "linear", "exponential", "inverse_sigmoid"]
DecodingName = Literal["greedy", "beam", "sample", "nat"]


@dataclass(frozen=True)
class Seq2SeqConfig:
    """Encoder–decoder options (read only when the data are a seq2seq task).

    Attributes:
        output: ``vocab`` (a distribution over the target vocabulary), ``pointer``
            (over source positions: the pointer network, e.g. ``convex-hull``) or
            ``copy`` (pointer-generator: vocabulary mixed with copying source words).
        decoder_layers: decoder blocks; ``None``: as many as ``model.num_layers``.
        share_embeddings: one table for source and target (needs a joint vocabulary,
            i.e. ``data.bpe_vocab_size``).
        tie_output: the output projection reuses the target embedding matrix.
        cross_layers: every decoder layer reads the encoder's ``last`` layer, or layer l
            reads encoder layer l (``matching``; equal depths).
        source_positional: give the encoder the positional encoding of ``model.positional``;
            false treats the source as an unordered set (convex-hull points).
        nat: also train a length predictor and a non-autoregressive pass (every target
            position from BOS inputs in one step), so ``--nat`` decoding works.
        nat_weight: weight of the NAT and length losses beside the autoregressive one.
        scheduled_sampling: how the probability of feeding the model's own prediction
            instead of the gold previous token rises over training (``none``: teacher
            forcing throughout).
        sampling_max: the highest such probability.
        sampling_steps: optimizer steps over which the schedule rises.
        guided_attention: weight of the guided-attention loss (attention far from the
            diagonal is penalised; for monotonic tasks); 0 disables it.
        guided_sigma: width σ of the guided-attention band, as a fraction of the length.
        coverage: weight of the coverage penalty (attending again to what was already
            attended); 0 disables it.
        alignment: what the decoder's cross-attention remembers of its previous step
            (:mod:`selfattn.attention.alignment`): ``content`` (nothing), ``location``
            (location-aware, Chorowski et al. 2015) or ``forward`` (monotonic forward
            attention, Zhang et al. 2018); both the transformer's and the RNN's decoder.
        location_filters: ``location``: k, filters of the convolution over α_{t-1}.
        location_width: ``location``: r, their width (odd).
        forward_max_advance: ``forward``: m, the most source positions one decoder step
            moves on (1: Zhang et al.; more when the source is much longer than the
            target, e.g. speech frames → digits).
        decoding: default decoding of ``selfattn eval`` / ``predict``.
        beam_size: beam width for ``beam`` decoding.
        length_penalty: α of the beam's length normalisation.
        no_repeat_ngram: beam search never repeats an n-gram of this size (0: off).
        max_output_ratio: decoding stops after ``ratio × source length + 10`` tokens.
        encoder_seconds: fine-tuning a Whisper checkpoint (``model.pretrained``): its
            encoder reads this many seconds of each recording, zero-padded, instead of
            Whisper's 30 (``None``); read by Whisper only.
    """

    output: OutputName = "vocab"
    decoder_layers: int | None = None
    share_embeddings: bool = False
    tie_output: bool = True
    cross_layers: CrossLayersName = "last"
    source_positional: bool = True
    nat: bool = False
    nat_weight: float = 1.0
    scheduled_sampling: ScheduleName = "none"
    sampling_max: float = 0.25
    sampling_steps: int = 2000
    guided_attention: float = 0.0
    guided_sigma: float = 0.2
    coverage: float = 0.0
    alignment: AlignmentName = "content"
    location_filters: int = 10
    location_width: int = 15
    forward_max_advance: int = 1
    decoding: DecodingName = "greedy"
    beam_size: int = 5
    length_penalty: float = 1.0
    no_repeat_ngram: int = 0
    max_output_ratio: float = 2.0
    encoder_seconds: float | None = None

    def __post_init__(self) -> None:
        check_range("seq2seq.decoder_layers", self.decoder_layers, at_least=1, none=True)
        for name in ("nat_weight", "guided_attention", "coverage", "length_penalty"):
            check_range(f"seq2seq.{name}", getattr(self, name), at_least=0)
        check_range("seq2seq.sampling_max", self.sampling_max, at_least=0, at_most=1)
        check_range("seq2seq.no_repeat_ngram", self.no_repeat_ngram, at_least=0)
        if self.sampling_steps < 1 or self.beam_size < 1:
            raise ValueError("seq2seq.sampling_steps and seq2seq.beam_size must be >= 1")
        check_range("seq2seq.guided_sigma", self.guided_sigma, above=0)
        check_range("seq2seq.max_output_ratio", self.max_output_ratio, above=0)
        check_range("seq2seq.encoder_seconds", self.encoder_seconds, above=0, none=True)
        if self.decoding == "nat" and not self.nat:
            raise ValueError("seq2seq.decoding = 'nat' needs seq2seq.nat = true")
        if self.location_filters < 1:
            raise ValueError(f"seq2seq.location_filters must be >= 1, got {self.location_filters}")
        if self.location_width < 1 or self.location_width % 2 == 0:
            raise ValueError(
                f"seq2seq.location_width must be odd and >= 1, got {self.location_width}"
            )
        if self.forward_max_advance < 1:
            raise ValueError(
                f"seq2seq.forward_max_advance must be >= 1, got {self.forward_max_advance}"
            )
        defaults = {f.name: f.default for f in fields(self)}
        for name, kind in _ALIGNMENT_FIELDS.items():
            if getattr(self, name) != defaults[name] and self.alignment != kind:
                raise ValueError(
                    f"seq2seq.{name} is read by seq2seq.alignment = {kind!r} only, but "
                    f"seq2seq.alignment = {self.alignment!r}"
                )

    def alignment_config(self) -> AlignmentConfig:
        """The decoder cross-attention's :class:`AlignmentConfig`."""
        return AlignmentConfig(
            self.alignment, self.location_filters, self.location_width, self.forward_max_advance
        )


#: The alignment fields and the one ``seq2seq.alignment`` that reads each.
_ALIGNMENT_FIELDS = {
    "location_filters": "location",
    "location_width": "location",
    "forward_max_advance": "forward",
}
