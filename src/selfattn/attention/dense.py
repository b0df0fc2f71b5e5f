"""The dense kernel: the lecture's attention exactly as written (lecture 000, §Self-attention,
matrix form), ``O = f(score(Q, K) + bias) · V``, through :func:`selfattn.attention.attention`
— PyTorch's fused ``scaled_dot_product_attention`` when it can, the chunked eager formula
otherwise. It has every capability; every other kernel is measured against it.

It is :class:`~selfattn.attention.MultiHeadAttention`'s default, so it lives in the
attention layer; :mod:`selfattn.kernels.dense` registers it as ``"dense"``.
"""

from __future__ import annotations

from torch import Tensor

from selfattn.attention.dropout import DROPOUT_MASKS, DropoutMasks
from selfattn.attention.functional import attention
from selfattn.attention.kernel import AttentionKernel, AttentionRequest

__all__ = ["DenseKernel"]


class DenseKernel(AttentionKernel):
    """The lecture's attention as written, :func:`selfattn.attention.attention`: PyTorch's
    fused ``scaled_dot_product_attention`` when it can, the chunked eager formula
    otherwise. It supports everything — every other kernel is measured against it.

    Args:
        dropout: dropout probability on the attention weights, in training only.
        dropout_masks: how that dropout draws its masks, ``"bernoulli"`` (PyTorch's) or
            ``"uniform"`` (:mod:`selfattn.attention.dropout`).
    """

    name = "dense"
    exact = True
    quadratic = True
    supports_causal = True
    supports_mask = True
    supports_window = True
    supports_weights = True
    supports_scores = True
    supports_cache = True
    supports_cross = True
    supports_gqa = True

    def __init__(self, dropout: float = 0.0, dropout_masks: DropoutMasks = "bernoulli") -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if dropout_masks not in DROPOUT_MASKS:
            raise ValueError(
                f"dropout_masks must be one of {', '.join(DROPOUT_MASKS)}, got {dropout_masks!r}"
            )
        self.dropout = dropout
        self.dropout_masks: DropoutMasks = dropout_masks

    def extra_repr(self) -> str:
        masks = (
            "" if self.dropout_masks == "bernoulli" else f", dropout_masks={self.dropout_masks!r}"
        )
        return f"dropout={self.dropout}{masks}"

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, request: AttentionRequest
    ) -> tuple[Tensor, Tensor | None]:
        return attention(
            q,
            k,
            v,
            score=request.score,
            normalizer=request.normalizer,
            mask=request.mask,
            key_padding_mask=request.key_padding_mask,
            causal=request.causal,
            window=request.window,
            include_self=request.include_self,
            need_weights=request.need_weights,
            dropout=self.dropout if self.training else 0.0,
            dropout_masks=self.dropout_masks,
        )
