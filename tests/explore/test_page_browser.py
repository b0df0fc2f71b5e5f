"""The explorer page in a real browser (headless Chromium, see conftest.py): it opens from
a file URL without errors, draws the payload's weights for the selected layer and head,
isolates rows on hover, selects heads from the matrix view and the statistics, paints
image / speech / graph overlays, shows hostile tokens as text, and in served mode posts
inputs to /maps and shows the answer or a one-line error."""

from __future__ import annotations

import base64
import io
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

import numpy as np
import pytest

from selfattn.explore.page import render_page

SENTENCE = ["the", "cat", "sat", "on", "the", "mat"]
HOSTILE = ["<script>window.hacked=1</script>", '<img src=x onerror="window.hacked=1">']

READ_LINES = """() => Array.from(document.querySelectorAll('#head-view line'),
    (line) => [Number(line.dataset.q), Number(line.dataset.k), Number(line.dataset.weight),
               getComputedStyle(line).display !== 'none'])"""


def drawn_map(page: Any, shape: tuple[int, int]) -> np.ndarray:
    """The head view's weights read back from the lines' data-weight (NaN where no line)."""
    weights = np.full(shape, np.nan)
    for q, k, weight, _ in page.evaluate(READ_LINES):
        weights[q, k] = weight
    return weights


def overlay_cells(page: Any, selector: str) -> list[tuple[float, str]]:
    """(data-weight, computed background colour) of each overlay cell."""
    return page.evaluate(
        f"""() => Array.from(document.querySelectorAll('{selector}'),
            (cell) => [Number(cell.dataset.weight), getComputedStyle(cell).backgroundColor])"""
    )


def png_data_url(height: int = 4, width: int = 6) -> str:
    from PIL import Image

    pixels = np.arange(height * width * 3, dtype=np.uint8).reshape(height, width, 3)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


@pytest.fixture
def two_examples(make_figure, make_example, make_payload) -> dict[str, Any]:
    return make_payload(
        [
            make_example("the cat sat on the mat", "positive", [make_figure(SENTENCE, seed=1)]),
            make_example("a dog", "negative", [make_figure(["a", "dog"], seed=2)]),
        ]
    )


def test_static_files_cannot_end_their_element() -> None:
    static = resources.files("selfattn.explore").joinpath("static")
    assert "</script" not in static.joinpath("explorer.js").read_text("utf-8").lower()
    assert "</style" not in static.joinpath("explorer.css").read_text("utf-8").lower()


def test_static_page_opens_without_errors(open_payload, two_examples) -> None:
    opened = open_payload(two_examples)
    page = opened.page
    assert page.locator("#example option").count() == 2
    assert page.text_content("#example-label") == "the cat sat on the mat"
    assert page.text_content("#prediction") == "positive"
    assert page.locator("#head-view line").count() == len(SENTENCE) ** 2
    assert page.locator("#error").is_hidden()

    page.select_option("#example", value="1")
    assert page.text_content("#example-label") == "a dog"
    assert page.text_content("#prediction") == "negative"
    assert page.locator("#head-view line").count() == 4
    assert opened.errors == []


def test_layer_and_head_draw_the_payload_weights(open_payload, two_examples) -> None:
    opened = open_payload(two_examples)
    page = opened.page
    maps = np.array(two_examples["examples"][0]["figures"][0]["maps"])
    for layer, head in [(0, 0), (1, 2), (1, 0), (0, 1)]:
        page.select_option("#layer", value=str(layer))
        page.select_option("#head", value=str(head))
        np.testing.assert_allclose(drawn_map(page, maps.shape[2:]), maps[layer, head], atol=1e-5)
    page.select_option("#head", value="mean")
    np.testing.assert_allclose(drawn_map(page, maps.shape[2:]), maps[0].mean(0), atol=1e-5)
    assert opened.errors == []


