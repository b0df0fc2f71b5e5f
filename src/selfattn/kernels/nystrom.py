"""Nyströmformer: softmax attention by the Nyström method (Xiong et al., AAAI 2021,
"Nyströmformer: A Nyström-Based Algorithm for Approximating Self-Attention").

Pick m landmarks — the means of m contiguous segments of the queries (Q̃) and of the keys
(K̃) — and rebuild the ``T × S`` softmax matrix from three small ones::

    softmax(QKᵀ/√D) ≈ softmax(QK̃ᵀ/√D) · pinv(softmax(Q̃K̃ᵀ/√D)) · softmax(Q̃Kᵀ/√D)
                       (T × m)            (m × m)                   (m × S)

multiplied right to left against V. The pseudo-inverse is the paper's iteration
``Z ← ¼ Z (13I − AZ (15I − AZ (7I − AZ)))`` from ``Z₀ = Aᵀ / (‖A‖₁ ‖A‖∞)``. With m = L
landmarks every segment is one token and the product is exact (given enough iterations).
Cost O(L·m·(D + Dv) + m³) time, O(L·m + m²) memory. Its attention map is the ``T × S``
product itself (plus the convolution's band, when it has one), formed only when asked for.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import Tensor, nn

from selfattn.attention.functional import zero_padding
from selfattn.attention.kernel import AttentionKernel, AttentionRequest, Capability
from selfattn.kernels.base import register_kernel

__all__ = ["NystromKernel", "iterative_pinv", "segment_means"]


def segment_means(
    x: Tensor, num_segments: int, padding: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Means of ``num_segments`` contiguous segments of ``x (B, H, L, E)`` along L.

    Segment s holds positions j with ``⌊j·m/L⌋ = s`` (equal sizes when m divides L).
    Padded positions (``padding (B, L)``, True at padding) are left out of the means.

    Returns:
        ``(means (B, H, m, E), empty (B, m))``: ``empty`` marks segments with no real
        position (their mean is 0).
    """
    length = x.shape[2]
    segment = torch.arange(length, device=x.device) * num_segments // length  # (L,)
    keep = x.new_ones(x.shape[0], length)
    if padding is not None:
        keep = (~padding).to(x.dtype)
        x = x.masked_fill(padding[:, None, :, None], 0.0)
    sums = x.new_zeros(*x.shape[:2], num_segments, x.shape[-1]).index_add(2, segment, x)
    counts = keep.new_zeros(x.shape[0], num_segments).index_add(1, segment, keep)
    means = sums / counts.clamp_min(1.0)[:, None, :, None]
    return means, counts == 0


def iterative_pinv(a: Tensor, iterations: int = 6) -> Tensor:
    """Moore–Penrose pseudo-inverse of each ``(…, m, m)`` matrix by the Nyströmformer's
    iteration (Razavi et al. 2014), started from ``Aᵀ / (‖A‖₁ ‖A‖∞)``."""
    identity = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    max_col = a.abs().sum(dim=-2).amax(dim=-1)
    max_row = a.abs().sum(dim=-1).amax(dim=-1)
    z = a.transpose(-1, -2) / (max_col * max_row).clamp_min(1e-30)[..., None, None]
    for _ in range(iterations):
        az = a @ z
        z = 0.25 * z @ (13 * identity - az @ (15 * identity - az @ (7 * identity - az)))
    return z


def _masked_softmax(scores: Tensor, excluded: Tensor | None) -> Tensor:
    """Softmax over the last dim with ``excluded`` (broadcastable, True = left out) at 0."""
    if excluded is None:
        return torch.softmax(scores, dim=-1)
    scores = scores.masked_fill(excluded, -math.inf)
    nothing = excluded.all(dim=-1, keepdim=True)
    return torch.softmax(scores.masked_fill(nothing, 0.0), dim=-1).masked_fill(excluded, 0.0)


