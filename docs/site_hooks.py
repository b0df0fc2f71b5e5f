"""mkdocs hooks for the docs site: the repository's two READMEs become site pages as they
are, their links rewritten from the repository's layout to the site's.

A docs/ page links to them as files of the repository (``../benchmarks/README.md``), which
works where the repository is browsed; on the site those links go to the pages.
README.md is the home page (``index.md``) and benchmarks/README.md the benchmarks page
(``benchmarks.md``); neither is copied into docs/, so each stays one file, and a link in
either that the site cannot resolve fails the strict build like one in docs/.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]

#: page on the site -> (the file it is made from, [(link prefix there, prefix on the site)])
GENERATED: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "index.md": ("README.md", [("docs/", ""), ("benchmarks/README.md", "benchmarks.md")]),
    "benchmarks.md": ("benchmarks/README.md", [("../docs/", "")]),
}
LINK = re.compile(r"(\]\()([^)\s]+)(\))")


def site_markdown(text: str, rewrites: list[tuple[str, str]]) -> str:
    """``text`` with every relative link target that starts with a rewritten prefix moved."""

    def move(match: re.Match[str]) -> str:
        target = match.group(2)
        for old, new in rewrites:
            if target.startswith(old):
                target = new + target[len(old) :]
                break
        return match.group(1) + target + match.group(3)

    return LINK.sub(move, text)


#: what a link in a docs/ page to a repository file becomes on the site
DOCS_REWRITES = [("../benchmarks/README.md", "benchmarks.md"), ("../README.md", "index.md")]


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """A docs/ page's links to the two READMEs, pointed at their site pages."""
    if page.file.src_uri in GENERATED:
        return markdown
    return site_markdown(markdown, DOCS_REWRITES)


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages to the site's files."""
    for page, (source, rewrites) in GENERATED.items():
        text = (ROOT / source).read_text(encoding="utf-8")
        files.append(File.generated(config, page, content=site_markdown(text, rewrites)))
    return files
