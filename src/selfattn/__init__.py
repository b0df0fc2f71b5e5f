"""selfattn: self-attention models on any vector set — text, speech, images, graphs."""

from __future__ import annotations

from selfattn.attention import AdditiveScore, MultiHeadAttention, attention

__version__ = "0.1.0"

__all__ = ["AdditiveScore", "MultiHeadAttention", "__version__", "attention"]
