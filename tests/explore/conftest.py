"""Real-browser fixtures for the explorer page: Debian's Chromium (``/usr/bin/chromium``,
installed by ``make browser``) driven headless by Playwright for Python through its bundled
driver (never ``playwright install``).

- ``browser`` (tests/conftest.py, shared with tests/docs): one Chromium for the session.
- ``open_url(url)`` / ``open_payload(payload)``: a new 1280 × 800 page at ``url``, or at a
  page rendered from ``payload`` by :func:`render_page` into ``tmp_path`` and opened from its
  file URL; either returns an :class:`OpenedPage` that collects console and page errors.
- ``make_figure`` / ``make_example`` / ``make_payload``: hand-made payloads with random
  row-stochastic maps and their distance and entropy statistics.

Without Chromium the browser tests fail in CI (``CI`` set: a broken set-up must not pass as
skipped) and skip elsewhere, saying how to install it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from selfattn.cli.main import main
from selfattn.explore.page import render_page

from ..train.test_distributed import write_run

VIEWPORT = {"width": 1280, "height": 800}


@dataclass
class OpenedPage:
    """A Playwright page and the errors it reported since it was opened."""

    page: Any
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        return self.console_errors + self.page_errors


@pytest.fixture
def browser_context(browser: Any) -> Iterator[Any]:
    """A fresh context (no shared cookies or storage) per test."""
    context = browser.new_context(viewport=VIEWPORT)
    yield context
    context.close()


@pytest.fixture
def open_url(browser_context: Any) -> Callable[[str], OpenedPage]:
    def open_(url: str) -> OpenedPage:
        page = browser_context.new_page()
        opened = OpenedPage(page)
        page.on(
            "console",
            lambda message: (
                opened.console_errors.append(message.text) if message.type == "error" else None
            ),
        )
        page.on("pageerror", lambda error: opened.page_errors.append(str(error)))
        page.goto(url)
        page.wait_for_load_state("load")
        return opened

    return open_


@pytest.fixture
def open_payload(
    open_url: Callable[[str], OpenedPage], tmp_path: Path
) -> Callable[..., OpenedPage]:
    def open_(payload: dict[str, Any], name: str = "page.html") -> OpenedPage:
        path = tmp_path / name
        path.write_text(render_page(payload), encoding="utf-8")
        return open_url(path.as_uri())

    return open_


# ----------------------------------------------------------------------- payloads


def figure(
    queries: list[str],
    keys: list[str] | None = None,
    *,
    layers: int = 2,
    heads: int = 3,
    seed: int = 0,
    title: str = "self-attention",
    layer: str = "layer",
) -> dict[str, Any]:
    """A Figure with random rows that sum to 1 (6 decimals, like the payload builder's),
    and its per-head mean distance (square maps only) and entropy."""
    keys = list(queries) if keys is None else keys
    rng = np.random.default_rng(seed)
    scores = rng.normal(scale=2.0, size=(layers, heads, len(queries), len(keys)))
    maps = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    maps = np.round(maps, 6)
    distance = None
    if len(queries) == len(keys):
        positions = np.arange(len(keys))
        gaps = np.abs(positions[:, None] - positions[None, :])
        distance = (maps * gaps).sum(-1).mean(-1).tolist()
    entropy = (-(maps * np.log(np.clip(maps, 1e-12, None))).sum(-1)).mean(-1).tolist()
    return {
        "title": title,
        "layer": layer,
        "queries": queries,
        "keys": keys,
        "maps": maps.tolist(),
        "distance": distance,
        "entropy": entropy,
    }


def example(label: str, prediction: str, figures: list[dict[str, Any]], **extra: Any) -> dict:
    return {
        "label": label,
        "prediction": prediction,
        "figures": figures,
        "image": None,
        "spectrogram": None,
        "graph": None,
        **extra,
    }


def payload(
    examples: list[dict[str, Any]],
    *,
    task: str = "sequence",
    input: str = "text",
    serve: bool = False,
    accept: str = "",
    title: str = "test run",
) -> dict[str, Any]:
    return {
        "version": 1,
        "title": title,
        "task": task,
        "input": input,
        "serve": serve,
        "accept": accept,
        "examples": examples,
    }


@pytest.fixture
def make_figure() -> Callable[..., dict[str, Any]]:
    return figure


@pytest.fixture
def make_example() -> Callable[..., dict[str, Any]]:
    return example


@pytest.fixture
def make_payload() -> Callable[..., dict[str, Any]]:
    return payload


# ----------------------------------------------------------------------- trained runs


@pytest.fixture(scope="session")
def text_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny review classifier (2 layers × 2 heads), trained for 2 epochs."""
    folder = tmp_path_factory.mktemp("explore-text")
    config = write_run(folder)
    assert main(["train", str(config), "--no-progress", "--threads", "1"]) == 0
    return folder / "run"