def test_big_maps_skip_light_lines_but_keep_the_weights(
    open_payload, make_figure, make_example, make_payload
) -> None:
    tokens = [f"t{n}" for n in range(70)]  # 4900 cells: more than the page draws in full
    figure = make_figure(tokens, seed=14)
    opened = open_payload(make_payload([make_example("long", "x", [figure])]))
    page = opened.page
    maps = np.array(figure["maps"])
    drawn = drawn_map(page, maps.shape[2:])
    heavy = maps[0, 0] >= 0.005
    np.testing.assert_allclose(drawn[heavy], maps[0, 0][heavy], atol=1e-5)
    assert np.isnan(drawn[~heavy]).all()
    # The light weights are still there for whoever reads the page's state.
    np.testing.assert_allclose(page.evaluate("() => window.explorer.headMap()"), maps[0, 0])
    assert opened.errors == []


def test_hovering_a_query_isolates_its_row(open_payload, two_examples) -> None:
    page = open_payload(two_examples).page
    page.hover('#head-view text.query[data-i="2"]')
    shown = [(q, k) for q, k, _, visible in page.evaluate(READ_LINES) if visible]
    assert shown == [(2, k) for k in range(len(SENTENCE))]

    page.mouse.move(1, 1)  # leave the token: every line again
    assert all(visible for *_, visible in page.evaluate(READ_LINES))


def test_clicking_a_heatmap_selects_and_enlarges_that_head(open_payload, two_examples) -> None:
    opened = open_payload(two_examples)
    page = opened.page
    maps = np.array(two_examples["examples"][0]["figures"][0]["maps"])
    page.select_option("#layer", value="1")
    heatmaps = page.locator("#matrix-view canvas")
    assert heatmaps.count() == 3
    assert page.locator("#matrix-zoom").is_hidden()

    page.click('#matrix-view canvas[data-layer="1"][data-head="2"]')
    assert page.input_value("#head") == "2"
    assert page.locator("#matrix-zoom").is_visible()
    assert page.get_attribute("#matrix-zoom", "data-head") == "2"
    np.testing.assert_allclose(drawn_map(page, maps.shape[2:]), maps[1, 2], atol=1e-5)
    assert opened.errors == []


def test_head_statistics_sort_and_select(open_payload, two_examples) -> None:
    opened = open_payload(two_examples)
    page = opened.page
    distance = np.array(two_examples["examples"][0]["figures"][0]["distance"])
    read_order = """() => Array.from(document.querySelectorAll('#head-stats tbody tr'),
        (row) => [Number(row.dataset.layer), Number(row.dataset.head)])"""
    ascending = sorted(np.ndindex(distance.shape), key=lambda lh: distance[lh])

    page.click('#head-stats th[data-key="distance"]')
    assert [tuple(row) for row in page.evaluate(read_order)] == ascending
    page.click('#head-stats th[data-key="distance"]')
    assert [tuple(row) for row in page.evaluate(read_order)] == ascending[::-1]

    page.click('#head-stats tr[data-layer="1"][data-head="1"]')
    assert (page.input_value("#layer"), page.input_value("#head")) == ("1", "1")
    assert page.locator('#head-stats tr.selected[data-layer="1"][data-head="1"]').count() == 1
    page.click('#head-scatter circle[data-layer="0"][data-head="2"]')
    assert (page.input_value("#layer"), page.input_value("#head")) == ("0", "2")
    assert page.locator("#head-scatter circle").count() == distance.size
    assert opened.errors == []


