"""Task heads for two of the lecture's three output types (lecture 000, §"What is the output").

* one label per vector (POS tagging, frame classification): :class:`TokenClassifier`, a
  linear layer on every position;
* one label per sequence (sentiment, speaker): :class:`SequenceClassifier`, which pools
  the L vectors into one (``mean``, ``first``, learned-query ``attention``, or ``cls``:
  the output at a learned [CLS] vector put before the sequence, :class:`ClsToken`) first.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class TokenClassifier(nn.Module):
    """Scores for every position: ``(B, L, D) → (B, L, num_labels)``.

    Args:
        input_dim: D, the encoder's output size.
        num_labels: number of classes.
        dropout: on the encoder's output.
    """

    def __init__(self, input_dim: int, num_labels: int, *, dropout: float = 0.0) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(input_dim, num_labels)

    def forward(self, h: Tensor, key_padding_mask: Tensor) -> Tensor:
        """Args:
            h: ``(B, L, D)``.
            key_padding_mask: ``(B, L)``, True at padding (its scores are meaningless).

        Returns:
            ``(B, L, num_labels)`` logits.
        """
        return self.proj(self.dropout(h))


class MeanPooling(nn.Module):
    """The average of the real positions' vectors."""

    def __init__(self, input_dim: int) -> None:
        super().__init__()

    def forward(self, h: Tensor, key_padding_mask: Tensor) -> Tensor:
        """``(B, L, D), (B, L) → (B, D)``."""
        keep = (~key_padding_mask).to(h.dtype)[..., None]  # (B, L, 1)
        return (h * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)


class FirstPooling(nn.Module):
    """The first position's vector (a CLS token's, when the data put one there)."""

    def __init__(self, input_dim: int) -> None:
        super().__init__()

    def forward(self, h: Tensor, key_padding_mask: Tensor) -> Tensor:
        """``(B, L, D), (B, L) → (B, D)``."""
        return h[:, 0]


class ClsPooling(FirstPooling):
    """The output at the learned [CLS] vector that :class:`ClsToken` put first (ViT,
    Dosovitskiy et al. 2021; BERT, Devlin et al. 2019): attention decides what it gathers."""


class ClsToken(nn.Module):
    """A learned vector put before every sequence, whose encoder output the head reads.

    Args:
        embed_dim: E.
    """

    def __init__(self, embed_dim: int) -> None:
        super().__init__()
        # Small, as ViT's position and class embeddings: it starts near the input scale.
        self.vector = nn.Parameter(torch.randn(embed_dim) * 0.02)

    def forward(self, x: Tensor, key_padding_mask: Tensor) -> tuple[Tensor, Tensor]:
        """``(B, L, E), (B, L) → (B, 1 + L, E), (B, 1 + L)``: [CLS] first, never padding."""
        cls = self.vector.to(x.dtype).expand(x.shape[0], 1, -1)
        real = key_padding_mask.new_zeros(key_padding_mask.shape[0], 1)
        return torch.cat([cls, x], dim=1), torch.cat([real, key_padding_mask], dim=1)


class AttentionPooling(nn.Module):
    """Attention with one learned query q over the real positions.

    α_i = softmax_i(q · W h_i / √D) over non-padding i; the pooled vector is Σ_i α_i h_i.
    """

    def __init__(self, input_dim: int) -> None:
        super().__init__()
        self.key_proj = nn.Linear(input_dim, input_dim)
        self.query = nn.Parameter(torch.randn(input_dim) / math.sqrt(input_dim))

    def forward(self, h: Tensor, key_padding_mask: Tensor) -> Tensor:
        """``(B, L, D), (B, L) → (B, D)``."""
        scores = self.key_proj(h) @ self.query / math.sqrt(h.shape[-1])  # (B, L)
        scores = scores.masked_fill(key_padding_mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # all-padding row → 0
        return (weights[..., None] * h).sum(dim=1)


#: Every pooling by name; the contract tests iterate over it.
POOLINGS: dict[str, type[nn.Module]] = {
    "mean": MeanPooling,
    "first": FirstPooling,
    "attention": AttentionPooling,
    "cls": ClsPooling,
}


class SequenceRegressor(nn.Module):
    """One number per sequence: pool, then a linear layer to a standardised value that is
    scaled back, ``target_mean + target_std · z`` (the training targets' mean and standard
    deviation, so the layer learns values near 0 ± 1 whatever the targets' units).

    Args:
        input_dim: D, the encoder's output size.
        pooling: a key of :data:`POOLINGS`.
        dropout: on the pooled vector.
        target_mean: mean of the training targets.
        target_std: their standard deviation (> 0).
    """

    def __init__(
        self,
        input_dim: int,
        *,
        pooling: str = "mean",
        dropout: float = 0.0,
        target_mean: float = 0.0,
        target_std: float = 1.0,
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
        if target_std <= 0:
            raise ValueError(f"target_std must be positive, got {target_std}")
        self.pool = POOLINGS[pooling](input_dim)
        self.dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(input_dim, 1)
        self.target_mean, self.target_std = target_mean, target_std

    def forward(self, h: Tensor, key_padding_mask: Tensor) -> Tensor:
        """``(B, L, D), (B, L) → (B,)`` predictions in the targets' units."""
        z = self.proj(self.dropout(self.pool(h, key_padding_mask))).squeeze(-1)
        return self.target_mean + self.target_std * z


class SequenceClassifier(nn.Module):
    """One score vector per sequence: pool, then a linear layer.

    Args:
        input_dim: D, the encoder's output size.
        num_labels: number of classes.
        pooling: a key of :data:`POOLINGS`.
        dropout: on the pooled vector.
    """

    def __init__(
        self, input_dim: int, num_labels: int, *, pooling: str = "mean", dropout: float = 0.0
    ) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
        self.pool = POOLINGS[pooling](input_dim)
        self.dropout = nn.Dropout(dropout)
        self.proj = nn.Linear(input_dim, num_labels)

    def forward(self, h: Tensor, key_padding_mask: Tensor) -> Tensor:
        """Args:
            h: ``(B, L, D)``.
            key_padding_mask: ``(B, L)``, True at padding.

        Returns:
            ``(B, num_labels)`` logits.
        """
        return self.proj(self.dropout(self.pool(h, key_padding_mask)))
