"""The image ``selfattn attention`` writes: one panel per layer and head, one colour bar."""

from __future__ import annotations

import torch

from selfattn.viz import attention_figure, plot_attention


def test_heatmap_has_a_colour_bar(tmp_path) -> None:  # type: ignore[no-untyped-def]
    maps = [torch.softmax(torch.randn(2, 3, 3), dim=-1) for _ in range(2)]
    figure = attention_figure(maps, ["I", "saw", "it"], title="I saw it")
    bars = [ax for ax in figure.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 1 and len(figure.axes) == 2 * 2 + 1
    assert bars[0].get_ylabel() == "attention weight"
    path = plot_attention(maps, ["I", "saw", "it"], tmp_path / "map.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
