"""A seq2seq model's attention maps as figures: the cross-attention (the alignment) first,
then the encoder's and the decoder's self-attention."""

from __future__ import annotations

from typing import Any

from selfattn.tasks.task import AttentionFigure


def seq2seq_figures(maps: Any, source: list[str], produced: list[str]) -> list[AttentionFigure]:
    """The figures of one example's maps (``maps.cross``, ``.encoder``, ``.decoder``: per
    layer ``(1, H, T, S)``), without the kinds the model has none of (an RNN
    encoder–decoder has the cross-attention only).

    Args:
        maps: the model's ``attention_maps`` of the example.
        source: the source positions' labels.
        produced: the output tokens, EOS last.
    """
    figures = [  # the alignment first: what `selfattn attention -o FILE` writes to FILE
        AttentionFigure(
            "cross-attention", [m[0] for m in maps.cross], produced, source, "decoder layer"
        ),
        AttentionFigure(
            "encoder self-attention", [m[0] for m in maps.encoder], source, source, "encoder layer"
        ),
        AttentionFigure(
            "decoder self-attention",
            [m[0] for m in maps.decoder],
            produced,
            produced,
            "decoder layer",
        ),
    ]
    return [figure for figure in figures if figure.maps]
