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


def test_a_long_source_keeps_the_outputs_labelled_and_fills_the_panel() -> None:
    """Five output digits against 60 speech frames: the rows keep their labels, the 60
    columns drop theirs (a smear), and the panel is not squeezed into a strip."""
    maps = [torch.softmax(torch.randn(2, 5, 60), dim=-1)]
    outputs, frames = ["7", "2", "9", "4", "<eos>"], [str(i) for i in range(60)]
    figure = attention_figure(maps, outputs, key_tokens=frames)
    panel = figure.axes[0]
    assert [label.get_text() for label in panel.get_yticklabels()] == outputs
    assert list(panel.get_xticks()) == []
    assert panel.get_aspect() == "auto"
    square = attention_figure([torch.softmax(torch.randn(2, 5, 5), dim=-1)], outputs)
    assert square.axes[0].get_aspect() == 1.0
