"""Attention maps as heatmaps: one panel per layer and head, tokens on both axes.

Row i of a panel is α'_{i,·}: how much query position i draws from each key position j.
Comparing panels shows what the lecture points out — some heads look locally (a band
near the diagonal), others globally.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

# The object-oriented API needs no pyplot backend, so this works on a server without a display.
from matplotlib.figure import Figure
from torch import Tensor


def plot_attention(
    maps: Sequence[Tensor],
    tokens: Sequence[str],
    path: str | os.PathLike[str],
    *,
    title: str | None = None,
    panel_size: float = 2.4,
    key_tokens: Sequence[str] | None = None,
    layer_name: str = "layer",
) -> Path:
    """Write a grid of heatmaps (rows = layers, columns = heads) to ``path``.

    Args:
        maps: per layer, weights ``(H, L, L)`` for one example (padding removed), or
            ``(H, T, S)`` for cross-attention with ``key_tokens``.
        tokens: the L (or T query) tokens, tick labels of the rows (and the columns).
        key_tokens: the S key tokens when they differ from the queries (cross-attention:
            a decoder's outputs attending to the source).
        path: output image; the format follows the suffix (``.png``, ``.pdf``, ``.svg``).
        title: figure title.
        panel_size: inches per panel.
        layer_name: what a row of panels is (``"layer"``, ``"decoder layer"``, ``"hop"``).

    Returns:
        The path written.
    """
    fig = attention_figure(
        maps,
        tokens,
        title=title,
        panel_size=panel_size,
        key_tokens=key_tokens,
        layer_name=layer_name,
    )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out


def attention_figure(
    maps: Sequence[Tensor],
    tokens: Sequence[str],
    *,
    title: str | None = None,
    panel_size: float = 2.4,
    key_tokens: Sequence[str] | None = None,
    layer_name: str = "layer",
) -> Figure:
    """The figure :func:`plot_attention` writes: one heatmap per layer and head, all on
    one colour scale (0 to the largest weight shown), read off the colour bar beside
    them."""
    if not maps:
        raise ValueError("no attention maps to plot")
    keys = tokens if key_tokens is None else key_tokens
    num_heads, length, width = maps[0].shape[0], len(tokens), len(keys)
    for layer, weights in enumerate(maps):
        if weights.dim() != 3 or tuple(weights.shape[1:]) != (length, width):
            raise ValueError(
                f"layer {layer}: expected weights (H, {length}, {width}) for {length} query "
                f"and {width} key tokens, got {tuple(weights.shape)}"
            )
    fig = Figure(
        figsize=(panel_size * num_heads + 1.4, panel_size * len(maps) + 0.6),
        layout="constrained",
    )
    axes = fig.subplots(len(maps), num_heads, squeeze=False)
    # Beyond 40 labels an axis's ticks overlap into a smear; each axis decides alone, so a
    # decoder's few output tokens stay labelled against a long source.
    label_x, label_y = width <= 40, length <= 40
    # A map far from square (5 digits against 60 speech frames) fills its panel instead
    # of shrinking to a strip.
    aspect = "auto" if max(length, width) > 3 * min(length, width) else "equal"
    # One scale for every panel, so equal colours mean equal weights across heads.
    top = max(float(weights.detach().float().max()) for weights in maps) or 1.0
    image = None
    for layer, weights in enumerate(maps):
        for head in range(num_heads):
            ax = axes[layer][head]
            image = ax.imshow(
                weights[head].detach().float().cpu().numpy(),
                cmap="viridis",
                vmin=0.0,
                vmax=top,
                aspect=aspect,
            )
            ax.set_title(f"{layer_name} {layer + 1} · head {head + 1}", fontsize=8)
            if label_x:
                ax.set_xticks(range(width), keys, rotation=90, fontsize=7)
            else:
                ax.set_xticks([])
            if label_y:
                ax.set_yticks(range(length), tokens, fontsize=7)
            else:
                ax.set_yticks([])
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    if title:
        fig.suptitle(title)
    fig.supxlabel("key (attended to)", fontsize=9)
    fig.supylabel("query", fontsize=9)
    return fig
