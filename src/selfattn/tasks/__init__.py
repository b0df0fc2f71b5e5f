"""Task models for the lecture's three output types (lecture 000, §"What is the output"):
one label per vector, one label per set, and seq2seq (the encoder–decoder's objectives).

>>> model = build_model(ModelConfig(), task="token", vocab_size=1000,
...                     char_vocab_size=None, feature_dim=None, num_labels=45)
>>> logits = model(batch)  # (B, L, 45)
"""

from __future__ import annotations

from selfattn.tasks.config import Architecture, ModelConfig, Pooling
from selfattn.tasks.embedding import CharEncoder, InputEmbedding
from selfattn.tasks.encoders import (
    ENCODERS,
    AttentionSequenceEncoder,
    BiGRUEncoder,
    CNNEncoder,
    FCEncoder,
    SequenceEncoder,
    TransformerSequenceEncoder,
    WindowFCEncoder,
    build_encoder,
    stack_config,
)
from selfattn.tasks.heads import (
    POOLINGS,
    AttentionPooling,
    ClsPooling,
    ClsToken,
    FirstPooling,
    MeanPooling,
    SequenceClassifier,
    SequenceRegressor,
    TokenClassifier,
)
from selfattn.tasks.model import TaskModel, TaskSpec, build_model, build_model_from_spec
from selfattn.tasks.seq2seq import Seq2SeqObjective, build_seq2seq_model
from selfattn.tasks.seq2seq_config import Seq2SeqConfig
from selfattn.tasks.seq2seq_objectives import (
    attention_budget_loss,
    attention_for_regularisers,
    coverage_loss,
    guided_attention_loss,
    sequence_nll,
)
from selfattn.tasks.seq2seq_sampling import SCHEDULES, SamplingSchedule, scheduled_sampling_inputs

__all__ = [
    "ENCODERS",
    "POOLINGS",
    "SCHEDULES",
    "Architecture",
    "AttentionPooling",
    "AttentionSequenceEncoder",
    "BiGRUEncoder",
    "CNNEncoder",
    "CharEncoder",
    "ClsPooling",
    "ClsToken",
    "FCEncoder",
    "FirstPooling",
    "InputEmbedding",
    "MeanPooling",
    "ModelConfig",
    "Pooling",
    "SamplingSchedule",
    "Seq2SeqConfig",
    "Seq2SeqObjective",
    "SequenceClassifier",
    "SequenceEncoder",
    "SequenceRegressor",
    "TaskModel",
    "TaskSpec",
    "TokenClassifier",
    "TransformerSequenceEncoder",
    "WindowFCEncoder",
    "attention_budget_loss",
    "attention_for_regularisers",
    "build_encoder",
    "build_model",
    "build_model_from_spec",
    "build_seq2seq_model",
    "coverage_loss",
    "guided_attention_loss",
    "scheduled_sampling_inputs",
    "sequence_nll",
    "stack_config",
]
