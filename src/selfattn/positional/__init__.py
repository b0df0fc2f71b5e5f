"""Positional encodings (lecture 000, §Positional Encoding), selected by name.

Absolute encodings add e^i to the input (``x + e``): ``sinusoidal``, ``learned``,
``floater``, ``rnn``. Relative ones act inside attention through the hooks of
:class:`RelativePositional`: ``relative`` (Shaw et al.), ``rotary``, ``alibi``.

    >>> pos = build_positional("rotary", embed_dim=64, num_heads=4)
"""

from __future__ import annotations

from typing import Any

from selfattn.positional.alibi import ALiBiPositional, alibi_slopes
from selfattn.positional.base import (
    AbsolutePositional,
    RelativePositional,
    SequentialPositional,
    positions,
    relative_offsets,
)
from selfattn.positional.floater import FloaterPositional, rk4_step
from selfattn.positional.grid import GridPositional, Learned2D, Relative2DBias, Sinusoidal2D
from selfattn.positional.learned import LearnedPositional
from selfattn.positional.relative import ShawRelativePositional
from selfattn.positional.rnn import RNNPositional
from selfattn.positional.rotary import RotaryPositional, rotate_half
from selfattn.positional.sinusoidal import SinusoidalPositional, sinusoidal_table

PositionalClass = type[AbsolutePositional] | type[RelativePositional]

#: Every encoding by name; tests iterate over it, so a new entry is tested automatically.
POSITIONAL: dict[str, PositionalClass] = {
    "sinusoidal": SinusoidalPositional,
    "learned": LearnedPositional,
    "floater": FloaterPositional,
    "rnn": RNNPositional,
    "relative": ShawRelativePositional,
    "rotary": RotaryPositional,
    "alibi": ALiBiPositional,
}

#: 2-D encodings of an image's grid of pixels or patches (rows × columns, row-major);
#: ``forward(x, rows, cols, has_cls)`` rather than a 1-D position, so a registry apart.
GRID_POSITIONAL: dict[str, type[GridPositional]] = {
    "sinusoidal2d": Sinusoidal2D,
    "learned2d": Learned2D,
}


def positional_options(name: str) -> dict[str, Any]:
    """The extra keyword options of encoding ``name`` and their defaults."""
    return _lookup(name).options()


def build_positional(
    name: str, *, embed_dim: int, num_heads: int, max_len: int = 512, **options: Any
) -> AbsolutePositional | RelativePositional:
    """Construct the encoding registered as ``name``.

    Args:
        name: a key of :data:`POSITIONAL`.
        embed_dim: E, the model width (absolute encodings are ``(L, E)``).
        num_heads: H; relative encodings work per head with D = E // H.
        max_len: the longest sequence expected in training (table size for ``learned``,
            cache size for ``sinusoidal``, time scale for ``floater``).
        **options: the encoding's own options, see :func:`positional_options`.

    Raises:
        ValueError: unknown ``name``.
        TypeError: an option the encoding does not have.
    """
    cls = _lookup(name)
    unknown = sorted(set(options) - set(positional_options(name)))
    if unknown:
        valid = ", ".join(positional_options(name)) or "none"
        raise TypeError(
            f"positional encoding {name!r} has no option(s) {', '.join(unknown)}; "
            f"its options are: {valid}"
        )
    return cls.build(embed_dim=embed_dim, num_heads=num_heads, max_len=max_len, **options)


def _lookup(name: str) -> PositionalClass:
    if name not in POSITIONAL:
        raise ValueError(
            f"unknown positional encoding {name!r}; choose one of: {', '.join(POSITIONAL)}"
        )
    return POSITIONAL[name]


__all__ = [
    "GRID_POSITIONAL",
    "POSITIONAL",
    "ALiBiPositional",
    "AbsolutePositional",
    "FloaterPositional",
    "GridPositional",
    "Learned2D",
    "LearnedPositional",
    "PositionalClass",
    "RNNPositional",
    "Relative2DBias",
    "RelativePositional",
    "RotaryPositional",
    "SequentialPositional",
    "ShawRelativePositional",
    "Sinusoidal2D",
    "SinusoidalPositional",
    "alibi_slopes",
    "build_positional",
    "positional_options",
    "positions",
    "relative_offsets",
    "rk4_step",
    "rotate_half",
    "sinusoidal_table",
]
