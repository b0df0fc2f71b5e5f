"""selfattn: self-attention models on any vector set — text, speech, images, graphs."""

from __future__ import annotations

from selfattn import runtime

# Before anything imports torch: OpenMP reads its spin setting once, when torch loads it
# (selfattn.runtime explains why and what; a variable you set yourself is left alone).
runtime.prepare_environment()

from selfattn.attention import AdditiveScore, MultiHeadAttention, attention  # noqa: E402

__version__ = "0.1.0"

__all__ = ["AdditiveScore", "MultiHeadAttention", "__version__", "attention"]
