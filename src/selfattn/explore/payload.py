"""The explorer's data: a trained model's attention for some inputs, as the JSON payload
:mod:`selfattn.explore.page` describes.

The maps come from the task's own ``attention`` (the model run with its weights, whatever
kernel it trained with), rounded to 6 decimals; the per-head statistics come from
:mod:`selfattn.explore.stats`. Image, speech and graph inputs also carry a picture of the
input for the page to paint the attention over.

A map holds T × S weights for T queries and S keys, so an input's payload grows with the
square of its length: an input is refused past :data:`MAX_TOKENS` positions (or, with
``truncate``, shows its first ones and a note saying so), and one page or answer past
:data:`MAX_WEIGHTS` weights in all (each a choice of the builder's caller, ``selfattn
explore --max-tokens / --max-weights``). Within them the payload is linear in the weights
shown: about 9 bytes each.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable
from typing import Any

import numpy as np
from torch import Tensor

from selfattn.data.batching.lengths import slice_example
from selfattn.data.readers.user_description import (
    AUDIO_SUFFIXES,
    IMAGE_SUFFIXES,
    MOLECULE_SUFFIXES,
    InputDescription,
)
from selfattn.datatypes import Example
from selfattn.explore.page import VERSION
from selfattn.explore.stats import head_statistics, position_distances
from selfattn.models.composed import CLS_LABEL
from selfattn.tasks.predictor import Predictor
from selfattn.tasks.task import AttentionFigure

#: Decimals kept of each attention weight.
DECIMALS = 6
#: Most positions (tokens, frames, nodes, patches) of one input the explorer shows.
MAX_TOKENS = 512
#: Most attention weights one page, or one answer of the server, holds (about 20 MB).
MAX_WEIGHTS = 2 * 1024 * 1024

#: What one position is called, by what the model reads.
_POSITIONS = {
    "text": "tokens",
    "speech": "frames",
    "graph": "nodes",
    "molecule": "atoms",
    "image": "positions",
    "vectors": "vectors",
}

#: The upload types the served page offers, by what the model reads.
ACCEPT: dict[str, frozenset[str]] = {
    "image": IMAGE_SUFFIXES,
    "speech": AUDIO_SUFFIXES,
    "molecule": MOLECULE_SUFFIXES | {".json"},
    "graph": frozenset({".json", ".npz"}),
    "vectors": frozenset({".npz"}),
}


def accept(description: InputDescription) -> str:
    """The file input's ``accept`` list for the model (``""`` for text models)."""
    return ",".join(sorted(ACCEPT.get(description.kind, frozenset())))


def _rounded(layers: list[Tensor]) -> list[Any]:
    # Rounded in float64: a float32 rounded to 6 decimals is not one, and its repr in JSON
    # (0.016315000131726265) is twice as long as the weight's.
    return [np.round(layer.detach().double().cpu().numpy(), DECIMALS).tolist() for layer in layers]


def weight_count(figures: list[AttentionFigure]) -> int:
    """How many attention weights ``figures`` hold (layers × heads × T × S each)."""
    return sum(int(layer.numel()) for figure in figures for layer in figure.maps)


def _count(maps: list[Any]) -> int:
    """How many weights a figure's nested ``maps`` lists hold."""
    return sum(len(row) for layer in maps for head in layer for row in head)


def _png(pixels: np.ndarray) -> str:
    """A 2-D (grey) or 3-D (RGB) array, scaled to 0–255, as a PNG data URL."""
    from PIL import Image

    low, high = float(pixels.min()), float(pixels.max())
    scaled = (pixels - low) / (high - low) if high > low else np.zeros_like(pixels)
    image = Image.fromarray(np.asarray(scaled * 255, dtype=np.uint8))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


