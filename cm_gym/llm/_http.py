"""The small, strict HTTP/1.1 subset the LLM server speaks: parse a request head, encode a reply.

Everything here is linear in the input and bounded: the head is at most `MAX_HEAD_BYTES` (the
server's stream limit), at most `MAX_HEADERS` header lines, a numeric ``Content-Length`` and no
chunked bodies (an OpenAI client always sends a length). Anything else is an `HTTPError` with the
status to answer, never another exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

MAX_HEAD_BYTES = 32 * 1024
MAX_HEADERS = 100
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


class HTTPError(Exception):
    """A request the server refuses: `status` and a one-line `message` for the error body."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.kind = int(status), message, kind


@dataclass(frozen=True)
class RequestHead:
    """A parsed request line and headers (names lower-cased)."""

    method: str
    target: str
    version: str
    headers: dict[str, str]

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0].rstrip("/") or "/"

    def content_length(self, limit: int) -> int:
        """The body length; 0 without a body. Chunked bodies and lengths over `limit` refused."""
        if "transfer-encoding" in self.headers:
            raise HTTPError(
                HTTPStatus.LENGTH_REQUIRED, "chunked request bodies are not supported: send Content-Length"
            )
        raw = self.headers.get("content-length")
        if raw is None:
            if self.method == "POST":
                raise HTTPError(HTTPStatus.LENGTH_REQUIRED, "a POST needs a Content-Length header")
            return 0
        if not raw.isascii() or not raw.isdigit() or len(raw) > 12:
            raise HTTPError(HTTPStatus.BAD_REQUEST, "invalid Content-Length")
        length = int(raw)
        if length > limit:
            raise HTTPError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"request body of {length} bytes is over the {limit}-byte limit",
            )
        return length

    @property
    def keep_alive(self) -> bool:
        connection = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection


def parse_head(data: bytes) -> RequestHead:
    """Parse ``request-line CRLF *(header CRLF) CRLF`` (the bytes up to and with the blank line)."""
    if len(data) > MAX_HEAD_BYTES:
        raise HTTPError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request head too large")
    text = data.decode("latin-1")
    if text.endswith("\r\n\r\n"):
        text = text[:-4]
    lines = text.split("\r\n")
    if len(lines) - 1 > MAX_HEADERS:
        raise HTTPError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, f"more than {MAX_HEADERS} header lines")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise HTTPError(HTTPStatus.BAD_REQUEST, "malformed request line")
    method, target, version = parts
    if not method or not set(method) <= _TOKEN:
        raise HTTPError(HTTPStatus.BAD_REQUEST, "malformed method")
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise HTTPError(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"unsupported HTTP version {version[:20]!r}")
    if not target.startswith("/") or any(c in target for c in "\x00\r\n\t"):
        raise HTTPError(HTTPStatus.BAD_REQUEST, "malformed request target")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or not set(name) <= _TOKEN:
            raise HTTPError(HTTPStatus.BAD_REQUEST, "malformed header line")
        key, value = name.lower(), value.strip(" \t")
        if key in headers and key in ("content-length", "transfer-encoding", "authorization", "host"):
            raise HTTPError(HTTPStatus.BAD_REQUEST, f"duplicate {name} header")
        headers[key] = value if key not in headers else f"{headers[key]}, {value}"
    return RequestHead(method, target, version, headers)


def encode_response(
    status: int, payload: dict[str, Any], *, keep_alive: bool, extra: dict[str, str] | None = None
) -> bytes:
    """A complete JSON reply (status line, headers, body)."""
    body = json.dumps(payload).encode("utf-8")
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    headers = {
        "Content-Type": "application/json",
        "Content-Length": str(len(body)),
        "Connection": "keep-alive" if keep_alive else "close",
        **(extra or {}),
    }
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    return head.encode("latin-1") + body


def error_body(message: str, kind: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error payload."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