def test_seq2seq_figures_and_the_decoded_output(
    open_payload, make_figure, make_example, make_payload
) -> None:
    frames, output = [f"frame {f}" for f in range(8)], ["<s>", "i", "saw"]
    figures = [
        make_figure(output, frames, seed=11, title="cross-attention", layer="decoder layer"),
        make_figure(frames, seed=12, title="encoder self-attention", layer="encoder layer"),
        make_figure(output, seed=13, title="decoder self-attention", layer="decoder layer"),
    ]
    spectrogram = {"src": png_data_url(4, 8), "rows": 1, "cols": 8}
    speech = make_example("a.wav", "i saw", figures, spectrogram=spectrogram)
    opened = open_payload(make_payload([speech], task="seq2seq", input="speech"))
    page = opened.page
    assert page.locator("#output").is_visible()
    assert "i saw" in page.text_content("#output")
    cross = np.array(figures[0]["maps"])
    np.testing.assert_allclose(drawn_map(page, (3, 8)), cross[0, 0], atol=1e-5)
    page.click('#head-view text.query[data-i="2"]')  # the strip shows what "saw" attends to
    bars = overlay_cells(page, "#overlay-strip .frame")
    np.testing.assert_allclose([w for w, _ in bars], cross[0, 0, 2], atol=1e-5)
    # Cross-attention has no distance: shown as "—", sorted last, the page keeps working.
    page.click('#head-stats th[data-key="distance"]')
    assert page.locator("#head-stats tbody tr").count() == cross.shape[0] * cross.shape[1]

    page.select_option("#figure", value="2")
    assert page.input_value("#layer") == "0"
    assert page.text_content("#layer option") == "decoder layer 1"
    decoder = np.array(figures[2]["maps"])
    np.testing.assert_allclose(drawn_map(page, (3, 3)), decoder[0, 0], atol=1e-5)
    assert page.locator("#overlay-strip").count() == 0  # its keys are not the frames
    assert opened.errors == []


def test_image_overlay_paints_the_selected_query_row(
    open_payload, make_figure, make_example, make_payload
) -> None:
    rows, cols = 2, 3
    keys = ["[CLS]"] + [f"patch {p}" for p in range(rows * cols)]
    figure = make_figure(keys, seed=3)
    image = {"src": png_data_url(), "rows": rows, "cols": cols}
    opened = open_payload(
        make_payload([make_example("cat.png", "cat", [figure], image=image)], input="image")
    )
    page = opened.page
    maps = np.array(figure["maps"])

    def check(query: int) -> None:
        cells = overlay_cells(page, "#overlay-grid .cell")
        assert len(cells) == rows * cols
        row = maps[0, 0, query, 1:]
        np.testing.assert_allclose([w for w, _ in cells], row, atol=1e-5)
        alphas = [float(colour.rstrip(")").split(",")[3]) for _, colour in cells]
        # The browser keeps alpha in 8 bits.
        np.testing.assert_allclose(alphas, 0.85 * row / row.max(), atol=1 / 255 + 1e-4)

    assert page.locator("#overlay-image").is_visible()
    check(0)  # [CLS] first: it is the query shown, and listed beside the grid as a key
    assert page.text_content("#overlay-extra .chip") == "[CLS]"
    page.click('#overlay-grid .cell[data-pos="4"]')  # patch 4 is query 5
    check(5)
    assert page.locator('#head-view text.query.selected[data-i="5"]').count() == 1
    page.click('#head-view text.query[data-i="2"]')
    check(2)
    assert opened.errors == []


def test_speech_and_graph_overlays(open_payload, make_figure, make_example, make_payload) -> None:
    frames = 8
    speech = make_figure([f"frame {f}" for f in range(frames)], seed=4)
    spectrogram = {"src": png_data_url(4, frames), "rows": 1, "cols": frames}
    opened = open_payload(
        make_payload(
            [make_example("a.wav", "yes", [speech], spectrogram=spectrogram)], input="speech"
        ),
        name="speech.html",
    )
    bars = overlay_cells(opened.page, "#overlay-strip .frame")
    np.testing.assert_allclose([w for w, _ in bars], np.array(speech["maps"])[0, 0, 0], atol=1e-5)
    assert opened.errors == []

    nodes = [[0.1, 0.1], [0.9, 0.1], [0.5, 0.5], [0.1, 0.9], [0.9, 0.9]]
    edges = [[0, 1], [0, 2], [1, 2], [2, 3], [2, 4], [3, 4]]
    graph = make_figure([f"node {n}" for n in range(len(nodes))], seed=5)
    opened = open_payload(
        make_payload(
            [make_example("g.json", "1", [graph], graph={"nodes": nodes, "edges": edges})],
            input="graph",
        ),
        name="graph.html",
    )
    page = opened.page
    page.select_option("#layer", value="1")
    page.select_option("#head", value="2")
    lines = page.evaluate(
        """() => Array.from(document.querySelectorAll('#overlay-graph line.edge'),
            (line) => [Number(line.dataset.i), Number(line.dataset.j),
                       Number(line.dataset.weight)])"""
    )
    assert len(lines) == len(edges)
    maps = np.array(graph["maps"])[1, 2]
    for i, j, weight in lines:
        assert weight == pytest.approx((maps[i, j] + maps[j, i]) / 2, abs=1e-5)
    page.click('#overlay-graph circle[data-node="3"]')
    assert page.locator('#overlay-graph circle.selected[data-node="3"]').count() == 1
    assert page.locator("#overlay-graph circle").count() == len(nodes)
    assert opened.errors == []


