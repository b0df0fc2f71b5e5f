"""Task models for one label per vector and one label per set (lecture 000, §"What is the output").

>>> model = build_model(ModelConfig(), task="token", vocab_size=1000,
...                     char_vocab_size=None, feature_dim=None, num_labels=45)
>>> logits = model(batch)  # (B, L, 45)
"""

from __future__ import annotations

from selfattn.tasks.config import Architecture, ModelConfig, Pooling
from selfattn.tasks.embedding import CharEncoder, InputEmbedding
from selfattn.tasks.encoders import (
    ENCODERS,
    BiGRUEncoder,
    CNNEncoder,
    FCEncoder,
    SequenceEncoder,
    TransformerSequenceEncoder,
    WindowFCEncoder,
    build_encoder,
)
from selfattn.tasks.heads import (
    POOLINGS,
    AttentionPooling,
    FirstPooling,
    MeanPooling,
    SequenceClassifier,
    TokenClassifier,
)
from selfattn.tasks.model import TaskModel, TaskSpec, build_model, build_model_from_spec

__all__ = [
    "ENCODERS",
    "POOLINGS",
    "Architecture",
    "AttentionPooling",
    "BiGRUEncoder",
    "CNNEncoder",
    "CharEncoder",
    "FCEncoder",
    "FirstPooling",
    "InputEmbedding",
    "MeanPooling",
    "ModelConfig",
    "Pooling",
    "SequenceClassifier",
    "SequenceEncoder",
    "TaskModel",
    "TaskSpec",
    "TokenClassifier",
    "TransformerSequenceEncoder",
    "WindowFCEncoder",
    "build_encoder",
    "build_model",
    "build_model_from_spec",
]
