"""The configuration of a stack of blocks: a :class:`~selfattn.blocks.BlockConfig` plus what
only a stack has (depth, positions, weight sharing, the final norm).

One frozen dataclass describes a whole :class:`~selfattn.models.Encoder`,
:class:`~selfattn.models.Decoder` or :class:`~selfattn.models.Conformer`; each block of
the stack receives it whole (a block reads only the block fields).

>>> config = StackConfig(256, 4, 1024, num_layers=6, positional="rotary")
>>> encoder = Encoder(config)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from selfattn.blocks.config import BlockConfig
from selfattn.positional import POSITIONAL

__all__ = ["StackConfig"]


@dataclass(frozen=True, kw_only=True)
class StackConfig(BlockConfig):
    """Every option of a stack: the block fields of :class:`~selfattn.blocks.BlockConfig`
    (positional: ``embed_dim``, ``num_heads``, ``ffn_dim``) and these, by keyword.

    Attributes:
        num_layers: number of blocks (with ``share_weights``, of applications of one block).
        positional: name of a positional encoding in
            :data:`selfattn.positional.POSITIONAL` (absolute ones are added to the input
            once, relative ones act inside every block's attention), or ``None``: the
            stack is then permutation-equivariant (a set encoder), unless a Conformer's
            convolutions carry order.
        max_len: longest sequence the positional encoding (and a Linformer kernel) must
            cover.
        positional_options: extra keyword arguments for the positional encoding.
        share_weights: Universal Transformer (Dehghani et al. 2019, without adaptive
            halting): one block applied ``num_layers`` times, so depth costs compute but
            no parameters.
        final_norm: LayerNorm on the stack's output; ``None``: only after pre-LN
            transformer blocks, whose outputs are otherwise un-normalised (a Conformer
            block ends in its own LayerNorm).
        embed_dropout: dropout on the input after positional encoding (``None``:
            ``dropout``, as in the paper).
    """

    num_layers: int
    positional: str | None = None
    max_len: int = 512
    positional_options: Mapping[str, Any] = field(default_factory=dict, hash=False)
    share_weights: bool = False
    final_norm: bool | None = None
    embed_dropout: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "positional_options", dict(self.positional_options))
        if self.num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {self.num_layers}")
        if self.positional is not None and self.positional not in POSITIONAL:
            raise ValueError(
                f"unknown positional encoding {self.positional!r}; choose one of "
                f"{sorted(POSITIONAL)} or None"
            )
        if self.max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {self.max_len}")
        if self.embed_dropout is not None and not 0.0 <= self.embed_dropout < 1.0:
            raise ValueError(f"embed_dropout must be in [0, 1) or None, got {self.embed_dropout}")

    @property
    def has_final_norm(self) -> bool:
        """Whether a stack of transformer blocks normalises its output: ``final_norm``, else
        after pre-LN blocks only (post-LN blocks end in a norm already)."""
        return self.norm_first if self.final_norm is None else self.final_norm

    @property
    def input_dropout(self) -> float:
        """The dropout on the stack's input: ``embed_dropout``, else ``dropout``."""
        return self.dropout if self.embed_dropout is None else self.embed_dropout