@register_kernel
class NystromKernel(AttentionKernel):
    """Softmax attention approximated through m segment-mean landmarks (Xiong et al. 2021).

    Padded keys are left out of the key landmarks and of the softmax over keys; with
    T = S (self-attention) the padded positions are also left out of the query landmarks.
    A segment with no real token is a landmark that is left out entirely.

    Cost O(L·m·(D + Dv) + m³·iterations) time, O(L·m + m²) memory.

    Args:
        num_landmarks: m (capped at the sequence length).
        pinv_iterations: iterations of the pseudo-inverse (6 in the paper).
        conv_kernel_size: > 0 adds the paper's optional skip: a depthwise convolution of
            the values along the sequence, one filter per head (needs ``num_heads``, T = S).
        num_heads: H, for the convolution.
    """

    name = "nystrom"
    size_option = "num_landmarks"
    supports_weights = True  # the implied T × S product, formed only when asked for
    reasons: ClassVar[dict[Capability, str]] = {
        "causal": "its landmarks average whole segments, the future included",
        "cache": "its landmarks average whole segments, the future included",
        "mask": "it never forms the (T, S) scores a mask would change",
        "scores": "it approximates scaled-dot softmax through landmarks",
    }

    def __init__(
        self,
        num_landmarks: int = 64,
        pinv_iterations: int = 6,
        conv_kernel_size: int = 0,
        num_heads: int | None = None,
    ) -> None:
        super().__init__()
        if num_landmarks < 1 or pinv_iterations < 1:
            raise ValueError(
                f"num_landmarks and pinv_iterations must be >= 1, "
                f"got {num_landmarks}, {pinv_iterations}"
            )
        self.num_landmarks = num_landmarks
        self.pinv_iterations = pinv_iterations
        self.conv: nn.Conv2d | None = None
        if conv_kernel_size > 0:
            if num_heads is None:
                raise ValueError("nystrom's convolution (conv_kernel_size > 0) needs num_heads")
            if conv_kernel_size % 2 == 0:
                raise ValueError(f"conv_kernel_size must be odd, got {conv_kernel_size}")
            self.conv = nn.Conv2d(
                num_heads,
                num_heads,
                kernel_size=(conv_kernel_size, 1),
                padding=(conv_kernel_size // 2, 0),
                groups=num_heads,
                bias=False,
            )

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, request: AttentionRequest
    ) -> tuple[Tensor, Tensor | None]:
        num_queries, num_keys = q.shape[2], k.shape[2]
        pad = request.key_padding_mask
        if self.conv is not None and num_queries != num_keys:
            raise ValueError(f"nystrom's convolution needs T == S, got {num_queries}, {num_keys}")
        if pad is not None:  # a weight of 0 times a padded NaN is still NaN
            k, v = zero_padding(k, pad), zero_padding(v, pad)
        to_landmarks, inverse, from_keys = self._factors(q, k, pad)
        out = to_landmarks @ (inverse @ (from_keys @ v))  # right to left: never T × S
        if self.conv is not None:
            out = out + self.conv(v)
        if not request.need_weights:
            return out, None
        weights = to_landmarks @ inverse @ from_keys  # (B, H, T, S)
        if self.conv is not None:
            weights = weights + self._conv_band(num_keys, weights.dtype, weights.device)
            if pad is not None:  # the convolution met zeros there: the same output
                weights = weights.masked_fill(pad[:, None, None, :], 0.0)
        return out, weights

    def _factors(self, q: Tensor, k: Tensor, pad: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """The three factors of the approximation: ``(T, m)``, ``(m, m)`` pseudo-inverse,
        ``(m, S)`` (each per batch and head)."""
        num_queries, num_keys = q.shape[2], k.shape[2]
        scale = 1.0 / math.sqrt(q.shape[-1])
        m = min(self.num_landmarks, num_queries, num_keys)
        query_padding = pad if num_queries == num_keys else None  # self-attention
        q_land, q_empty = segment_means(q, m, query_padding)  # (B, H, m, D), (B, m)
        k_land, k_empty = segment_means(k, m, pad)
        keys_out = landmarks_out = None
        if pad is not None:
            keys_out = pad[:, None, None, :]
            landmarks_out = k_empty[:, None, None, :]

        kernel_1 = _masked_softmax(q @ k_land.transpose(-1, -2) * scale, landmarks_out)  # (T, m)
        kernel_2 = _masked_softmax(q_land @ k_land.transpose(-1, -2) * scale, landmarks_out)
        # Empty query landmarks: zero rows, which the pseudo-inverse keeps out.
        kernel_2 = kernel_2.masked_fill(q_empty[:, None, :, None], 0.0)
        kernel_3 = _masked_softmax(q_land @ k.transpose(-1, -2) * scale, keys_out)  # (m, S)
        return kernel_1, iterative_pinv(kernel_2, self.pinv_iterations), kernel_3

    def _conv_band(self, length: int, dtype: torch.dtype, device: torch.device) -> Tensor:
        """``(H, L, L)``: the depthwise convolution along the sequence as a matrix on V,
        ``conv(v) = band @ v`` (tap t of head h on the diagonal t − kernel_size // 2)."""
        assert self.conv is not None
        taps = self.conv.weight[:, 0, :, 0].to(dtype)  # (H, kernel_size)
        half = taps.shape[1] // 2
        band = torch.zeros(taps.shape[0], length, length, dtype=dtype, device=device)
        for t in range(taps.shape[1]):
            offset = t - half  # out_i takes v_{i + offset}
            if abs(offset) < length:
                ones = torch.ones(length - abs(offset), dtype=dtype, device=device)
                band = band + taps[:, t, None, None] * torch.diag(ones, diagonal=offset)
        return band
