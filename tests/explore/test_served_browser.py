"""The real explorer server in a real browser: a typed sentence comes back as the library's
maps; a malformed upload to an image model shows one line, and the server keeps serving."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from selfattn.cli.main import main
from selfattn.data import load_dataset
from selfattn.explore.payload import PayloadBuilder
from selfattn.explore.server import Explorer, serve
from selfattn.tasks.predictor import Predictor

from ..helpers_cli import set_flags
from ..helpers_scripts import CONFIGS
from .conftest import OpenedPage
from .test_page_browser import drawn_map

pytestmark = pytest.mark.usefixtures("one_thread")


Served = Callable[[Path], tuple[OpenedPage, PayloadBuilder]]


@pytest.fixture
def served(open_url: Callable[[str], OpenedPage]) -> Iterator[Served]:
    """``served(run)``: the run's explorer served on a free port of 127.0.0.1, open in a
    new page; the page and the server's payload builder."""
    servers = []

    def start(run: Path) -> tuple[OpenedPage, PayloadBuilder]:
        builder = PayloadBuilder(Predictor(run), options={}, title=run.name, serve=True)
        httpd = serve(Explorer(builder, []))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return open_url(f"http://127.0.0.1:{httpd.server_address[1]}/"), builder

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def test_a_typed_sentence_is_answered_with_the_librarys_maps(
    text_run: Path, served: Served
) -> None:
    opened, builder = served(text_run)
    page = opened.page
    page.fill("#input-text", "a warm funny film")
    page.click("#input-form button[type=submit]")
    page.wait_for_function(
        "() => document.querySelector('#example-label').textContent === 'a warm funny film'"
    )
    expected = builder.example(builder.predictor.example("a warm funny film"), "x")
    maps = np.array(expected["figures"][0]["maps"])  # layers × heads × 4 × 4
    for layer in range(maps.shape[0]):
        for head in range(maps.shape[1]):
            page.select_option("#layer", value=str(layer))
            page.select_option("#head", value=str(head))
            np.testing.assert_allclose(drawn_map(page, (4, 4)), maps[layer, head], atol=1e-5)
    assert page.text_content("#prediction") == expected["prediction"]
    assert opened.errors == []


@pytest.fixture(scope="module")
def image_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ViT on 2 % of the 8 × 8 digits, one epoch."""
    from selfattn.data import RECIPES

    RECIPES["digits"].fetch()
    run = tmp_path_factory.mktemp("explore-image") / "run"
    settings = [f"run_dir={run}", "train.epochs=1", "train.threads=1", "data.train_fraction=0.02"]
    assert (
        main(["train", str(CONFIGS / "digits_vit.toml"), *set_flags(*settings), "--no-progress"])
        == 0
    )
    return run


def _digit_png() -> bytes:
    example = load_dataset("digits").test[0]
    assert example.features is not None
    pixels = example.features[:, 0].reshape(8, 8)
    buffer = io.BytesIO()
    Image.fromarray((pixels / pixels.max() * 255).astype(np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_malformed_upload_shows_one_line_and_the_server_keeps_serving(
    image_run: Path, served: Served
) -> None:
    opened, _ = served(image_run)
    page = opened.page
    assert ".png" in (page.get_attribute("#input-file", "accept") or "")
    broken = {"name": "broken.png", "mimeType": "image/png", "buffer": b"not an image"}
    page.set_input_files("#input-file", broken)
    page.click("#input-form button[type=submit]")
    page.wait_for_selector("#error", state="visible")
    error = page.text_content("#error") or ""
    assert error.startswith("broken.png") and "\n" not in error
    assert "selfattn-explore" not in error  # the temporary file's name is not shown

    real = {"name": "seven.png", "mimeType": "image/png", "buffer": _digit_png()}
    page.set_input_files("#input-file", real)
    page.click("#input-form button[type=submit]")
    page.wait_for_selector("#error", state="hidden")
    assert page.text_content("#example-label") == "seven.png"
    assert page.locator("#overlay-grid .cell").count() == 4 * 4  # 2 × 2 patches of 8 × 8
    assert opened.page_errors == []
    assert all("400" in message for message in opened.console_errors)
