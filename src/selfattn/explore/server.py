"""``selfattn explore RUN --serve``: the explorer page on 127.0.0.1, answering new inputs.

The standard library's threading HTTP server is enough for one user on their own machine:

* ``GET /`` is the page (the same file ``selfattn explore -o`` writes, with an input box);
* ``POST /maps`` (``multipart/form-data``) takes a field ``text`` (text models: one input
  per line) or ``file`` (an upload of the model's kind) and answers
  ``{"examples": [...]}`` in the payload's format, or ``{"error": "one line"}`` with status
  400 (bad input), 413 (too large) or 500 (a bug: the server keeps running).

Safety: the server binds to 127.0.0.1 unless told otherwise; an upload is at most
:data:`MAX_UPLOAD` bytes and is written only inside a temporary folder removed after the
request, under a name of the server's choosing (only the suffix is kept, and only one the
model reads); a typed text is never taken for a file (``@FILE`` is plain text here); the
page writes every token as text, never as markup.
"""

from __future__ import annotations

import dataclasses
import email.parser
import email.policy
import json
import tempfile
import threading
from collections.abc import Callable
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from selfattn.explore.page import render_page
from selfattn.explore.payload import ACCEPT, PayloadBuilder

#: Largest request body accepted, in bytes.
MAX_UPLOAD = 16 * 1024 * 1024
#: Most lines of a typed text explored at once.
MAX_LINES = 20


class BadInput(ValueError):
    """A request the server refuses (one line, with its HTTP status)."""

    def __init__(self, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(message)
        self.status = status


def one_line(error: BaseException) -> str:
    """The first line of an error's message."""
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def form_fields(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """A ``multipart/form-data`` body → ``{name: (filename, bytes)}``.

    Raises:
        BadInput: not multipart form data.
    """
    if not content_type.startswith("multipart/form-data"):
        raise BadInput(f"POST /maps takes multipart/form-data, not {content_type or 'nothing'}")
    header = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(header + body)
    if not message.is_multipart():
        raise BadInput("POST /maps: the form data could not be read")
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        assert isinstance(part, Message)
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            payload = part.get_payload(decode=True)
            fields[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields


class Explorer:
    """What the server does, apart from HTTP: the page and the maps of a new input.

    Args:
        builder: the run's payload builder (``serve=True``).
        initial: the examples the page starts with (from :meth:`PayloadBuilder.example`).
    """

    def __init__(self, builder: PayloadBuilder, initial: list[dict[str, Any]]) -> None:
        self.builder, self.initial = builder, initial
        self._lock = threading.Lock()  # one model call at a time

    def page(self) -> str:
        """The served page."""
        return render_page(self.builder.payload(self.initial))

    def maps(self, fields: dict[str, tuple[str | None, bytes]]) -> dict[str, Any]:
        """``{"examples": [...]}`` for a posted text or file.

        Raises:
            BadInput: no input; an input the model cannot read (one line: why).
        """
        kind = self.builder.description.kind
        with self._lock:
            if "text" in fields and fields["text"][1].strip():
                if kind != "text":
                    raise BadInput(f"typed text: {self.builder.description.expects()}")
                return {"examples": self._texts(fields["text"][1])}
            if "file" in fields and fields["file"][1]:
                name, data = fields["file"]
                return {"examples": [self._file(name or "upload", data)]}
        raise BadInput("nothing to explore: type a text or choose a file")

    def _texts(self, data: bytes) -> list[dict[str, Any]]:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise BadInput(f"typed text is not UTF-8 ({error.reason})") from None
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if len(lines) > MAX_LINES:
            raise BadInput(f"{len(lines)} lines; the explorer takes at most {MAX_LINES} at once")
        predictor = self.builder.predictor
        examples = []
        for number, line in enumerate(lines, 1):
            source = f"<typed>:{number}"
            examples.append(self.builder.example(predictor.example(line, source), line))
        return examples

    def _file(self, name: str, data: bytes) -> dict[str, Any]:
        suffix = Path(name).suffix.lower()
        kind = self.builder.description.kind
        allowed = ACCEPT.get(kind, frozenset())
        label = Path(name).name
        if kind == "text":
            raise BadInput(f"{label}: this model reads text; type it in the box")
        if suffix not in allowed:
            raise BadInput(f"{label}: {self.builder.description.expects()}")
        with tempfile.TemporaryDirectory(prefix="selfattn-explore-") as folder:
            path = Path(folder) / f"upload{suffix}"
            path.write_bytes(data)
            try:
                examples = self.builder.predictor.read(str(path), command="explore", note=_ignore)
                if len(examples) != 1:
                    raise BadInput(f"{label}: {len(examples)} inputs; upload one at a time")
                example = dataclasses.replace(examples[0], source=label)
                return self.builder.example(example, label)
            except (ValueError, OSError) as error:  # name the upload, not the temporary file
                raise BadInput(one_line(error).replace(str(path), label)) from None


def _ignore(line: str) -> None:
    del line


def make_handler(explorer: Explorer) -> type[BaseHTTPRequestHandler]:
    """The request handler class serving ``explorer``."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "selfattn-explore"

        def log_message(self, format: str, *args: Any) -> None:
            del format, args  # quiet: the terminal shows the URL, not every request

        def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: HTTPStatus, value: dict[str, Any]) -> None:
            self._send(status, json.dumps(value).encode("utf-8"), "application/json")

        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/", "/index.html"):
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {self.path}"})
                return
            self._answer(lambda: explorer.page().encode("utf-8"), "text/html; charset=utf-8")

        def do_POST(self) -> None:
            if self.path != "/maps":
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no endpoint {self.path}"})
                return
            self._answer(self._maps, "application/json")

        def _maps(self) -> bytes:
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                raise BadInput("POST /maps needs a Content-Length") from None
            if length > MAX_UPLOAD:
                self.close_connection = True  # the unread body is not kept alive
                raise BadInput(
                    f"upload of {length:,} bytes; the explorer takes at most {MAX_UPLOAD:,}",
                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                )
            body = self.rfile.read(length)
            fields = form_fields(self.headers.get("Content-Type", ""), body)
            return json.dumps(explorer.maps(fields), allow_nan=False).encode("utf-8")

        def _answer(self, make: Callable[[], bytes], content_type: str) -> None:
            try:
                body = make()
            except BadInput as error:
                self._json(error.status, {"error": one_line(error)})
            except (ValueError, OSError) as error:  # the readers' one-line refusals
                self._json(HTTPStatus.BAD_REQUEST, {"error": one_line(error)})
            except Exception as error:  # a bug: say so, keep serving
                self._json(
                    HTTPStatus.INTERNAL_SERVER_ERROR,
                    {"error": f"internal error ({type(error).__name__}): {one_line(error)}"},
                )
            else:
                self._send(HTTPStatus.OK, body, content_type)

    return Handler


def serve(explorer: Explorer, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server for ``explorer`` bound to ``host:port`` (0: a free port), not yet running:
    call ``serve_forever`` (and ``shutdown`` from another thread)."""
    server = ThreadingHTTPServer((host, port), make_handler(explorer))
    server.daemon_threads = True
    return server
