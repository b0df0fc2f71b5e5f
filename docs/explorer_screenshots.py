"""Screenshots of the attention explorer for the README and docs, from real trained runs,
taken by the browser the tests use (Debian's Chromium through Playwright).

The runs (1 CPU thread each; runs/ is not committed):

    selfattn demo                      # runs/demo/transformer: the POS tagger
    for c in karate digits_vit digit_strings_conformer; do
        selfattn train configs/$c.toml --set run_dir=runs/explore/$c --set train.threads=1
    done
    python docs/explorer_screenshots.py   # writes docs/explorer_*.png

The inputs: "I saw a saw"; the first test digit of ``digits`` as a PNG; the karate club's
test graph as JSON; espeak-ng (Debian's, from selfattn's cache) saying "seven two nine
four" as a WAV file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile
from PIL import Image

from selfattn.data import load_dataset
from selfattn.data.recipes.espeak import Espeak

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def write_inputs(folder: Path) -> dict[str, str]:
    """The input of each view, written into ``folder``."""
    digit = load_dataset("digits").test[0]
    assert digit.features is not None
    pixels = digit.features[:, 0].reshape(8, 8)
    image = folder / "digit.png"
    Image.fromarray((pixels / pixels.max() * 255).astype(np.uint8)).save(image)
    club = load_dataset("karate").test[0]
    assert club.features is not None and club.edges is not None
    graph = folder / "club.json"
    graph.write_text(json.dumps({"nodes": club.features.tolist(), "edges": club.edges.tolist()}))
    samples, rate = Espeak.fetch().synthesize("seven two nine four", "en-us+f2")
    speech = folder / "seven_two_nine_four.wav"
    soundfile.write(speech, samples, rate)
    return {"text": "I saw a saw", "image": str(image), "graph": str(graph), "seq2seq": str(speech)}


RUNS = {
    "text": "runs/demo/transformer",
    "image": "runs/explore/digits_vit",
    "graph": "runs/explore/karate",
    "seq2seq": "runs/explore/digit_strings_conformer",
}


def explore(run: str, argument: str, page: Path) -> None:
    command = [sys.executable, "-m", "selfattn", "explore", str(ROOT / run), argument]
    subprocess.run([*command, "-o", str(page), "--threads", "1"], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--views", nargs="+", choices=sorted(RUNS), default=sorted(RUNS))
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as temporary, sync_playwright() as playwright:
        folder = Path(temporary)
        inputs = write_inputs(folder)
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=LAUNCH_ARGS
        )
        for view in args.views:
            run = RUNS[view]
            page_file = folder / f"{view}.html"
            explore(run, inputs[view], page_file)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            page.on("pageerror", lambda error, seen=errors: seen.append(str(error)))
            page.goto(page_file.as_uri())
            if view == "text":
                page.select_option("#layer", value="1")
                page.hover("#head-view text.query[data-i='3']")  # the second "saw"
            elif view == "image":
                page.click("#overlay-grid .cell[data-pos='9']")
            elif view == "graph":
                page.click("#overlay-graph circle.node[data-node='0']")
            else:
                page.select_option("#figure", index=0)  # cross-attention
            page.wait_for_timeout(300)
            target = args.out / f"explorer_{view}.png"
            page.screenshot(path=str(target), full_page=True)
            if errors:
                raise SystemExit(f"{view}: the page reported {errors}")
            print(f"wrote {target}")
            page.close()
        browser.close()


if __name__ == "__main__":
    main()
