"""Task models for the lecture's three output types (lecture 000, §"What is the output"):
one label per vector, one label per set, and the encoder–decoder of seq2seq.

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
from selfattn.tasks.seq2seq import build_seq2seq_model
from selfattn.tasks.seq2seq_config import Seq2SeqConfig

__all__ = [
    "ENCODERS",
    "POOLINGS",
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
    "Seq2SeqConfig",
    "SequenceClassifier",
    "SequenceEncoder",
    "SequenceRegressor",
    "TaskModel",
    "TaskSpec",
    "TokenClassifier",
    "TransformerSequenceEncoder",
    "WindowFCEncoder",
    "build_encoder",
    "build_model",
    "build_model_from_spec",
    "build_seq2seq_model",
    "stack_config",
]
