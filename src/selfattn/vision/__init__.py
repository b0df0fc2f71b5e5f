"""Images as vector sets (lecture 000, §Self-attention for Image; §Self-attention v.s. CNN).

Pixels or ViT patches become vectors (:mod:`~selfattn.vision.embed`); their (row, column)
is encoded by :mod:`selfattn.positional.grid`; and :func:`attention_from_conv` shows a
convolution is self-attention restricted to a receptive field (Cordonnier et al. 2020).

    >>> patches = PatchEmbedding(3, 192, patch_size=16, cls_token=True)
    >>> x = patches(torch.randn(2, 3, 224, 224))  # (2, 1 + 14·14, 192)
"""

from __future__ import annotations

from selfattn.vision.conv import ConvAsAttention, attention_from_conv
from selfattn.vision.embed import (
    PatchEmbedding,
    PixelEmbedding,
    check_image,
    image_to_vectors,
    vectors_to_image,
)

__all__ = [
    "ConvAsAttention",
    "PatchEmbedding",
    "PixelEmbedding",
    "attention_from_conv",
    "check_image",
    "image_to_vectors",
    "vectors_to_image",
]
