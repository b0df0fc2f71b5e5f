"""Normalisers α' = f(α) over the keys (lecture 000: "softmax … or ReLU, other activations").

A normaliser maps scores ``(…, S)`` to weights of the same shape. Masked keys arrive as
``-inf`` and leave as exactly 0 whatever the normaliser does with them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

NormalizerFn = Callable[[Tensor], Tensor]


def softmax(scores: Tensor) -> Tensor:
    """α'_{i,j} = exp(α_{i,j}) / Σ_j exp(α_{i,j}); computed in float32 for half inputs."""
    if scores.dtype in (torch.float16, torch.bfloat16):
        return torch.softmax(scores.float(), dim=-1).to(scores.dtype)
    return torch.softmax(scores, dim=-1)


NORMALIZERS: dict[str, NormalizerFn] = {
    "softmax": softmax,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
}


def resolve_normalizer(normalizer: str | NormalizerFn) -> NormalizerFn:
    """The normaliser for a registry name or a callable; a clear error otherwise."""
    if callable(normalizer):
        return normalizer
    fn = NORMALIZERS.get(normalizer)
    if fn is None:
        raise ValueError(
            f"unknown normalizer {normalizer!r}; choose one of {sorted(NORMALIZERS)} or a callable"
        )
    return fn
