"""Learned absolute positional embeddings (Devlin et al. 2019, BERT; Gehring et al. 2017).

The lecture's data-driven alternative to hand-crafted e^i (§Positional Encoding): treat
the table of position vectors as network parameters and learn it. Its weakness is the one
the lecture raises: a table learned for 128 positions has no row for position 129. By
default that is an error; ``extrapolation="clamp"`` reuses the last row instead.
"""

from __future__ import annotations

from typing import Literal, get_args

from torch import Tensor, nn

from selfattn.positional.base import AbsolutePositional, check_span, positions

Extrapolation = Literal["error", "clamp"]


class LearnedPositional(AbsolutePositional):
    """Adds row ``i`` of a learned ``(max_len, E)`` table to the vector at position i.

    Args:
        embed_dim: E.
        max_len: number of learned rows, i.e. the longest sequence it can encode.
        extrapolation: ``"error"`` refuses positions ≥ ``max_len``; ``"clamp"`` gives them
            the last row.
    """

    def __init__(
        self, embed_dim: int, max_len: int = 512, extrapolation: Extrapolation = "error"
    ) -> None:
        super().__init__()
        if extrapolation not in get_args(Extrapolation):
            raise ValueError(
                f"extrapolation must be one of {get_args(Extrapolation)}, got {extrapolation!r}"
            )
        if max_len <= 0:
            raise ValueError(f"max_len must be positive, got {max_len}")
        self.max_len, self.extrapolation = max_len, extrapolation
        self.table = nn.Embedding(max_len, embed_dim)
        nn.init.normal_(self.table.weight, std=0.02)  # BERT's initialiser range

    def encoding(self, length: int, offset: int = 0) -> Tensor:
        """The encodings of positions ``offset … offset + length - 1``, shape ``(L, E)``.

        Raises:
            ValueError: the span runs past the table and ``extrapolation="error"``.
        """
        check_span(length, offset)
        end = offset + length
        if end > self.max_len and self.extrapolation == "error":
            raise ValueError(
                f"learned positional encoding: a sequence of length {end} needs {end} "
                f"positions but max_len is {self.max_len} (use a larger max_len, "
                "extrapolation='clamp', or a formula-based encoding)"
            )
        index = positions(length, offset, self.table.weight.device).clamp(max=self.max_len - 1)
        return self.table(index)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, extrapolation={self.extrapolation!r}"
