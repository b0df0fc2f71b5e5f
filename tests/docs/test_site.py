"""`make docs`: mkdocs builds the site in strict mode (a broken link fails), and the built
site, served locally, opens in Chromium with no console errors on any page, its navigation
reaching every page it built.

The browser is the session's ``browser`` (tests/conftest.py): Debian's Chromium driven by
Playwright, shared with tests/explore (skipped without it, failed in CI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "mkdocs.yml"
NAV = "nav.md-nav--primary a.md-nav__link[href]"


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build`` of ``config`` into ``site``, as ``make docs`` runs it."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)]
    return subprocess.run(
        [*command, "-d", str(site)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    result = build(CONFIG, folder)
    assert result.returncode == 0, f"mkdocs build failed:\n{result.stderr[-4000:]}"
    return folder


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The built site on an HTTP server of its own (the search worker needs http, not file)."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_the_site_builds_every_page(site: Path) -> None:
    built = {path.name for path in site.glob("*.html")}
    expected = {"index.html", "tutorials.html", "guide.html", "commands.html", "library.html"}
    assert expected | {"api.html", "results.html", "benchmarks.html", "records.html"} <= built
    api = (site / "api.html").read_text(encoding="utf-8")
    assert "MultiHeadAttention" in api and "doc-heading" in api  # rendered from docstrings
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "Two commands" in home and 'href="tutorials.html' in home  # the README, relinked


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs, ignore=shutil.ignore_patterns("records", "*.py"))
    (docs / "api.md").write_text("# API reference\n")  # its rendering is the slow part
    page = docs / "commands.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[gone](no-such-page.md)\n")
    config = tmp_path / "mkdocs.yml"
    text = CONFIG.read_text(encoding="utf-8")
    for old, new in (
        ("docs_dir: docs", f"docs_dir: {docs}"),
        ("- docs/site_hooks.py", f"- {ROOT / 'docs/site_hooks.py'}"),
        ("paths: [src]", f"paths: [{ROOT / 'src'}]"),
    ):
        assert old in text
        text = text.replace(old, new)
    config.write_text(text, encoding="utf-8")
    result = build(config, tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-page.md" in result.stderr


def test_every_page_opens_cleanly_and_the_nav_reaches_it(
    site: Path,
    served: str,
    browser: Any,
) -> None:
    pages = {path.relative_to(site).as_posix() for path in site.rglob("*.html")} - {"404.html"}
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on(
        "console", lambda m: errors.append(f"{page.url}: {m.text}") if m.type == "error" else None
    )
    page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))
    reached, queue = set(), ["index.html"]
    while queue:
        name = queue.pop()
        if name in reached:
            continue
        reached.add(name)
        page.goto(served + name)
        page.wait_for_load_state("load")
        assert page.locator("article h1").count() == 1, f"{name} has no title"
        for href in page.eval_on_selector_all(NAV, "links => links.map(a => a.href)"):
            target = href.split("#")[0]
            if target.startswith(served):
                queue.append(target[len(served) :] or "index.html")
    context.close()
    assert not errors, "\n".join(errors)
    assert reached == pages, f"pages the nav does not reach: {sorted(pages - reached)}"
