"""``selfattn explore RUN --serve``: the explorer page on 127.0.0.1, answering new inputs.

The standard library's threading HTTP server is enough for one user on their own machine:

* ``GET /`` is the page (the same file ``selfattn explore -o`` writes, with an input box);
* ``POST /maps`` (``multipart/form-data``) takes a field ``text`` (text models: one input
  per line) or ``file`` (an upload of the model's kind) and answers
  ``{"examples": [...]}`` in the payload's format, or ``{"error": "one line"}`` with status
  400 (bad input), 408 (the body came too slowly), 411 (no Content-Length: chunked bodies
  are not taken), 413 (too large), 503 (not explored in time) or 500 (a bug: the server
  keeps running).

Each connection has its own thread and every one is bounded (:class:`Limits`): the socket
times out when silent, a body is read only up to its one valid Content-Length and within a
time limit, an input is explored within a time limit in a worker thread of its own (the
model explores one input at a time, and the payload builder caps its size), and a
connection is cut off after a while whatever it does. A client that goes away is one line
on the console, never a traceback.

Safety: the server binds to 127.0.0.1 unless told otherwise; an upload is at most
:data:`MAX_UPLOAD` bytes and is written only inside a temporary folder removed after the
request, under a name of the server's choosing (only the suffix is kept, and only one the
model reads); a typed text is never taken for a file (``@FILE`` is plain text here); the
page writes every token as text, never as markup.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from selfattn.datatypes import Example
from selfattn.explore.page import render_page
from selfattn.explore.payload import ACCEPT, PayloadBuilder
from selfattn.explore.request import (
    BadInput,
    ClientGone,
    content_length,
    form_fields,
    one_line,
    read_body,
)

#: Largest request body accepted, in bytes.
MAX_UPLOAD = 16 * 1024 * 1024
#: Most lines of a typed text explored at once.
MAX_LINES = 20


class Explorer:
    """What the server does, apart from HTTP: the page and the maps of a new input.

    Reading an input (a typed line, an upload) may run at once in several requests; the
    model runs one input at a time.

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

    def maps(
        self, fields: dict[str, tuple[str | None, bytes]], deadline: float = math.inf
    ) -> dict[str, Any]:
        """``{"examples": [...]}`` for a posted text or file; the model does not start on
        it once ``time.monotonic()`` passes ``deadline`` (its asker is answered already).

        Raises:
            BadInput: no input; an input the model cannot read (one line: why); the model
                busy with other inputs until the deadline (503).
        """
        kind = self.builder.description.kind
        if "text" in fields and fields["text"][1].strip():
            if kind != "text":
                raise BadInput(f"typed text: {self.builder.description.expects()}")
            return {"examples": self._shown(self._texts(fields["text"][1]), deadline)}
        if "file" in fields and fields["file"][1]:
            name, data = fields["file"]
            label = Path(name or "upload").name
            with self._upload(label, data) as read:
                return {"examples": self._shown([(read(), label)], deadline)}
        raise BadInput("nothing to explore: type a text or choose a file")

    def _shown(self, inputs: list[tuple[Example, str]], deadline: float) -> list[dict[str, Any]]:
        """The payload examples of read inputs: the model's part, one request at a time."""
        left = deadline - time.monotonic()
        if left <= 0 or not self._lock.acquire(timeout=min(left, threading.TIMEOUT_MAX)):
            raise BadInput("no time left to explore the input", HTTPStatus.SERVICE_UNAVAILABLE)
        try:
            return self.builder.examples(inputs)
        finally:
            self._lock.release()

    def _texts(self, data: bytes) -> list[tuple[Example, str]]:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise BadInput(f"typed text is not UTF-8 ({error.reason})") from None
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if len(lines) > MAX_LINES:
            raise BadInput(f"{len(lines)} lines; the explorer takes at most {MAX_LINES} at once")
        predictor = self.builder.predictor
        return [
            (predictor.example(line, f"<typed>:{number}"), line)
            for number, line in enumerate(lines, 1)
        ]

    @contextlib.contextmanager
    def _upload(self, label: str, data: bytes) -> Iterator[Callable[[], Example]]:
        """``read()``: the uploaded file as one input, read from a temporary folder that
        is removed when the context ends; its errors name the upload, not the file."""
        suffix = Path(label).suffix.lower()
        kind = self.builder.description.kind
        if kind == "text":
            raise BadInput(f"{label}: this model reads text; type it in the box")
        if suffix not in ACCEPT.get(kind, frozenset()):
            raise BadInput(f"{label}: {self.builder.description.expects()}")
        with tempfile.TemporaryDirectory(prefix="selfattn-explore-") as folder:
            path = Path(folder) / f"upload{suffix}"
            path.write_bytes(data)

            def read() -> Example:
                examples = self.builder.predictor.read(str(path), command="explore", note=_ignore)
                if len(examples) != 1:
                    raise BadInput(f"{label}: {len(examples)} inputs; upload one at a time")
                return dataclasses.replace(examples[0], source=label)

            try:
                yield read
            except BadInput:
                raise
            except (ValueError, OSError) as error:
                raise BadInput(one_line(error).replace(str(path), label)) from None


