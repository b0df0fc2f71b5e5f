"""One decoder step at a time, with or without a key/value cache (lecture 001 §3).

The autoregressive decoder starts from BOS and feeds each emitted token back as the next
input. Step t's self-attention needs the keys and values of positions 0 … t; a
:class:`~selfattn.attention.cache.DecoderCache` keeps them, so each step runs the decoder
on one new position only. Without a cache every step re-runs the decoder over the whole
prefix: O(t) work per step instead of O(1) projections, but it is the plain definition,
kept as the reference the cached path is tested against and as the benchmark's baseline.
"""

from __future__ import annotations

import torch
from torch import Tensor

from selfattn.attention.cache import DecoderCache
from selfattn.models.seq2seq import BOS_ID, EncodedSource, Seq2SeqTransformer


class IncrementalDecoder:
    """The state of R decoder rows that grow by one token per step.

    Call :meth:`log_probs` for the next-token distribution, then :meth:`append` the chosen
    tokens; :meth:`select` keeps or reorders rows (beam re-ranking, dropping finished rows).

    Args:
        model: the encoder–decoder (in eval mode: dropout would make steps random).
        encoded: ``(R, S, E)`` sources, one row per decoder row.
        num_extended: copy mode: the batch's out-of-vocabulary extension.
        use_cache: keep keys and values (True) or recompute the prefix every step.

    Attributes:
        tokens: ``(R, t)`` the ids appended so far (BOS excluded).
        encoded: the sources, kept aligned with the rows.
    """

    def __init__(
        self,
        model: Seq2SeqTransformer,
        encoded: EncodedSource,
        *,
        num_extended: int = 0,
        use_cache: bool = True,
    ) -> None:
        self.model, self.encoded, self.num_extended = model, encoded, num_extended
        rows, device = encoded.memory.shape[0], encoded.memory.device
        self.tokens = torch.empty(rows, 0, dtype=torch.long, device=device)
        self.cache = DecoderCache() if use_cache else None
        self._bos = torch.full((rows, 1), BOS_ID, dtype=torch.long, device=device)

    @property
    def num_rows(self) -> int:
        """R, the rows decoded together."""
        return int(self.tokens.shape[0])

    def log_probs(self) -> Tensor:
        """``(R, V)`` log-probabilities of the token after BOS + :attr:`tokens`.

        Raises:
            RuntimeError: called twice without :meth:`append` in between (cached mode).
        """
        if self.cache is None:
            inputs = torch.cat([self._bos, self.tokens], dim=1)  # the whole prefix
        else:
            if self.cache.offset != self.tokens.shape[1]:
                raise RuntimeError("IncrementalDecoder: append() a token before the next step")
            inputs = self.tokens[:, -1:] if self.tokens.shape[1] else self._bos
        out = self.model.decode(
            inputs, self.encoded, cache=self.cache, num_extended=self.num_extended
        )
        return out.log_probs[:, -1]

    def append(self, tokens: Tensor) -> None:
        """Extend every row by its token ``(R,)``."""
        self.tokens = torch.cat([self.tokens, tokens.unsqueeze(1)], dim=1)

    def select(self, index: Tensor) -> None:
        """Keep rows ``index`` ``(R',)`` (long): repeat, reorder or drop rows everywhere."""
        self.tokens = self.tokens.index_select(0, index)
        self.encoded = self.encoded.index_select(index)
        self._bos = self._bos.index_select(0, index)
        if self.cache is not None:
            self.cache.reorder(index)
