"""One decoder step at a time, with or without a key/value cache (lecture 001 §3).

The autoregressive decoder starts from BOS and feeds each emitted token back as the next
input. Step t's self-attention needs the keys and values of positions 0 … t; a
:class:`~selfattn.attention.cache.DecoderCache` keeps them, so each step runs the decoder
on one new position only. The cache is preallocated for the whole decode (BOS and
``max_len`` tokens) and written in place, and the emitted ids live in one preallocated
buffer too, so a step allocates no growing tensor. Without a cache every step re-runs the
decoder over the whole prefix: O(t) work per step instead of O(1) projections, but it is
the plain definition, kept as the reference the cached path is tested against and as the
benchmark's baseline.

The cache is whatever the model keeps between steps (:meth:`EncoderDecoder.new_cache`): a
Transformer's key/value cache, or an RNN decoder's recurrent state
(:class:`~selfattn.models.rnn_seq2seq.RecurrentState`), which is O(1) per step by nature.
Both are rows that :meth:`IncrementalDecoder.select` reorders, so greedy, beam search and
sampling are written once for both families.
"""

from __future__ import annotations

import torch
from torch import Tensor

from selfattn.attention.cache import DecoderCache, RowMoves
from selfattn.decoding.lean import lean_step
from selfattn.models.encoder_decoder import DecodingState, EncoderDecoder
from selfattn.models.seq2seq_outputs import EncodedSource
from selfattn.specials import BOS_ID


class IncrementalDecoder:
    """The state of R decoder rows that grow by one token per step.

    Call :meth:`log_probs` for the next-token distribution, then :meth:`append` the chosen
    tokens; :meth:`select` keeps or reorders rows (beam re-ranking, dropping finished rows).

    Args:
        model: the encoder–decoder (in eval mode: dropout would make steps random).
        encoded: ``(R, S, E)`` sources, one row per decoder row.
        max_len: most tokens that will be appended (default ``model.max_len``); the
            cache and the id buffer are sized for BOS and ``max_len`` tokens.
        num_extended: copy mode: the batch's out-of-vocabulary extension.
        use_cache: keep the model's decoding state (keys and values, or the recurrent
            state) between steps (True) or recompute the prefix every step.
        group: the rows come in groups of this many consecutive rows with one source
            (beam search's beams of one example), and every :meth:`select` keeps groups
            whole; the lean step then attends to a source once per group.

    Attributes:
        encoded: the sources, kept aligned with the rows.
    """

    def __init__(
        self,
        model: EncoderDecoder,
        encoded: EncodedSource,
        *,
        max_len: int | None = None,
        num_extended: int = 0,
        use_cache: bool = True,
        group: int = 1,
    ) -> None:
        max_len = model.max_len if max_len is None else max_len
        if not 0 <= max_len <= model.max_len:
            raise ValueError(f"max_len must be in 0…{model.max_len} (the model's), got {max_len}")
        self.model, self.encoded, self.num_extended = model, encoded, num_extended
        rows, device = encoded.memory.shape[0], encoded.memory.device
        if group < 1 or rows % group:
            raise ValueError(f"group must divide the {rows} rows, got {group}")
        # Column 0 holds BOS, column t + 1 the t-th appended token: the decoder's inputs.
        self._inputs = torch.full((rows, max_len + 1), BOS_ID, dtype=torch.long, device=device)
        self._length = 0
        # Decoder inputs at positions 0 … max_len: BOS and max_len tokens (EOS is scored,
        # never fed back).
        self.cache: DecodingState | None = model.new_cache(max_len + 1) if use_cache else None
        # The common Transformer decoder's step without its module calls (same numbers).
        self._lean = lean_step(model, encoded) if isinstance(self.cache, DecoderCache) else None
        if self._lean is not None:
            assert isinstance(self.cache, DecoderCache)
            self.cache.group = group

    @property
    def num_rows(self) -> int:
        """R, the rows decoded together."""
        return int(self._inputs.shape[0])

    @property
    def tokens(self) -> Tensor:
        """``(R, t)`` the ids appended so far (BOS excluded), a view of the buffer."""
        return self._inputs[:, 1 : self._length + 1]

    def log_probs(self) -> Tensor:
        """``(R, V)`` log-probabilities of the token after BOS + :attr:`tokens`.

        Raises:
            RuntimeError: called twice without :meth:`append` in between (cached mode).
        """
        if self.cache is None:
            inputs = self._inputs[:, : self._length + 1]  # the whole prefix
        else:
            if self.cache.offset != self._length:
                raise RuntimeError("IncrementalDecoder: append() a token before the next step")
            inputs = self._inputs[:, self._length : self._length + 1]
        if self._lean is not None:
            assert isinstance(self.cache, DecoderCache)
            return self._lean(inputs, self.encoded, self.cache)
        out = self.model.decode(
            inputs, self.encoded, cache=self.cache, num_extended=self.num_extended
        )
        return out.log_probs[:, -1]

    def append(self, tokens: Tensor) -> None:
        """Extend every row by its token ``(R,)``.

        Raises:
            RuntimeError: the rows already hold ``max_len`` tokens.
        """
        if self._length + 1 >= self._inputs.shape[1]:
            raise RuntimeError(
                f"IncrementalDecoder holds at most {self._inputs.shape[1] - 1} tokens "
                "(its max_len); cannot append another"
            )
        self._length += 1
        self._inputs[:, self._length] = tokens

    def select(
        self, index: Tensor, *, same_sources: bool = False, moved: RowMoves | None = None
    ) -> None:
        """Keep rows ``index`` ``(R',)`` (long): repeat, reorder or drop rows everywhere.

        Args:
            index: the rows to keep.
            same_sources: every kept row reads the source of the row it replaces (beams
                re-ranked within their example): the sources and the cross-attention
                caches stay as they are.
            moved: ``index`` keeps every row (R' = R, on the CPU) and these are the rows
                that change (:class:`~selfattn.attention.cache.RowMoves`): only they are
                rewritten, in place, here and in the cache.
        """
        if moved is None:
            self._inputs = self._inputs.index_select(0, index)
        else:
            moved.apply(self._inputs)
        if not same_sources:
            self.encoded = self.encoded.index_select(index)
        if isinstance(self.cache, DecoderCache):
            self.cache.reorder(index, memory=not same_sources, moved=moved)
        elif self.cache is not None:
            self.cache.reorder(index, memory=not same_sources)