class PayloadBuilder:
    """Builds the explorer's payload for one trained model.

    Args:
        predictor: the run's model and task.
        options: decoding options for a seq2seq model (``method``, ``beam_size`` …).
        title: the page's title (the run's name).
        serve: the page is served (input box, uploads).
        truncate: cut inputs longer than the model reads (else they are refused).
        max_tokens: most positions of one input (longer ones are refused).
        max_weights: most attention weights of the examples :meth:`examples` builds.
    """

    def __init__(
        self,
        predictor: Predictor,
        *,
        options: dict[str, Any],
        title: str,
        serve: bool = False,
        truncate: bool = False,
        max_tokens: int = MAX_TOKENS,
        max_weights: int = MAX_WEIGHTS,
    ) -> None:
        if max_tokens < 1 or max_weights < 1:
            raise ValueError(
                f"--max-tokens and --max-weights must be at least 1, got {max_tokens} "
                f"and {max_weights}"
            )
        self.predictor, self.options, self.title, self.serve = predictor, options, title, serve
        self.truncate, self.max_tokens, self.max_weights = truncate, max_tokens, max_weights
        self.description = predictor.description()

    def payload(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        """The page's payload holding ``examples`` (from :meth:`example`)."""
        return {
            "version": VERSION,
            "title": self.title,
            "task": self.predictor.spec.task,
            "input": self.description.kind,
            "serve": self.serve,
            "accept": accept(self.description),
            "examples": examples,
        }

    def examples(self, inputs: Iterable[tuple[Example, str]]) -> list[dict[str, Any]]:
        """The payload examples of ``(example, label)`` pairs (see :meth:`example`),
        holding at most ``max_weights`` attention weights together.

        Raises:
            ValueError: as :meth:`example`; the inputs' maps together hold more weights.
        """
        shown: list[dict[str, Any]] = []
        spent = 0
        for example, label in inputs:
            shown.append(self.example(example, label, spent=spent))
            spent += sum(_count(figure["maps"]) for figure in shown[-1]["figures"])
        return shown

    def example(self, example: Example, label: str, *, spent: int = 0) -> dict[str, Any]:
        """One input's prediction, maps, statistics and picture, when its maps fit in the
        ``max_weights`` left after ``spent`` weights already shown. With ``truncate`` an
        input of more than ``max_tokens`` positions (not an image) shows its first ones,
        and its ``note`` says so.

        Raises:
            ValueError: the input is too long for the model or has more than
                ``max_tokens`` positions; its maps hold more weights than are left; the
                model has no attention weights (one line each).
        """
        fitted = self.predictor.fit(example, truncate=self.truncate)
        name = example.source or label[:40]
        note = None
        if len(fitted) > self.max_tokens:
            positions = _POSITIONS.get(self.description.kind, "positions")
            counted = f"{len(fitted):,} {positions}"
            if not self.truncate or self.description.kind == "image":
                keep = "" if self.description.kind == "image" else "; --truncate shows its first"
                raise ValueError(
                    f"{name}: {counted}; the explorer shows at most {self.max_tokens:,} per "
                    f"input (--max-tokens changes it{keep})"
                )
            fitted = slice_example(fitted, 0, self.max_tokens, self.predictor.spec.task)
            note = f"showing the first {self.max_tokens:,} of {counted} (--max-tokens)"
        figures = self.predictor.attention(fitted, **self.options)
        weights = weight_count(figures)
        if spent + weights > self.max_weights:
            before = f", {spent:,} of them taken by the inputs before it" if spent else ""
            raise ValueError(
                f"{name}: its maps hold {weights:,} attention weights; the explorer shows "
                f"at most {self.max_weights:,} at once{before} (--max-weights changes it)"
            )
        grid = self._grid()
        return {
            "label": label,
            "prediction": self.predictor.predict(fitted, **self.options),
            "figures": [self._figure(figure, grid) for figure in figures],
            "image": self._image(fitted, grid),
            "spectrogram": self._spectrogram(fitted, figures),
            "graph": self._graph(fitted),
            "note": note,
        }

    # ------------------------------------------------------------------ parts

    def _grid(self) -> tuple[int, int] | None:
        """Images: the ``(rows, cols)`` the positions tile (pixels or patches)."""
        embedding = getattr(self.predictor.model, "embedding", None)
        grid = getattr(embedding, "grid", None)
        return None if grid is None else (int(grid[0]), int(grid[1]))

    def _distances(self, figure: AttentionFigure, grid: tuple[int, int] | None) -> Tensor | None:
        """Position distances of a self-attention map (``None`` for cross-attention and
        graphs, whose heads read neighbours, not positions)."""
        square = figure.queries == figure.keys and "self-attention" in figure.title
        if not square or self.description.kind in ("graph", "molecule"):
            return None
        offset = 1 if figure.keys and figure.keys[0] == CLS_LABEL else 0
        length = len(figure.keys)
        use_grid = grid if grid is not None and grid[0] * grid[1] == length - offset else None
        return position_distances(length, grid=use_grid, offset=offset)

    def statistics(self, figures: list[AttentionFigure]) -> list[dict[str, Any]]:
        """Per figure, every head's mean attention distance and entropy (what
        ``selfattn attention --stats`` prints)."""
        grid = self._grid()
        out = []
        for figure in figures:
            distance, entropy = head_statistics(figure.maps, self._distances(figure, grid))
            heads = [
                {
                    "layer": layer,
                    "head": head,
                    "distance": None if distance is None else round(distance[layer][head], 6),
                    "entropy": round(value, 6),
                }
                for layer, row in enumerate(entropy)
                for head, value in enumerate(row)
            ]
            out.append({"figure": figure.title, "layer_name": figure.layer, "heads": heads})
        return out

    def _figure(self, figure: AttentionFigure, grid: tuple[int, int] | None) -> dict[str, Any]:
        distance, entropy = head_statistics(figure.maps, self._distances(figure, grid))
        return {
            "title": figure.title,
            "layer": figure.layer,
            "queries": list(figure.queries),
            "keys": list(figure.keys),
            "maps": _rounded(figure.maps),
            "distance": distance,
            "entropy": entropy,
        }

    def _image(self, example: Example, grid: tuple[int, int] | None) -> dict[str, Any] | None:
        shape = self.description.grid
        if self.description.kind != "image" or shape is None or example.features is None:
            return None
        height, width, channels = shape
        pixels = example.features.reshape(height, width, channels)
        pixels = pixels[..., 0] if channels == 1 else pixels[..., :3]
        rows, cols = grid if grid is not None else (height, width)
        return {"src": _png(pixels), "rows": rows, "cols": cols}

    def _spectrogram(
        self, example: Example, figures: list[AttentionFigure]
    ) -> dict[str, Any] | None:
        if self.description.kind != "speech" or example.features is None:
            return None
        keys = next(
            (f.keys for f in figures if "self-attention" in f.title and "decoder" not in f.title),
            figures[0].keys,
        )
        frames = len(keys) - (1 if keys and keys[0] == CLS_LABEL else 0)
        # Low frequencies at the bottom, time left to right.
        return {"src": _png(example.features.T[::-1]), "rows": 1, "cols": frames}

    def _graph(self, example: Example) -> dict[str, Any] | None:
        if example.edges is None:
            return None
        import networkx as nx

        graph = nx.Graph()
        graph.add_nodes_from(range(len(example)))
        pairs = {tuple(sorted((int(a), int(b)))) for a, b in example.edges if a != b}
        graph.add_edges_from(pairs)
        layout = nx.spring_layout(graph, seed=0)
        points = np.array([layout[node] for node in range(len(example))])
        low, span = points.min(0), np.ptp(points, 0)
        span[span == 0] = 1.0
        nodes = np.round((points - low) / span, 4).tolist()
        return {"nodes": nodes, "edges": sorted([list(pair) for pair in pairs])}
