"""The explorer server against hostile and broken clients, over raw sockets: a body is read
only up to its cap whatever the headers say, a client trickling its body or a slow input
never holds up another client, and a dropped client is one line in the log."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from selfattn.explore.payload import PayloadBuilder
from selfattn.explore.server import MAX_UPLOAD, Explorer, Limits, serve
from selfattn.tasks.predictor import Predictor

pytestmark = pytest.mark.usefixtures("one_thread")

LIMITS = Limits(idle=5.0, body=1.0, work=1.0, connection=8.0)


@dataclass
class Served:
    port: int
    predictor: Predictor
    log: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def served(text_run: Path) -> Iterator[Served]:
    predictor = Predictor(text_run)
    builder = PayloadBuilder(predictor, options={}, title="run", serve=True)
    log: list[str] = []
    httpd = serve(Explorer(builder, []), limits=LIMITS, log=log.append)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield Served(httpd.server_address[1], predictor, log)
    httpd.shutdown()
    httpd.server_close()


def form(text: str) -> tuple[str, bytes]:
    """The Content-Type and body of a form with one field ``text``."""
    boundary = uuid.uuid4().hex
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="text"\r\n\r\n{text}\r\n'
        f"--{boundary}--\r\n"
    ).encode()
    return f"multipart/form-data; boundary={boundary}", body


def head(content_type: str, *lines: str) -> bytes:
    fields = ["POST /maps HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {content_type}"]
    return ("\r\n".join([*fields, *lines]) + "\r\n\r\n").encode()


def answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(1 << 16):
        data += chunk
    return data


def status_and_json(data: bytes) -> tuple[int, dict[str, Any]]:
    assert data.count(b"HTTP/1.") == 1, data[:300]  # one answer, whatever followed
    status = int(data.split(b" ", 2)[1])
    return status, json.loads(data.split(b"\r\n\r\n", 1)[1])


def exchange(port: int, request: bytes, *, close_write: bool = False) -> tuple[int, dict]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        if close_write:
            sock.shutdown(socket.SHUT_WR)
        return status_and_json(answer(sock))


def test_a_negative_content_length_is_refused_without_reading_the_body(served: Served) -> None:
    """``rfile.read(-1)`` would read to the end of the stream, past any cap."""
    kind, body = form("a film")
    request = head(kind, "Content-Length: -1") + body
    status, reply = exchange(served.port, request, close_write=True)
    assert status == 400 and "Content-Length '-1' is not one byte count" in reply["error"]


@pytest.mark.parametrize("value", ["+12", " 12x", "1_000", "0x10", "１２"])
def test_content_lengths_that_are_not_digits_are_refused(served: Served, value: str) -> None:
    kind, body = form("a film")
    status, reply = exchange(served.port, head(kind, f"Content-Length: {value}") + body)
    assert status == 400 and "is not one byte count" in reply["error"]


def test_spaces_around_a_content_length_are_allowed(served: Served) -> None:
    kind, body = form("a film")
    status, _ = exchange(served.port, head(kind, f"Content-Length:  {len(body)} \t") + body)
    assert status == 200


def test_two_different_content_lengths_are_refused(served: Served) -> None:
    kind, body = form("a film")
    lengths = [f"Content-Length: {len(body)}", f"Content-Length: {len(body) + 1}"]
    status, reply = exchange(served.port, head(kind, *lengths) + body)
    assert status == 400 and "not one byte count" in reply["error"]


@pytest.mark.parametrize(
    "lines",
    [[], ["Transfer-Encoding: chunked"], ["Transfer-Encoding: chunked", "Content-Length: 5"]],
)
def test_no_content_length_or_a_chunked_body_needs_a_length(
    served: Served, lines: list[str]
) -> None:
    kind, body = form("a film")
    chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    status, reply = exchange(served.port, head(kind, *lines) + chunked, close_write=True)
    assert status == 411 and "needs a Content-Length" in reply["error"]
    assert ("chunked" in reply["error"]) == bool(lines)


def test_a_content_length_over_the_cap_is_refused_unread(served: Served) -> None:
    kind, _ = form("a film")
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(head(kind, f"Content-Length: {MAX_UPLOAD + 1}"))
        status, reply = status_and_json(answer(sock))
    assert status == 413 and f"at most {MAX_UPLOAD:,}" in reply["error"]


def test_a_content_length_shorter_than_the_body_reads_no_more(served: Served) -> None:
    """What follows the declared length is never read as a request of its own."""
    kind, body = form("a film")
    smuggled = b"GET /secret HTTP/1.1\r\nHost: x\r\n\r\n"
    status, _ = exchange(served.port, head(kind, f"Content-Length: {len(body)}") + body + smuggled)
    assert status == 200
    cut = body.index(b"film") + 2  # the server sees "a fi" and no closing boundary
    status, reply = exchange(served.port, head(kind, f"Content-Length: {cut}") + body)
    assert status == 200 and [example["label"] for example in reply["examples"]] == ["a fi"]


def test_a_content_length_longer_than_the_body_times_out(served: Served) -> None:
    kind, body = form("a film")
    started = time.monotonic()
    status, reply = exchange(served.port, head(kind, f"Content-Length: {len(body) + 100}") + body)
    assert status == 408 and f"{len(body):,} of {len(body) + 100:,} bytes" in reply["error"]
    assert time.monotonic() - started < LIMITS.body + 3


def post_text(port: int, text: str) -> tuple[int, dict[str, Any], float]:
    kind, body = form(text)
    started = time.monotonic()
    status, reply = exchange(port, head(kind, f"Content-Length: {len(body)}") + body)
    return status, reply, time.monotonic() - started


def test_a_client_trickling_its_body_is_cut_off_and_holds_nobody_up(served: Served) -> None:
    kind, body = form("a film")
    result: list[tuple[int, dict]] = []

    def trickle() -> None:
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
            sock.sendall(head(kind, f"Content-Length: {len(body)}"))
            try:
                for byte in body:
                    sock.sendall(bytes([byte]))
                    time.sleep(0.05)
            except OSError:  # the server has answered and closed
                pass
            result.append(status_and_json(answer(sock)))

    slow = threading.Thread(target=trickle)
    slow.start()
    time.sleep(0.2)
    status, _, seconds = post_text(served.port, "a warm film")
    assert status == 200 and seconds < 1.0  # answered while the other still trickles
    slow.join(timeout=10)
    [(status, reply)] = result
    assert status == 408 and "did not arrive in time" in reply["error"]


def test_a_slow_input_is_answered_503_in_time_and_holds_nobody_up(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that takes long (a huge molecule, say) is bounded by ``Limits.work``; the
    model serves other requests meanwhile."""
    read = served.predictor.example

    def slow_to_read(line: str, source: str = "") -> Any:
        if line == "slow":
            time.sleep(3 * LIMITS.work)
        return read(line, source)

    monkeypatch.setattr(served.predictor, "example", slow_to_read)
    result: list[tuple[int, dict, float]] = []
    slow = threading.Thread(target=lambda: result.append(post_text(served.port, "slow")))
    slow.start()
    time.sleep(0.2)
    status, _, seconds = post_text(served.port, "a warm film")
    assert status == 200 and seconds < 1.0
    slow.join(timeout=10)
    [(status, reply, seconds)] = result
    assert status == 503 and f"longer than {LIMITS.work:g} s" in reply["error"]
    assert seconds < LIMITS.work + 1.0


def test_a_dropped_client_is_one_line_in_the_log(
    served: Served, capfd: pytest.CaptureFixture[str]
) -> None:
    kind, body = form("a film")
    served.log.clear()
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(head(kind, f"Content-Length: {len(body) + 1000}") + body)
    # An abort: the connection reset mid-body.
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(head(kind, f"Content-Length: {len(body) + 1000}") + body)
        time.sleep(0.2)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    deadline = time.monotonic() + 5
    while len(served.log) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(served.log) == 2, served.log
    first, second = served.log
    assert first.startswith("127.0.0.1:") and "POST /maps: dropped" in first
    assert f"the body ended after {len(body):,} of {len(body) + 1000:,} bytes" in first
    assert "POST /maps: dropped" in second and "reset" in second.lower()
    assert all("\n" not in line for line in served.log)
    assert "Traceback" not in capfd.readouterr().err
    assert post_text(served.port, "a film")[0] == 200