def test_a_cut_input_shows_its_note_and_others_none(
    open_payload, make_figure, make_example, make_payload
) -> None:
    note = "showing the first 6 of 9 tokens (--max-tokens)"
    cut = make_example("the cat sat on the mat and more", "positive", [make_figure(SENTENCE)])
    whole = make_example("a dog", "negative", [make_figure(["a", "dog"], seed=2)])
    opened = open_payload(make_payload([{**cut, "note": note}, {**whole, "note": None}]))
    page = opened.page
    assert page.text_content("#example-note") == note and page.is_visible("#example-note")
    page.select_option("#example", value="1")
    assert page.locator("#example-note").is_hidden()
    assert opened.errors == []


def test_hostile_tokens_show_as_text(open_payload, make_figure, make_example, make_payload) -> None:
    tokens = ["hello", *HOSTILE]
    hostile = make_payload(
        [make_example(HOSTILE[0], HOSTILE[1], [make_figure(tokens, seed=6, title=HOSTILE[1])])],
        title=HOSTILE[0],
    )
    opened = open_payload(hostile)
    page = opened.page
    queries = page.evaluate(
        "() => Array.from(document.querySelectorAll('#head-view text.query'), t => t.textContent)"
    )
    keys = page.evaluate(
        "() => Array.from(document.querySelectorAll('#head-view text.key'), t => t.textContent)"
    )
    assert queries == tokens and keys == tokens
    assert page.text_content("#example-label") == HOSTILE[0]
    assert page.text_content("#prediction") == HOSTILE[1]
    assert page.text_content("h1") == HOSTILE[0]
    assert page.evaluate("() => window.hacked") is None
    assert page.evaluate("() => document.querySelectorAll('img, #app script').length") == 0
    assert opened.errors == []


def test_another_payload_version_is_refused_visibly(open_url, two_examples, tmp_path) -> None:
    html = render_page(two_examples).replace('"version":1', '"version":2', 1)
    path = tmp_path / "v2.html"
    path.write_text(html, encoding="utf-8")
    page = open_url(path.as_uri()).page
    assert page.locator("#error").is_visible()
    assert "version" in page.text_content("#error")
    assert page.locator("#head-view").is_hidden()


# ----------------------------------------------------------------------- served mode


