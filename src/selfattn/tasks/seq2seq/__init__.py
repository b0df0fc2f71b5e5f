"""The ``seq2seq`` task type in one place (lecture 001 §3–5): its road from data to
decoded output (:mod:`.task`), its decoding options and the loop that decodes sources
with them (:mod:`.decoding`), its training signal (:mod:`.objective`: teacher forcing,
the non-autoregressive pass), the attention regularisers and losses (:mod:`.losses`) and
scheduled sampling (:mod:`.sampling`). The encoder–decoder itself is
:class:`selfattn.models.seq2seq.Seq2SeqTransformer` or the RNN encoder–decoder
(:class:`selfattn.models.rnn_seq2seq.RNNSeq2Seq`, ``model.architecture = "rnn"``), built by
:func:`selfattn.models.build_seq2seq_model`; the search algorithms are
:mod:`selfattn.decoding`.
"""

from __future__ import annotations

from selfattn.tasks.seq2seq.decoding import METHODS
from selfattn.tasks.seq2seq.losses import (
    attention_budget_loss,
    attention_for_regularisers,
    coverage_loss,
    guided_attention_loss,
    sequence_nll,
)
from selfattn.tasks.seq2seq.objective import (
    Seq2SeqObjective,
    encode_batch,
    evaluate_teacher_forced,
    nat_inputs,
)
from selfattn.tasks.seq2seq.sampling import (
    SCHEDULES,
    SamplingSchedule,
    scheduled_sampling_inputs,
)
from selfattn.tasks.seq2seq.scoring import Decoded, bpe_pair, token_error_rate
from selfattn.tasks.seq2seq.task import Seq2SeqTask

__all__ = [
    "METHODS",
    "SCHEDULES",
    "Decoded",
    "SamplingSchedule",
    "Seq2SeqObjective",
    "Seq2SeqTask",
    "attention_budget_loss",
    "attention_for_regularisers",
    "bpe_pair",
    "coverage_loss",
    "encode_batch",
    "evaluate_teacher_forced",
    "guided_attention_loss",
    "nat_inputs",
    "scheduled_sampling_inputs",
    "sequence_nll",
    "token_error_rate",
]
