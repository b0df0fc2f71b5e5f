"""One self-contained HTML page from a JSON payload: the page's script and style are
inlined and the payload is embedded as data, so the file opens from disk with no server
and no network.

The payload (built by :mod:`selfattn.explore.payload`) is a JSON object::

    {
      "version": 1,
      "title": str,                 # the run's name
      "task": str,                  # "token", "sequence", "regression" or "seq2seq"
      "input": str,                 # what the model reads: "text", "image", "speech",
                                    # "graph" or "vectors"
      "serve": bool,                # served page: show the input box, POST to /maps
      "accept": str,                # served page: the file types an upload may have
                                    # ("" for text models)
      "examples": [Example, ...]
    }

    Example = {
      "label": str,                 # the input as the user gave it (text, or file name)
      "prediction": str,            # what the model predicts for it
      "figures": [Figure, ...],     # one per kind of attention: "self-attention";
                                    # seq2seq: "cross-attention", "encoder
                                    # self-attention", "decoder self-attention"
      "image": Image | null,        # image models: the input and its patch grid
      "spectrogram": Image | null,  # speech models: the features, frames on the x axis
      "graph": Graph | null,        # graph models: a drawing of the graph
      "note": str | null            # one line shown beside the input ("showing the first
                                    # 512 of 4,788 tokens"); may be absent
    }

    Figure = {
      "title": str,
      "layer": str,                 # what one layer is called ("layer", "decoder layer")
      "queries": [str],             # T row labels (escaped by the page, never parsed)
      "keys": [str],                # S column labels
      "maps": [[[[float]]]],        # layers × heads × T × S, each row sums to ≤ 1
      "distance": [[float]] | null, # layers × heads: mean over queries of
                                    # Σ_j α_ij |i − j| (self-attention only)
      "entropy": [[float]]          # layers × heads: mean over queries of −Σ_j α_ij ln α_ij
    }

    Image = {"src": "data:image/png;base64,...", "rows": int, "cols": int}
        # rows × cols: the grid the positions tile, row-major (an image's patches; a
        # spectrogram is 1 × frames)
    Graph = {"nodes": [[x, y], ...], "edges": [[i, j], ...]}  # x, y in [0, 1]

The page never builds HTML from payload strings: every token reaches the DOM as text.
"""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from typing import Any

#: Payload layout version; the page refuses another.
VERSION = 1
#: ``{{name}}`` or ``/*{{name}}*/`` in page.html.
_SLOT = re.compile(r"(?:/\*)?\{\{(title|style|payload|script)\}\}(?:\*/)?")


def _static(name: str) -> str:
    return resources.files("selfattn.explore").joinpath("static", name).read_text("utf-8")


def embed_json(payload: Any) -> str:
    """``payload`` as JSON that is safe inside ``<script type="application/json">``:
    ``<``, ``>`` and ``&`` are written as ``\\u`` escapes, so no string in it (a token such
    as ``</script>``) can end the element or start markup."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(payload: dict[str, Any]) -> str:
    """The explorer page for ``payload`` (see the module docstring), as one HTML string."""
    if payload.get("version") != VERSION:
        raise ValueError(f"explorer payload version {payload.get('version')!r}, expected {VERSION}")
    parts = {
        "title": html.escape(str(payload.get("title", "attention"))),
        "style": _static("explorer.css"),
        "payload": embed_json(payload),
        "script": _static("explorer.js"),
    }
    # One pass over the template: nothing substituted is searched again.
    return _SLOT.sub(lambda match: parts[match.group(1)], _static("page.html"))


def read_payload(page: str) -> dict[str, Any]:
    """The payload embedded in a page :func:`render_page` wrote (to check a page).

    Raises:
        ValueError: the page holds no explorer payload.
    """
    match = re.search(r'<script id="payload" type="application/json">(.*?)</script>', page, re.S)
    if match is None:
        raise ValueError("no explorer payload in this page")
    payload: dict[str, Any] = json.loads(match.group(1))
    return payload
