"""Linformer: low-rank attention by projecting along the sequence (Wang et al. 2020,
"Linformer: Self-Attention with Linear Complexity").

The ``T × S`` attention matrix is close to low rank, so project the S keys and values down
to k ≪ S rows with learned ``(k, max_len)`` matrices E and F before attending::

    out = softmax(Q (E K)ᵀ / √D) · (F V)          # (T × k) weights over k mixed keys

Cost O(T·k·D + S·k·(D + Dv)) time and O(T·k) memory. The projections fix the longest
input (``max_len``): a shorter one uses the first S columns. Mixing positions forbids
causal attention (a projected key summarises the future too), and its softmax weights are
over the k mixtures rather than over positions, so it refuses both, and a KV cache.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from selfattn.attention.functional import attention, zero_padding
from selfattn.attention.kernel import AttentionKernel, AttentionRequest, Capability
from selfattn.kernels.base import register_kernel

__all__ = ["LinformerKernel"]


@register_kernel
class LinformerKernel(AttentionKernel):
    """Softmax attention over ``proj_dim`` learned mixtures of the keys (Wang et al. 2020).

    Padded keys and values are zeroed before the projection, so they contribute nothing
    to the mixtures. Cost O(L·k·D) time, O(L·k) memory for k = ``proj_dim``.

    Args:
        max_len: the longest key sequence S (``build_kernel`` passes it).
        proj_dim: k, the number of projected keys.
        share_kv: one projection for keys and values (E = F), as the paper's variant.
    """

    name = "linformer"
    size_option = "proj_dim"
    reasons: ClassVar[dict[Capability, str]] = {
        "causal": "each of its projected keys mixes every position, the future included",
        "weights": "it attends over {kernel.proj_dim} projected keys, not over positions",
        "cache": "each of its projected keys mixes every position, the future included",
        "scores": "it is scaled-dot softmax over its projected keys",
        "mask": "it attends over {kernel.proj_dim} projected keys, not over positions",
    }

    def __init__(
        self, max_len: int | None = None, proj_dim: int = 256, share_kv: bool = False
    ) -> None:
        super().__init__()
        if max_len is None:
            raise ValueError("attention kernel 'linformer' needs max_len (the longest sequence)")
        if max_len < 1 or proj_dim < 1:
            raise ValueError(f"max_len and proj_dim must be >= 1, got {max_len}, {proj_dim}")
        self.max_len = max_len
        self.proj_dim = proj_dim
        # Entries N(0, 1/k): the Johnson–Lindenstrauss projection of the paper's analysis.
        self.key_proj = nn.Parameter(torch.randn(proj_dim, max_len) / proj_dim**0.5)
        self.value_proj = (
            self.key_proj
            if share_kv
            else nn.Parameter(torch.randn(proj_dim, max_len) / proj_dim**0.5)
        )

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, request: AttentionRequest
    ) -> tuple[Tensor, Tensor | None]:
        num_keys = k.shape[2]
        if num_keys > self.max_len:
            raise ValueError(
                f"linformer was built for sequences up to max_len={self.max_len}, "
                f"got {num_keys} keys"
            )
        pad = request.key_padding_mask
        if pad is not None:  # the projections mix every key, padded or not
            k, v = zero_padding(k, pad), zero_padding(v, pad)
        key_proj = self.key_proj[:, :num_keys].to(k.dtype)  # (k, S)
        value_proj = self.value_proj[:, :num_keys].to(v.dtype)
        out, _ = attention(q, key_proj @ k, value_proj @ v)  # over (B, H, k, D) mixtures
        return out, None
