"""Performer: FAVOR+ random features for softmax attention (Choromanski et al., ICLR 2021,
"Rethinking Attention with Performers").

The softmax kernel is an expectation over Gaussian ``w``::

    exp(qᵀk) = E_w[ exp(wᵀq − |q|²/2) · exp(wᵀk − |k|²/2) ],

so with m samples ``φ(x) = exp(Wx − |x|²/2) / √m`` (positive, unlike sin/cos features,
hence stable denominators) gives ``φ(q)ᵀφ(k) ≈ exp(qᵀk)``. Inputs are scaled by
``D^(-1/4)`` so that the product estimates ``exp(q·k/√D)``, and the rows of W are drawn in
orthogonal blocks (norms from the chi(D) distribution, as Gaussian rows have), which lowers
the variance. Then attention is linear attention with these features
(:func:`~selfattn.kernels.linear.linear_attention`), whose numerator and denominator
are unbiased estimates of softmax attention's: time O(L·m·(D + Dv)), memory
O(L·m + m·Dv) (causal: the chunked prefix sums of :mod:`selfattn.kernels.linear`). Its
attention map is the matrix these features imply,
:func:`~selfattn.kernels.linear.linear_attention_weights`, formed only when asked for.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import Tensor

from selfattn.attention.functional import zero_padding
from selfattn.attention.kernel import AttentionRequest, Capability
from selfattn.kernels.base import register_kernel
from selfattn.kernels.linear import FeatureMapKernel

__all__ = ["PerformerKernel", "favor_features", "orthogonal_gaussian"]


def orthogonal_gaussian(
    num_features: int, dim: int, *, generator: torch.Generator | None = None
) -> Tensor:
    """``(num_features, dim)`` random rows, orthogonal within each block of ``dim`` rows,
    each row's norm distributed as a Gaussian vector's (chi with ``dim`` degrees)."""
    blocks = []
    for _ in range(-(-num_features // dim)):
        gaussian = torch.randn(dim, dim, generator=generator, dtype=torch.float64)
        q, r = torch.linalg.qr(gaussian)
        blocks.append((q * torch.sign(torch.diagonal(r))).T)  # sign fix: Haar-distributed
    directions = torch.cat(blocks)[:num_features]
    norms = torch.randn(num_features, dim, generator=generator, dtype=torch.float64).norm(dim=1)
    return (directions * norms[:, None]).float()


def favor_features(
    x: Tensor,
    projection: Tensor,
    *,
    is_query: bool,
    key_padding_mask: Tensor | None = None,
) -> Tensor:
    """Positive random features ``φ(x) = exp(Wx' − |x'|²/2 − c) / √m``, ``x' = x·D^(-1/4)``.

    The constant c (the largest exponent) keeps exp from overflowing and cancels between
    numerator and denominator: per query for queries, one per (batch, head) over the
    non-padded keys for keys. In causal attention that key constant includes later keys,
    which can change earlier outputs only by rounding (or by underflow in extreme cases).

    Args:
        x: ``(B, H, L, D)``.
        projection: W, ``(m, D)``.
        is_query: choose the query or the key stabiliser.
        key_padding_mask: ``(B, L)``, True at padding, for keys: excluded from c.

    Returns:
        ``(B, H, L, m)``.
    """
    x = x * x.shape[-1] ** -0.25
    exponent = x @ projection.to(x.dtype).T - (x * x).sum(dim=-1, keepdim=True) / 2
    if is_query:
        shift = exponent.amax(dim=-1, keepdim=True)
    else:
        kept = exponent
        if key_padding_mask is not None:
            kept = exponent.masked_fill(key_padding_mask[:, None, :, None], -math.inf)
        shift = kept.amax(dim=(-2, -1), keepdim=True)
        shift = shift.masked_fill(torch.isinf(shift), 0.0)  # every key padded
    return torch.exp(exponent - shift.detach()) / math.sqrt(projection.shape[0])


@register_kernel
class PerformerKernel(FeatureMapKernel):
    """Softmax attention approximated by FAVOR+ (Choromanski et al. 2021).

    Cost O(L·m·(D + Dv)) time, O(L·m + m·Dv) memory for m random features. The error
    shrinks like 1/√m, but the variance grows like ``exp(|q + k|²/√D)``: queries and keys
    of large norm need many features. The features are drawn once, from a generator
    seeded with ``seed``, into the buffer ``projection`` (saved with the model);
    :meth:`redraw` draws new ones (the paper redraws periodically during training).

    Args:
        head_dim: D (``build_kernel`` passes it).
        num_features: m.
        chunk_size: positions per chunk of the causal form.
        seed: seeds the feature generator.
        eps: floor of the denominator (0: none; a query with no key still gets 0).
    """

    name = "performer"
    size_option = "num_features"
    reasons: ClassVar[dict[Capability, str]] = {
        **FeatureMapKernel.reasons,
        "scores": "it approximates scaled-dot softmax with random features",
    }

    projection: Tensor

    def __init__(
        self,
        head_dim: int | None = None,
        num_features: int = 256,
        chunk_size: int = 64,
        seed: int = 0,
        eps: float = 0.0,
    ) -> None:
        super().__init__()
        if head_dim is None:
            raise ValueError("attention kernel 'performer' needs head_dim (the size D of q, k)")
        if num_features < 1:
            raise ValueError(f"num_features must be >= 1, got {num_features}")
        self.head_dim = head_dim
        self.num_features = num_features
        self.chunk_size = chunk_size
        self.eps = eps
        self._generator = torch.Generator().manual_seed(seed)
        self.register_buffer("projection", torch.empty(num_features, head_dim))
        self.redraw()

    @torch.no_grad()
    def redraw(self) -> None:
        """Draw new random features (the next ones from the seeded generator)."""
        drawn = orthogonal_gaussian(self.num_features, self.head_dim, generator=self._generator)
        self.projection.copy_(drawn)

    def features(self, q: Tensor, k: Tensor, request: AttentionRequest) -> tuple[Tensor, Tensor]:
        """FAVOR+ features of ``q`` and ``k`` (padded keys zeroed first)."""
        if q.shape[-1] != self.head_dim:
            raise ValueError(f"performer built for head_dim {self.head_dim}, got {q.shape[-1]}")
        pad = request.key_padding_mask
        if pad is not None:  # exp(NaN) would leak through the gradient
            k = zero_padding(k, pad)
        phi_q = favor_features(q, self.projection, is_query=True)
        return phi_q, favor_features(k, self.projection, is_query=False, key_padding_mask=pad)
