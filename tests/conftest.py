"""Shared test set-up: fixed seeds, `gpu` tests skipped where there is no CUDA,
`fetched`: a recipe's real data, or a skip that says why it cannot be had here, and
`minilm_folder`: the real all-MiniLM-L6-v2 checkpoint (CI fetches it, so there its tests
run), `backend_choice`: where selfattn picks SDPA's backends for varying shapes, and
`browser`: Debian's Chromium (``/usr/bin/chromium``, installed by ``make browser``) driven
headless by Playwright through its bundled driver (never ``playwright install``), one for
the session, which tests/explore and tests/docs share (Playwright's sync API allows one
at a time). Without Chromium the browser tests fail in CI and skip elsewhere."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from selfattn.data import RECIPES, DataError, DebianSource
from selfattn.data.recipes import Recipe

from .helpers_pretrained import fetched_weights
from .helpers_scripts import load_script


@pytest.fixture(autouse=True)
def _seed() -> None:
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Tiny models gain nothing from intra-op threads, and on a busy 2-core machine OpenMP's
    waiting makes them many times slower; one thread keeps such tests fast anywhere (and
    results the same whatever the machine's core count). Use it module-wide with
    ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    torch.set_num_threads(1)  # _restore_threads puts the count back after the test
    yield


@pytest.fixture(autouse=True)
def _restore_threads() -> Iterator[None]:
    """A test that runs a command in-process (which sets torch's thread count) must not
    change the thread count of the tests after it."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


class BackendChoice:
    """Records the uses of :func:`selfattn.attention.backends.varying_shapes` by a module
    (:meth:`watch`): the devices it was entered for, and whether it is entered now."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered: list[torch.device] = []
        self._depth = 0
        self._monkeypatch = monkeypatch

    @property
    def inside(self) -> bool:
        return self._depth > 0

    def watch(self, target: str) -> None:
        """Replace ``target`` (a module's ``varying_shapes``) with a recording stand-in."""

        @contextlib.contextmanager
        def recorded(device: torch.device | str) -> Iterator[None]:
            self.entered.append(torch.device(device))
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1

        self._monkeypatch.setattr(target, recorded)


@pytest.fixture
def backend_choice(monkeypatch: pytest.MonkeyPatch) -> BackendChoice:
    """:class:`BackendChoice` for one test."""
    return BackendChoice(monkeypatch)


@pytest.fixture
def fetched() -> Callable[[str], Recipe]:
    """``fetched(name)``: the recipe with its files in the cache; the test is skipped
    (with the reason) only where they cannot be fetched — no network, or no apt-get for a
    Debian source. CI fetches them, so there these tests run."""

    def fetch_or_skip(name: str) -> Recipe:
        recipe = RECIPES[name]
        debian = isinstance(recipe.source, DebianSource)
        if not recipe.is_fetched() and debian and not shutil.which("apt-get"):
            pytest.skip(f"{name}: needs apt-get (Debian / Ubuntu) to fetch its packages")
        try:
            recipe.fetch()
        except DataError as err:
            pytest.skip(f"{name}: its data cannot be fetched here ({err})")
        return recipe

    return fetch_or_skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def minilm_folder() -> Path:
    """all-MiniLM-L6-v2's folder, or a skip saying why it cannot be fetched here."""
    return fetched_weights("minilm-l6")


CHROMIUM = Path("/usr/bin/chromium")


def _why_no_browser() -> str | None:
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing: run `make browser` (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed: pip install -e '.[dev]'"
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Debian Chromium driven by Playwright, one for the whole session."""
    reason = _why_no_browser()
    if reason is not None:
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"browser tests cannot run in CI: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    # The screenshots of the docs are taken by the same browser, started the same way.
    launch_args = load_script("docs/explorer_screenshots.py").LAUNCH_ARGS
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=launch_args
        )
        yield chromium
        chromium.close()