class StubServer:
    """Serves one page at / and answers POST /maps with ``reply`` (status, JSON)."""

    def __init__(self, page: str) -> None:
        self.page = page.encode("utf-8")
        self.reply: tuple[int, dict[str, Any]] = (500, {"error": "no reply set"})
        self.posted: list[bytes] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/":
                    self._send(200, "text/html; charset=utf-8", stub.page)
                else:
                    self._send(404, "text/plain", b"not found")

            def do_POST(self) -> None:
                stub.posted.append(self.rfile.read(int(self.headers["Content-Length"])))
                assert self.headers["Content-Type"].startswith("multipart/form-data")
                status, body = stub.reply
                self._send(status, "application/json", json.dumps(body).encode("utf-8"))

            def _send(self, status: int, kind: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve_page() -> Iterator[Callable[[dict[str, Any]], StubServer]]:
    servers: list[StubServer] = []

    def serve(payload: dict[str, Any]) -> StubServer:
        servers.append(StubServer(render_page(payload)))
        return servers[-1]

    yield serve
    for server in servers:
        server.close()


def test_served_page_shows_the_answer_to_a_typed_sentence(
    serve_page, open_url, make_figure, make_example, make_payload
) -> None:
    start = make_example("a dog", "negative", [make_figure(["a", "dog"], seed=7)])
    server = serve_page(make_payload([start], serve=True))
    answer = make_example("the cat sat", "positive", [make_figure(["the", "cat", "sat"], seed=8)])
    server.reply = (200, {"examples": [answer]})
    opened = open_url(server.url)
    page = opened.page
    assert page.locator("#input-file").count() == 0

    page.fill("#input-text", "the cat sat")
    page.click("#input-form button[type=submit]")
    page.wait_for_function("() => document.querySelectorAll('#example option').length === 2")
    assert page.text_content("#example-label") == "the cat sat"
    assert page.input_value("#example") == "1"
    maps = np.array(answer["figures"][0]["maps"])
    np.testing.assert_allclose(drawn_map(page, (3, 3)), maps[0, 0], atol=1e-5)
    assert b'name="text"' in server.posted[0] and b"the cat sat" in server.posted[0]
    assert page.locator("#error").is_hidden()
    assert opened.errors == []


def test_served_page_shows_a_one_line_error_and_keeps_working(
    serve_page, open_url, make_figure, make_example, make_payload
) -> None:
    frames = 4
    figure = make_figure([f"frame {f}" for f in range(frames)], seed=9)
    spectrogram = {"src": png_data_url(4, frames), "rows": 1, "cols": frames}
    start = make_example("a.wav", "yes", [figure], spectrogram=spectrogram)
    server = serve_page(make_payload([start], input="speech", serve=True, accept=".wav"))
    opened = open_url(server.url)
    page = opened.page
    assert page.get_attribute("#input-file", "accept") == ".wav"

    server.reply = (400, {"error": "x.wav: not a WAV file"})
    page.set_input_files("#input-file", {"name": "x.wav", "mimeType": "audio/wav", "buffer": b"no"})
    page.click("#input-form button[type=submit]")
    page.wait_for_selector("#error", state="visible")
    assert page.text_content("#error") == "x.wav: not a WAV file"
    assert b'name="file"; filename="x.wav"' in server.posted[0]
    assert page.locator("#example option").count() == 1

    # The page still works: a head is selected as before, and the next upload is shown.
    page.select_option("#head", value="1")
    np.testing.assert_allclose(
        drawn_map(page, (frames, frames)), np.array(figure["maps"])[0, 1], atol=1e-5
    )
    second = make_example("b.wav", "no", [figure], spectrogram=spectrogram)
    server.reply = (200, {"examples": [second]})
    page.set_input_files("#input-file", {"name": "b.wav", "mimeType": "audio/wav", "buffer": b"ok"})
    page.click("#input-form button[type=submit]")
    page.wait_for_selector("#error", state="hidden")
    assert page.text_content("#example-label") == "b.wav"
    # The browser logs the 400 as a failed resource; nothing else may go wrong.
    assert opened.page_errors == []
    assert all("400" in message for message in opened.console_errors)


def test_served_page_without_examples_waits_for_an_input(
    serve_page, open_url, make_figure, make_example, make_payload
) -> None:
    server = serve_page(make_payload([], serve=True))
    answers = [
        make_example(text, "positive", [make_figure(text.split(), seed=10 + n)])
        for n, text in enumerate(["one two", "three four five"])
    ]
    server.reply = (200, {"examples": answers})
    opened = open_url(server.url)
    page = opened.page
    assert page.locator("#empty").is_visible()
    assert page.locator("#head-view").is_hidden()

    page.fill("#input-text", "one two")
    page.press("#input-text", "Enter")
    page.wait_for_selector("#head-view", state="visible")
    assert page.locator("#empty").is_hidden()
    assert page.locator("#example option").count() == 2
    assert page.text_content("#example-label") == "one two"  # the first new example
    assert opened.errors == []
