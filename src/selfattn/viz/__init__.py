"""Seeing what attention does (lecture 003, §Attention Visualization)."""

from __future__ import annotations

from selfattn.viz.heatmap import plot_attention

__all__ = ["plot_attention"]