def _ignore(line: str) -> None:
    del line


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one connection may cost the server, in bytes and seconds.

    Args:
        upload: most bytes of a request body.
        idle: seconds a socket may stay silent (reading or writing).
        body: seconds to receive a whole body, however it trickles in.
        work: seconds to explore one request's input; past it the asker is answered 503
            (the reading under way finishes in the background, no model runs for it).
        connection: seconds one connection is kept at all, from its first byte.
        workers: inputs explored at once; more wait in line (and time out with 503).
    """

    upload: int = MAX_UPLOAD
    idle: float = 10.0
    body: float = 60.0
    work: float = 60.0
    connection: float = 180.0
    workers: int = 4


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class ExplorerServer(ThreadingHTTPServer):
    """A threading HTTP server (one thread per connection) that bounds each request by
    its :class:`Limits`, explores each input in a worker thread of its own (at most
    ``limits.workers`` at once), and logs a dropped client in one line."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        explorer: Explorer,
        limits: Limits,
        log: Callable[[str], None],
    ) -> None:
        self.explorer, self.limits, self.log = explorer, limits, log
        super().__init__(address, make_handler(self))
        self._workers = threading.BoundedSemaphore(limits.workers)

    def explore(self, fields: dict[str, tuple[str | None, bytes]]) -> dict[str, Any]:
        """:meth:`Explorer.maps` of ``fields``, within ``limits.work`` seconds.

        Its own daemon thread does the work: a thread cannot be stopped, but past the
        limit its asker is answered, and the thread neither blocks the others (at most
        ``limits.workers`` run at once) nor the process's exit.

        Raises:
            BadInput: what :meth:`Explorer.maps` raises; no answer in time (503).
        """
        deadline = time.monotonic() + self.limits.work
        done = threading.Event()
        answers: list[dict[str, Any]] = []
        errors: list[BaseException] = []

        def work() -> None:
            try:
                if not self._workers.acquire(timeout=self.limits.work):
                    return
                try:
                    answers.append(self.explorer.maps(fields, deadline))
                finally:
                    self._workers.release()
            except BaseException as error:  # handed to the asker
                errors.append(error)
            finally:
                done.set()

        threading.Thread(target=work, name="selfattn-explore-work", daemon=True).start()
        if not done.wait(self.limits.work) or not answers + errors:
            raise BadInput(
                f"the input took longer than {self.limits.work:g} s to explore; try a smaller one",
                HTTPStatus.SERVICE_UNAVAILABLE,
            )
        if errors:
            raise errors[0]
        return answers[0]

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A dropped client is one line; a bug in the server keeps its traceback."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            self.log(f"{_address(client_address)}: dropped ({one_line(error)})")
        else:
            super().handle_error(request, client_address)


def _address(client_address: Any) -> str:
    if isinstance(client_address, tuple) and len(client_address) >= 2:
        return f"{client_address[0]}:{client_address[1]}"
    return str(client_address)


