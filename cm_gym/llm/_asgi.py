"""uvicorn, run for the LLM server with the bounds that uvicorn itself leaves open.

uvicorn (over h11) parses HTTP/1.1, keeps connections alive, pipelines, bounds a request head
still arriving (``h11_max_incomplete_event_size``) and closes a connection idle after a response.
Three bounds the server had on its own asyncio streams, and one socket option, are not among its
options, so `BoundedH11Protocol` (uvicorn's own h11 protocol, passed as ``Config(http=...)``, its
documented way to choose a protocol class) adds them:

- **a cap on open connections**: a connection over `max_connections` is answered 503 with an
  OpenAI-style body at once and closed (uvicorn's ``limit_concurrency`` answers 503 only when a
  request arrives, on every connection, and keeps the socket);
- **a deadline for a request head**: a new connection, or one between requests, must complete a
  head within `idle_timeout_s` of opening or of its last reply, else it is closed; partial bytes do
  not extend it (uvicorn only times the gap after a reply, and any byte resets it: a client that
  never sends, or sends one byte a second, would hold a connection for ever);
- **the status h11 means**: a head still arriving past the size limit is 431 (uvicorn answers
  every parse error 400), with a JSON body;
- **no Nagle delay**: TCP_NODELAY on every connection (see `connection_made`).

The time to read a request *body* is bounded by the application (``read_timeout_s``, 408).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from http import HTTPStatus
from typing import Any, ClassVar

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from cm_gym.llm._http import MAX_HEAD_BYTES, encode_json, error_body, json_headers

_LINGER_S = 2.0  # how long a refused connection is drained before it is closed


class _Conn(h11.Connection):
    """h11's connection, remembering the status h11 suggests for the request it refused."""

    refusal: tuple[int, str] | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as exc:
            self.refusal = (exc.error_status_hint, str(exc))
            raise


def _reply(status: int, message: str, kind: str) -> tuple[h11.Response, bytes]:
    body = encode_json(error_body(message, kind))
    headers = json_headers(body, close=True)
    return h11.Response(status_code=status, headers=headers, reason=HTTPStatus(status).phrase.encode()), body


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a connection cap, a head deadline and h11's status on refusals
    (see the module docstring). `bounded_protocol` makes a subclass with one server's limits."""

    max_connections: ClassVar[int] = 1024
    idle_timeout_s: ClassVar[float] = 15.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _Conn(h11.SERVER, self.config.h11_max_incomplete_event_size or MAX_HEAD_BYTES)
        self._deadline: asyncio.TimerHandle | None = None
        self._refused = False  # over the connection cap: answered 503, closing

    # -- the connection cap and the head deadline ------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[arg-type]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # uvicorn writes a reply's head and body apart; asyncio sets TCP_NODELAY only on
            # sockets whose proto is TCP, and a socket from socket.create_server says 0: without
            # it, Nagle holds the body until the client's delayed ACK (40 ms a keep-alive request)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if len(self.connections) > self.max_connections:
            # before any request, so h11 has no state to send a reply from: the bytes by hand; then
            # a lingering close (half-close, discard what the client sends, close when it does or
            # after at most 2 s), so its request does not turn the reply into a reset
            response, body = _reply(HTTPStatus.SERVICE_UNAVAILABLE, "too many connections", "server_error")
            head = b"".join(k + b": " + v + b"\r\n" for k, v in response.headers)
            self.transport.write(b"HTTP/1.1 503 Service Unavailable\r\n" + head + b"\r\n" + body)
            self._refused = True
            if self.transport.can_write_eof():
                self.transport.write_eof()
                self._arm(min(self.idle_timeout_s, _LINGER_S))
            else:
                self.transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        super().data_received(data)
        if self._busy():
            self._disarm()  # a whole head came: the application bounds the rest

    def on_response_complete(self) -> None:
        self._arm()  # the next head is due within the idle timeout
        super().on_response_complete()  # (may start a pipelined request)
        if self._busy():
            self._disarm()

    def eof_received(self) -> bool | None:
        if self._refused:
            self.transport.close()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _busy(self) -> bool:
        """A request is in progress (its head parsed, its reply not yet complete)."""
        return self.cycle is not None and not self.cycle.response_complete

    def _arm(self, seconds: float | None = None) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(
            self.idle_timeout_s if seconds is None else seconds, self._expire
        )

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if not self.transport.is_closing() and not self._busy():
            self.transport.close()  # idle, or a head that did not come in time

    # -- refusals with h11's status --------------------------------------------------------------
    def send_400_response(self, msg: str) -> None:
        status, detail = getattr(self.conn, "refusal", None) or (400, msg)
        status = status if 400 <= status < 600 else 400
        response, body = _reply(status, f"malformed request: {detail[:200]}", "invalid_request_error")
        self.transport.write(self.conn.send(response) or b"")
        self.transport.write(self.conn.send(h11.Data(data=body)) or b"")
        self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
        self.transport.close()


def bounded_protocol(max_connections: int, idle_timeout_s: float) -> type[BoundedH11Protocol]:
    """`BoundedH11Protocol` with one server's limits (uvicorn builds one instance a connection)."""
    return type(
        "BoundedH11Protocol",
        (BoundedH11Protocol,),
        {"max_connections": int(max_connections), "idle_timeout_s": float(idle_timeout_s)},
    )


class ReadyServer(uvicorn.Server):
    """`uvicorn.Server` that sets `ready` once it listens (uvicorn offers a flag, not an event)."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()
