"""What the LLM server checks in a request head that uvicorn (h11) has already parsed, and the
error bodies it answers with.

h11 reads the bytes: the request line, the header syntax, a head still arriving of at most
`MAX_HEAD_BYTES` (larger: 431), a Content-Length that matches the body, ``Host`` on HTTP/1.1.
`check_head` adds the server's own bounds on top, on the ASGI scope: headers of at most
`MAX_HEAD_BYTES` in all (h11 parses a longer head that arrived in one piece), at most `MAX_HEADERS`
header lines, one each of the
headers that must not repeat, no chunked bodies (an OpenAI client always sends a length), a POST
only with a length, and a body of at most the server's limit. Anything else is an `HTTPError` with
the status to answer, never another exception.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

MAX_HEAD_BYTES = 32 * 1024
MAX_HEADERS = 100
_SINGLE = (b"content-length", b"transfer-encoding", b"authorization", b"host")


class HTTPError(Exception):
    """A request the server refuses: `status` and a one-line `message` for the error body;
    `close` when the connection cannot carry another request (the body was not read)."""

    def __init__(
        self, status: int, message: str, kind: str = "invalid_request_error", *, close: bool = False
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.close = int(status), message, kind, close


def check_head(method: str, http_version: str, headers: Iterable[tuple[bytes, bytes]], limit: int) -> int:
    """The body length a request head announces (0 without a body), after the server's bounds.
    `headers` are the ASGI scope's (names lower-cased); every refusal closes the connection, since
    its body is never read."""
    if http_version not in ("1.1", "1.0"):
        raise HTTPError(
            HTTPStatus.HTTP_VERSION_NOT_SUPPORTED,
            f"unsupported HTTP version {http_version[:20]!r}",
            close=True,
        )
    seen: dict[bytes, bytes] = {}
    size = 0
    for n, (name, value) in enumerate(headers, 1):
        size += len(name) + len(value) + 4
        if size > MAX_HEAD_BYTES:  # h11 bounds only a head still arriving, not one read whole
            raise HTTPError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request head too large", close=True)
        if n > MAX_HEADERS:
            raise HTTPError(
                HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                f"more than {MAX_HEADERS} header lines",
                close=True,
            )
        if name in seen and name in _SINGLE:
            raise HTTPError(HTTPStatus.BAD_REQUEST, f"duplicate {name.decode()} header", close=True)
        seen[name] = value
    if b"transfer-encoding" in seen:
        raise HTTPError(
            HTTPStatus.LENGTH_REQUIRED,
            "chunked request bodies are not supported: send Content-Length",
            close=True,
        )
    raw = seen.get(b"content-length")
    if raw is None:
        if method == "POST":
            raise HTTPError(HTTPStatus.LENGTH_REQUIRED, "a POST needs a Content-Length header", close=True)
        return 0
    if not raw.isdigit() or len(raw) > 12:  # h11 checked it already; this is the server's own bound
        raise HTTPError(HTTPStatus.BAD_REQUEST, "invalid Content-Length", close=True)
    length = int(raw)
    if length > limit:
        raise HTTPError(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            f"request body of {length} bytes is over the {limit}-byte limit",
            close=True,
        )
    return length


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error payload."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def json_headers(body: bytes, *, close: bool = False) -> list[tuple[bytes, bytes]]:
    """The headers of a JSON reply of `body` (``Connection: close`` when asked)."""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return headers + [(b"connection", b"close")] if close else headers


def encode_json(payload: dict[str, Any]) -> bytes:
    """A reply body."""
    return json.dumps(payload).encode("utf-8")