def make_handler(server: ExplorerServer) -> type[BaseHTTPRequestHandler]:
    """The request handler class of ``server``: its explorer, within its limits."""
    explorer, limits = server.explorer, server.limits

    class Handler(BaseHTTPRequestHandler):
        server_version = "selfattn-explore"
        timeout = limits.idle  # every read and write of the socket

        def setup(self) -> None:
            super().setup()
            # The socket timeout bounds each read, not a client trickling a byte at a time
            # (headers or body): past ``connection`` seconds the socket is shut.
            self._watchdog = threading.Timer(limits.connection, self._cut_off)
            self._watchdog.daemon = True
            self._watchdog.start()

        def finish(self) -> None:
            self._watchdog.cancel()
            with contextlib.suppress(OSError):  # the client is gone; logged if it mattered
                super().finish()

        def handle(self) -> None:
            try:
                super().handle()
            except (ConnectionError, TimeoutError) as error:
                server.log(f"{self._who()}: dropped ({one_line(error)})")

        def _cut_off(self) -> None:
            server.log(f"{self._who()}: cut off after {limits.connection:g} s")
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        def _who(self) -> str:
            request = getattr(self, "command", None)
            path = f" {request} {self.path}" if request else ""
            return f"{_address(self.client_address)}{path}"

        def log_message(self, format: str, *args: Any) -> None:
            del format, args  # quiet: the terminal shows the URL, not every request

        def log_error(self, format: str, *args: Any) -> None:
            server.log(f"{self._who()}: {one_line(format % args)}")

        def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.send_header("X-Content-Type-Options", "nosniff")
                self.end_headers()
                self.wfile.write(body)
            except (ConnectionError, TimeoutError) as error:
                self.close_connection = True
                server.log(f"{self._who()}: dropped before its answer ({one_line(error)})")

        def _json(self, status: HTTPStatus, value: dict[str, Any]) -> None:
            self._send(status, json.dumps(value).encode("utf-8"), "application/json")

        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/", "/index.html"):
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no page {self.path}"})
                return
            self._answer(lambda: explorer.page().encode("utf-8"), "text/html; charset=utf-8")

        def do_POST(self) -> None:
            self.close_connection = True  # a body not read in full never reads as a request
            if self.path != "/maps":
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no endpoint {self.path}"})
                return
            try:
                self._answer(self._maps, "application/json")
            except ClientGone as error:
                server.log(f"{self._who()}: dropped ({error})")

        def _maps(self) -> bytes:
            length = content_length(self.headers, limits.upload)
            body = read_body(self.rfile, self.connection, length, limits.idle, limits.body)
            answer = server.explore(form_fields(self.headers.get("Content-Type", ""), body))
            return json.dumps(answer, allow_nan=False, separators=(",", ":")).encode("utf-8")

        def _answer(self, make: Callable[[], bytes], content_type: str) -> None:
            try:
                body = make()
            except BadInput as error:
                self._json(error.status, {"error": one_line(error)})
            except (ValueError, OSError) as error:  # the readers' one-line refusals
                if isinstance(error, ConnectionError):
                    raise
                self._json(HTTPStatus.BAD_REQUEST, {"error": one_line(error)})
            except Exception as error:  # a bug: say so, keep serving
                self._json(
                    HTTPStatus.INTERNAL_SERVER_ERROR,
                    {"error": f"internal error ({type(error).__name__}): {one_line(error)}"},
                )
            else:
                self._send(HTTPStatus.OK, body, content_type)

    return Handler


def serve(
    explorer: Explorer,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    limits: Limits = Limits(),
    log: Callable[[str], None] = _stderr,
) -> ExplorerServer:
    """A server for ``explorer`` bound to ``host:port`` (0: a free port), not yet running:
    call ``serve_forever`` (and ``shutdown`` from another thread). ``log`` takes one line
    per dropped or failed connection."""
    return ExplorerServer((host, port), explorer, limits, log)
