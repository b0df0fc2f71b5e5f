"""The explorer's payload is bounded: linear in the attention weights it shows (about 9
bytes each), an input past ``--max-tokens`` refused in one line before the model runs, and
a page or an answer past ``--max-weights`` weights refused in one line (with
``--truncate`` a long input shows its first tokens and a note)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from selfattn.cli.main import main
from selfattn.explore.page import embed_json
from selfattn.explore.payload import MAX_TOKENS, PayloadBuilder
from selfattn.explore.server import Explorer, serve
from selfattn.tasks.predictor import Predictor

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = ["a", "warm", "funny", "film", "dull", "the", "best"]


def words(count: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(count))


@pytest.fixture(scope="module")
def predictor(text_run: Path) -> Predictor:
    return Predictor(text_run)


@pytest.mark.parametrize("tokens", [16, 64, 160])
def test_the_payload_is_linear_in_the_weights_shown(predictor: Predictor, tokens: int) -> None:
    builder = PayloadBuilder(predictor, options={}, title="run")
    text = words(tokens)
    [example] = builder.examples([(predictor.example(text), text)])
    weights = sum(len(row) for f in example["figures"] for m in f["maps"] for h in m for row in h)
    assert weights == 2 * 2 * tokens * tokens  # layers × heads × T × T
    size = len(embed_json(builder.payload([example])))
    assert size < 10 * weights + 40 * tokens + 2000  # 6 decimals and a comma a weight


def test_an_input_over_max_tokens_is_refused_before_the_model_runs(
    predictor: Predictor, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = PayloadBuilder(predictor, options={}, title="run", max_tokens=8)
    monkeypatch.setattr(predictor, "attention", lambda *a, **k: pytest.fail("the model ran"))
    with pytest.raises(ValueError) as refused:
        builder.example(predictor.example(words(9), "<typed>:1"), words(9))
    assert str(refused.value) == (
        "<typed>:1: 9 tokens; the explorer shows at most 8 per input "
        "(--max-tokens changes it; --truncate shows its first)"
    )


def test_with_truncate_a_long_input_shows_its_first_tokens_and_says_so(
    predictor: Predictor,
) -> None:
    builder = PayloadBuilder(predictor, options={}, title="run", max_tokens=8, truncate=True)
    [cut, whole] = builder.examples(
        [(predictor.example(words(9), "<typed>:1"), words(9)), (predictor.example("a film"), "")]
    )
    assert cut["figures"][0]["queries"] == words(8).split()
    assert cut["note"] == "showing the first 8 of 9 tokens (--max-tokens)"
    assert whole["note"] is None


def test_inputs_over_max_weights_together_are_refused(predictor: Predictor) -> None:
    builder = PayloadBuilder(predictor, options={}, title="run", max_weights=100)
    four = predictor.example(words(4), "a:1")  # 2 layers × 2 heads × 4 × 4 = 64 weights
    assert len(builder.examples([(four, "four")])) == 1
    with pytest.raises(
        ValueError,
        match="^a:1: its maps hold 64 attention weights; the "
        "explorer shows at most 100 at once, 64 of them taken by the inputs "
        r"before it \(--max-weights changes it\)$",
    ):
        builder.examples([(four, "four"), (four, "four")])


def test_explore_refuses_a_long_text_in_one_line_naming_the_option(
    text_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "page.html"
    text = words(MAX_TOKENS + 1)
    assert main(["explore", str(text_run), text, "-o", str(page), "--threads", "1"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and not page.exists()
    assert f"{MAX_TOKENS + 1:,} tokens; the explorer shows at most {MAX_TOKENS:,}" in err
    assert "(--max-tokens changes it; --truncate shows its first)" in err
    more = ["--max-tokens", str(MAX_TOKENS + 1)]
    assert main(["explore", str(text_run), text, "-o", str(page), "--threads", "1", *more]) == 0
    assert page.exists()


@pytest.mark.parametrize("option", ["--max-tokens", "--max-weights"])
def test_limits_below_one_are_refused(
    text_run: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    assert main(["explore", str(text_run), "a film", option, "0", "--threads", "1"]) == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_the_server_refuses_a_long_typed_text_in_one_line(predictor: Predictor) -> None:
    builder = PayloadBuilder(predictor, options={}, title="run", serve=True, max_tokens=32)
    httpd = serve(Explorer(builder, []))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        boundary = uuid.uuid4().hex
        body = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="text"\r\n\r\n'
            f"a film\n{words(33)}\r\n--{boundary}--\r\n"
        ).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{httpd.server_address[1]}/maps",
            data=body,
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 400
        error = json.loads(refused.value.read())["error"]
        assert error == (
            "<typed>:2: 33 tokens; the explorer shows at most 32 per input "
            "(--max-tokens changes it; --truncate shows its first)"
        )
    finally:
        httpd.shutdown()
        httpd.server_close()
