"""Seeing what attention does (lecture 003, §Attention Visualization)."""

from __future__ import annotations

from selfattn.viz.exit_curve import exit_curve_figure, plot_exit_curve
from selfattn.viz.heatmap import attention_figure, plot_attention

__all__ = ["attention_figure", "exit_curve_figure", "plot_attention", "plot_exit_curve"]
