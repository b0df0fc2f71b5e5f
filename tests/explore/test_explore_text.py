"""``selfattn explore`` and ``attention --stats`` on a small trained text classifier: the
page's maps are the library's attention weights, its tokens stay text, and the served page
answers new inputs (and refuses bad ones in one line, and keeps serving)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import selfattn
from selfattn.cli.main import main
from selfattn.explore import read_payload
from selfattn.explore.payload import PayloadBuilder
from selfattn.explore.server import MAX_UPLOAD, Explorer, serve
from selfattn.explore.stats import head_statistics, position_distances
from selfattn.kernels import AttentionKernel
from selfattn.tasks.predictor import Predictor

pytestmark = pytest.mark.usefixtures("one_thread")

HOSTILE = "<script>window.hacked=1</script>"


@pytest.fixture
def run_dir(text_run: Path) -> Path:
    return text_run


def explore(run_dir: Path, tmp_path: Path, *inputs: str) -> dict[str, Any]:
    page = tmp_path / "page.html"
    assert main(["explore", str(run_dir), *inputs, "-o", str(page), "--threads", "1"]) == 0
    return read_payload(page.read_text(encoding="utf-8"))


def test_page_maps_are_the_librarys_attention_weights(run_dir: Path, tmp_path: Path) -> None:
    """Each layer's map equals selfattn.attention(..., need_weights=True) on the queries and
    keys the model computes when it predicts (with its fused kernel, weights not asked)."""
    text = "a warm funny film"
    [example] = explore(run_dir, tmp_path, text)["examples"]
    [figure] = example["figures"]
    assert figure["queries"] == figure["keys"] == text.split()

    predictor = Predictor(run_dir)
    calls: list[dict[str, Any]] = []

    def record(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        calls.append({"qkv": args[:3], **kwargs})

    kernels = [m for m in predictor.model.modules() if isinstance(m, AttentionKernel)]
    handles = [kernel.register_forward_pre_hook(record, with_kwargs=True) for kernel in kernels]
    try:
        predictor.predict(predictor.example(text))
    finally:
        for handle in handles:
            handle.remove()
    assert len(calls) == len(figure["maps"]) == 2
    for layer, call in enumerate(calls):
        assert not call["need_weights"]  # prediction ran the fast path
        q, k, v = call["qkv"]
        options = {
            name: call[name]
            for name in ("key_padding_mask", "mask", "causal", "score", "normalizer")
        }
        _, weights = selfattn.attention(q, k, v, need_weights=True, **options)
        assert weights is not None
        shown = torch.tensor(figure["maps"][layer])
        torch.testing.assert_close(shown, weights[0].float(), atol=1e-6, rtol=0)


def test_stats_are_the_formulas_on_the_shown_maps(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "the best great film"
    [example] = explore(run_dir, tmp_path, text)["examples"]
    [figure] = example["figures"]
    capsys.readouterr()
    assert main(["attention", str(run_dir), text, "--stats", "--threads", "1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    [stats] = printed["figures"]
    maps = [torch.tensor(layer, dtype=torch.float64) for layer in figure["maps"]]
    distance, entropy = head_statistics(maps, position_distances(len(figure["keys"])))
    assert distance is not None
    for row in stats["heads"]:
        layer, head = row["layer"], row["head"]
        assert row["distance"] == pytest.approx(distance[layer][head], abs=1e-5)
        assert row["entropy"] == pytest.approx(entropy[layer][head], abs=1e-5)
        assert figure["distance"][layer][head] == pytest.approx(row["distance"], abs=1e-6)
    assert len(stats["heads"]) == 2 * 2  # layers × heads


def test_page_is_self_contained_and_tokens_stay_text(run_dir: Path, tmp_path: Path) -> None:
    explore(run_dir, tmp_path, f"a dull {HOSTILE} film", "a warm film")
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert HOSTILE not in page and "<script>window" not in page  # escaped in the data
    assert page.count("<script") == 2  # the payload and the page's own script
    for reference in ('src="http', "src='http", 'href="http', "@import", "fetch('http"):
        assert reference not in page  # nothing loaded from a network
    payload = read_payload(page)
    assert payload["serve"] is False and len(payload["examples"]) == 2
    first = payload["examples"][0]
    assert "<" in first["figures"][0]["queries"] and "<" in first["label"]  # kept as data


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give at least one INPUT to show, or --serve"),
        (["photo.png"], "photo.png: this model reads text"),
        (["--serve", "--port", "70000"], "--port must be in 0…65535"),
    ],
)
def test_explore_refusals_are_one_line(
    run_dir: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["explore", str(run_dir), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("selfattn explore: error: ") and message in err
    assert len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------------- the server


@pytest.fixture(scope="module")
def server(text_run: Path) -> Iterator[str]:
    predictor = Predictor(text_run)
    builder = PayloadBuilder(predictor, options={}, title="run", serve=True)
    httpd = serve(Explorer(builder, []), "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def post(url: str, fields: dict[str, tuple[str | None, bytes]]) -> tuple[int, dict[str, Any]]:
    """POST multipart form data; the status and the JSON answer."""
    boundary = uuid.uuid4().hex
    body = b""
    for name, (filename, data) in fields.items():
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"'
        body += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
        body += data + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    request = urllib.request.Request(
        url + "/maps",
        data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_served_page_is_the_page_with_an_input_box(server: str) -> None:
    with urllib.request.urlopen(server + "/", timeout=30) as answer:
        assert answer.headers["Content-Type"].startswith("text/html")
        payload = read_payload(answer.read().decode("utf-8"))
    assert payload["serve"] is True and payload["examples"] == []


def test_served_maps_equal_the_written_pages(server: str, run_dir: Path, tmp_path: Path) -> None:
    text = "a warm funny film"
    status, answer = post(server, {"text": (None, f"{text}\n@/etc/passwd\n".encode())})
    assert status == 200
    first, second = answer["examples"]
    written = explore(run_dir, tmp_path, text)["examples"][0]
    assert first["figures"] == written["figures"]
    assert first["prediction"] == written["prediction"]
    assert second["label"] == "@/etc/passwd"  # typed text is never read as a file


@pytest.mark.parametrize(
    ("fields", "status", "message"),
    [
        ({"file": ("photo.png", b"\x89PNG")}, 400, "photo.png: this model reads text; type it"),
        ({"text": (None, b"   ")}, 400, "nothing to explore"),
        ({"text": (None, b"\xff\xfe")}, 400, "typed text is not UTF-8"),
        ({"text": (None, b"x\n" * 21)}, 400, "21 lines; the explorer takes at most 20"),
    ],
)
def test_bad_posts_get_one_line_and_the_server_keeps_serving(
    server: str, fields: dict[str, tuple[str | None, bytes]], status: int, message: str
) -> None:
    code, answer = post(server, fields)
    assert code == status and message in answer["error"]
    assert "\n" not in answer["error"]
    assert post(server, {"text": (None, b"a film")})[0] == 200


def test_oversized_and_non_form_posts_are_refused(server: str) -> None:
    request = urllib.request.Request(
        server + "/maps", data=b"{}", headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400
    assert "multipart/form-data" in json.loads(refused.value.read())["error"]
    request = urllib.request.Request(
        server + "/maps",
        data=b"x",
        headers={"Content-Type": "multipart/form-data; boundary=b"},
        method="POST",
    )
    request.add_header("Content-Length", str(MAX_UPLOAD + 1))
    with pytest.raises((urllib.error.HTTPError, urllib.error.URLError, ConnectionError)) as big:
        urllib.request.urlopen(request, timeout=30)
    if isinstance(big.value, urllib.error.HTTPError):
        assert big.value.code == 413
    assert post(server, {"text": (None, b"a film")})[0] == 200


def test_the_server_binds_to_this_machine_only_by_default(run_dir: Path) -> None:
    builder = PayloadBuilder(Predictor(run_dir), options={}, title="run", serve=True)
    httpd = serve(Explorer(builder, []))
    try:
        assert httpd.server_address[0] == "127.0.0.1"
    finally:
        httpd.server_close()


def test_explore_serve_from_the_command_line_stops_on_ctrl_c(text_run: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "selfattn", "explore", str(text_run), "a film"]
    process = subprocess.Popen(
        [*command, "--serve", "--port", "0", "--threads", "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"at (http://127\.0\.0\.1:\d+/) ", line)
        assert match, line
        with urllib.request.urlopen(match.group(1), timeout=30) as answer:
            payload = read_payload(answer.read().decode("utf-8"))
        assert payload["serve"] is True and payload["examples"][0]["label"] == "a film"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
        assert process.returncode == 0 and "stopped" in out, err
    finally:
        process.kill()
