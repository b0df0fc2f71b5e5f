"""What a POST to the explorer server holds, read within bounds whatever its headers say:
its length (one Content-Length of decimal digits, under a cap), its body (exactly that
many bytes, within a time limit however slowly they come) and its form fields."""

from __future__ import annotations

import email.parser
import email.policy
import re
import socket
import time
from email.message import Message
from http import HTTPStatus
from io import BufferedIOBase


class BadInput(ValueError):
    """A request the server refuses (one line, with its HTTP status)."""

    def __init__(self, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(message)
        self.status = status


def one_line(error: BaseException | str) -> str:
    """The first line of an error's message (or of a text)."""
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


class ClientGone(ConnectionError):
    """The client closed or stopped sending before its request was read."""


_DIGITS = re.compile(r"[0-9]{1,19}")


def content_length(headers: Message, limit: int) -> int:
    """A request's body length from its headers: exactly one Content-Length, decimal
    digits, at most ``limit``.

    Raises:
        BadInput: chunked or other transfer codings, a missing, malformed or repeated
            Content-Length (411 or 400), or a body over ``limit`` bytes (413).
    """
    if headers.get("Transfer-Encoding") is not None:
        raise BadInput(
            "POST /maps needs a Content-Length; chunked bodies are not taken",
            HTTPStatus.LENGTH_REQUIRED,
        )
    values = [value.strip(" \t") for value in headers.get_all("Content-Length") or []]
    if not values:
        raise BadInput("POST /maps needs a Content-Length", HTTPStatus.LENGTH_REQUIRED)
    if len(set(values)) > 1 or not _DIGITS.fullmatch(values[0]):
        shown = ", ".join(repr(value[:20]) for value in values)
        raise BadInput(f"POST /maps: Content-Length {shown} is not one byte count")
    length = int(values[0])
    if length > limit:
        raise BadInput(
            f"upload of {length:,} bytes; the explorer takes at most {limit:,}",
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        )
    return length


def read_body(
    stream: BufferedIOBase, connection: socket.socket, length: int, idle: float, seconds: float
) -> bytes:
    """Exactly ``length`` bytes of a request body from ``stream`` (``connection``'s
    reader), received within ``seconds`` in all and ``idle`` seconds between bytes.

    Raises:
        ClientGone: the connection ended first.
        BadInput: the body took longer (408).
    """
    deadline = time.monotonic() + seconds
    chunks, received = [], 0
    try:
        while received < length:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            connection.settimeout(min(idle, left))
            # read1: one receive, so a client trickling bytes cannot outlast the deadline.
            chunk = stream.read1(min(length - received, 1 << 16))
            if not chunk:
                raise ClientGone(f"the body ended after {received:,} of {length:,} bytes")
            chunks.append(chunk)
            received += len(chunk)
    except TimeoutError:
        raise BadInput(
            f"the body did not arrive in time ({received:,} of {length:,} bytes)",
            HTTPStatus.REQUEST_TIMEOUT,
        ) from None
    finally:
        connection.settimeout(idle)
    return b"".join(chunks)
