"""A stack of Conformer blocks (Gulati et al. 2020) with
:class:`~selfattn.models.Encoder`'s interface: the lecture's hint for speech
(self-attention for global context, convolution for local)."""

from __future__ import annotations

from selfattn.blocks.conformer import ConformerBlock
from selfattn.models.encoder import BlockStack


class Conformer(BlockStack):
    """A stack of :class:`~selfattn.blocks.ConformerBlock`, called like
    :class:`~selfattn.models.Encoder`.

    The input is already a sequence of E-dimensional vectors (e.g. log-mel frames
    projected to E; the paper first subsamples them 4× with strided convolutions).
    Every block ends in a LayerNorm, so by default the stack adds none. Without
    ``config.positional`` the convolutions alone carry order.

    Args:
        config: every option of the stack and its blocks; ``conv_kernel_size`` and
            ``conv_norm`` shape the convolutions, ``attention="window"`` gives truncated
            attention for long utterances.
    """

    block_type = ConformerBlock

    def has_final_norm(self) -> bool:
        # Every Conformer block ends in a LayerNorm: a final one only when asked for.
        return bool(self.config.final_norm)
