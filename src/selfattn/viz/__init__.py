"""Seeing what attention does (lecture 003, §Attention Visualization)."""

from __future__ import annotations

from selfattn.viz.heatmap import attention_figure, plot_attention

__all__ = ["attention_figure", "plot_attention"]
