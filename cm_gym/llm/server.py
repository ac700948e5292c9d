"""An OpenAI-compatible HTTP server over any `LLM` backend (``POST /v1/chat/completions``,
``GET /v1/models``), loopback by default.

The messages must have been rendered by a cm_gym template: `parse_rendered` recovers the template
name and the string fields (linear time, exact), and the backend's ``complete`` answers them.
Served with the simulated LLM (`cm-gym serve-llm`) it lets tests and users drive the real `openai`
client over real HTTP without a GPU; served over a cached OpenAI-compatible backend it is a
caching proxy.

It survives its clients: uvicorn serves it (HTTP/1.1 parsed by h11, keep-alive, pipelining; idle
connections cost no thread; `cm_gym.llm._asgi` adds the bounds uvicorn lacks) with a real listen
backlog, a bounded worker pool for the backend calls, a body-size limit, time limits on reading a
request head, its body, and on idle connections, a cap on open connections, and an optional API key
(``Authorization: Bearer KEY``; any byte string but an empty one, compared as bytes in constant
time: `cm_gym.llm.apikey`). Bad requests get OpenAI-style error bodies: 400 (malformed HTTP or
JSON, not a cm_gym prompt), 401 (API key), 404, 405, 408, 411, 413, 422 (the backend refused: e.g.
a task it cannot resolve), 431, 500, 503, 505. `latency_s` adds an artificial delay to every completion — the
latency of a real model, for benchmarks; it holds no worker. A backend with ``complete_chat``
(a real model, `cm_gym.llm.local_model`) answers any chat messages with the request's
``max_tokens`` instead, and a reply cut there has ``finish_reason`` "length".
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

import uvicorn

from cm_gym.core import boundedjson
from cm_gym.core.types import CmGymError
from cm_gym.llm._asgi import ReadyServer, bounded_protocol
from cm_gym.llm._http import MAX_HEAD_BYTES, HTTPError, check_head, encode_json, error_body, json_headers
from cm_gym.llm.apikey import authorized, key_bytes
from cm_gym.llm.base import LLM
from cm_gym.llm.errors import PromptError
from cm_gym.llm.prompts import parse_rendered

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024  # a cm_gym prompt is at most a few tens of KB
MAX_REQUEST_DEPTH = 32  # a chat request nests 3 levels (object, messages, message)
DEFAULT_WORKERS = min(32, 4 * (os.cpu_count() or 1))
DEFAULT_BACKLOG = 1024
DEFAULT_MAX_CONNECTIONS = 1024


class LLMServer:
    """The HTTP server (see the module docstring). `request_count` counts chat-completion requests
    (for replay checks); `request_log` keeps ``(arrival time, sha256 of the body)`` of each, so a
    test can show that no request was sent twice. Run it with `serve_forever()` (blocking) or
    `serve_in_thread`; stop it with ``shutdown(); server_close()``."""

    def __init__(
        self,
        address: tuple[str, int],
        llm: LLM,
        model_name: str | None = None,
        *,
        workers: int = DEFAULT_WORKERS,
        backlog: int = DEFAULT_BACKLOG,
        api_key: str | bytes | None = None,
        latency_s: float = 0.0,
        idle_timeout_s: float = 15.0,
        read_timeout_s: float = 30.0,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self._key = None if api_key is None else key_bytes(api_key)  # b"" is refused, never "no key"
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, port), family=family, backlog=backlog)
        self.server_address = self._sock.getsockname()[:2]
        self.llm = llm
        self.model_name = model_name or getattr(llm, "name", "cm-gym")
        self.backlog, self.latency_s = backlog, max(0.0, float(latency_s))
        self.idle_timeout_s, self.read_timeout_s = idle_timeout_s, read_timeout_s
        self.max_body_bytes, self.max_connections = max_body_bytes, max_connections
        self.request_count = 0
        self.request_log: list[tuple[float, str]] = []
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="cm-gym-llm-worker")
        self._ready, self._done, self._started = threading.Event(), threading.Event(), False
        config = uvicorn.Config(
            self._asgi,
            interface="asgi3",
            http=bounded_protocol(max_connections, idle_timeout_s),
            ws="none",
            lifespan="off",
            backlog=backlog,
            timeout_keep_alive=idle_timeout_s,  # type: ignore[arg-type]  # a float works
            timeout_graceful_shutdown=2,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
            proxy_headers=False,
            server_header=False,
            access_log=False,
            log_config=None,
        )
        self._server = ReadyServer(config, self._ready)

    @property
    def base_url(self) -> str:
        host, port = self.server_address
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"

    # -- life cycle ------------------------------------------------------------------------------
    def serve_forever(self, poll_interval: float | None = None) -> None:
        """Serve until `shutdown()` (or KeyboardInterrupt) in the calling thread."""
        self._started = True
        try:
            asyncio.run(self._server.serve(sockets=[self._sock]))
        finally:
            self._done.set()

    def wait_ready(self, timeout: float = 10.0) -> None:
        if not self._ready.wait(timeout):
            raise RuntimeError("the LLM server did not start")

    def shutdown(self) -> None:
        """Stop `serve_forever` (from any thread) and wait for it to return."""
        self._server.should_exit = True
        if self._started:
            self._done.wait(timeout=10)

    def server_close(self) -> None:
        self._sock.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- the ASGI application --------------------------------------------------------------------
    async def _asgi(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """One request: the head's bounds, the route, the reply (an OpenAI-style error body for
        every refusal; ``Connection: close`` when the body was left unread)."""
        if scope["type"] != "http":
            return
        extra: list[tuple[bytes, bytes]] = []
        try:
            method = scope["method"]
            length = check_head(method, scope["http_version"], scope["headers"], self.max_body_bytes)
            status, payload = await self._dispatch(scope, receive, length)
            close = False
        except HTTPError as exc:
            status, close = exc.status, exc.close
            code = "invalid_api_key" if exc.status == HTTPStatus.UNAUTHORIZED else None
            payload = error_body(exc.message, exc.kind, code)
            if exc.status == HTTPStatus.UNAUTHORIZED:
                extra.append((b"www-authenticate", b"Bearer"))
        except _ClientGone:
            return
        body = encode_json(payload)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": json_headers(body, close=close) + extra,
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _dispatch(self, scope: dict[str, Any], receive: Any, length: int) -> tuple[int, dict[str, Any]]:
        method, path = scope["method"], scope["path"].rstrip("/") or "/"
        if self._key is not None:
            given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            if not authorized(given, self._key):
                raise HTTPError(
                    HTTPStatus.UNAUTHORIZED, "invalid or missing API key (Authorization: Bearer KEY)"
                )
        if path in ("/v1/models", "/models"):
            if method != "GET":
                raise HTTPError(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} not allowed on {path}")
            model = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "cm_gym"}
            return HTTPStatus.OK, {"object": "list", "data": [model]}
        if path not in ("/v1/chat/completions", "/chat/completions"):
            raise HTTPError(HTTPStatus.NOT_FOUND, f"unknown path {path[:200]}", "not_found_error")
        if method != "POST":
            raise HTTPError(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} not allowed on {path}")
        body = await self._read_body(receive, length)
        self.request_count += 1
        self.request_log.append((time.time(), hashlib.sha256(body).hexdigest()))
        return HTTPStatus.OK, await self._chat(body)

    async def _read_body(self, receive: Any, length: int) -> bytes:
        """The request body (`length` bytes, h11 holds the client to it) within `read_timeout_s`."""
        chunks: list[bytes] = []
        deadline = asyncio.get_running_loop().time() + self.read_timeout_s
        more = length > 0
        while more:
            left = deadline - asyncio.get_running_loop().time()
            try:
                message = await asyncio.wait_for(receive(), max(0.0, left))
            except asyncio.TimeoutError:
                raise HTTPError(
                    HTTPStatus.REQUEST_TIMEOUT, "request body not received in time", close=True
                ) from None
            if message["type"] == "http.disconnect":
                raise _ClientGone
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        return b"".join(chunks)

    async def _chat(self, raw: bytes) -> dict[str, Any]:
        try:
            request = boundedjson.loads(raw, max_bytes=len(raw), max_depth=MAX_REQUEST_DEPTH, what="the body")
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise HTTPError(HTTPStatus.BAD_REQUEST, f"request body is not valid JSON: {exc}") from None
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "request must be a JSON object with a 'messages' list")
        if request.get("stream"):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "streaming is not supported by this server")
        loop = asyncio.get_running_loop()
        chat = getattr(self.llm, "complete_chat", None)
        if callable(chat):  # a real model (cm_gym.llm.local_model) answers any chat, max_tokens too
            call: tuple[Any, ...] = (chat, _chat_messages(request["messages"]), request)
        else:
            try:
                call = (self.llm.complete, *parse_rendered(request["messages"]))
            except PromptError as exc:
                raise HTTPError(HTTPStatus.BAD_REQUEST, NOT_A_CM_GYM_PROMPT.format(exc)) from None
        try:
            completion = await loop.run_in_executor(self._pool, *call)
        except CmGymError as exc:
            raise HTTPError(HTTPStatus.UNPROCESSABLE_ENTITY, str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - answer 500, keep serving
            logger.exception("backend failed on a chat request")
            raise HTTPError(
                HTTPStatus.INTERNAL_SERVER_ERROR, f"backend error: {exc}", "server_error"
            ) from None
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        model = request.get("model")
        limit = request.get("max_completion_tokens", request.get("max_tokens"))
        cut = isinstance(limit, int) and completion.completion_tokens >= limit
        return {
            "id": f"chatcmpl-{hashlib.sha256(raw).hexdigest()[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model if isinstance(model, str) and model else self.model_name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": completion.text},
                    "finish_reason": "length" if cut else "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
                "total_tokens": completion.total_tokens,
            },
        }


#: The 400 a generic chat client gets from a server over the simulated (or a cached) LLM.
NOT_A_CM_GYM_PROMPT = (
    "messages are not a cm_gym prompt: {}. This server answers only prompts rendered by cm_gym's "
    "templates (cm_gym's own OpenAI client sends them); it is not a general chat model. For any chat "
    "messages, serve a real model (cm-gym serve-llm --model smollm2-135m or --gguf FILE, or vLLM)."
)


class _ClientGone(Exception):
    """The client closed the connection before its body came: nothing to answer."""


def _chat_messages(messages: list[Any]) -> list[dict[str, str]]:
    """Chat messages as ``{"role", "content"}`` strings (a 400 for anything else)."""
    out: list[dict[str, str]] = []
    for m in messages:
        if (
            not isinstance(m, dict)
            or not isinstance(m.get("role"), str)
            or not isinstance(m.get("content"), str)
        ):
            raise HTTPError(
                HTTPStatus.BAD_REQUEST, "each message must be an object with string role and content"
            )
        out.append({"role": m["role"], "content": m["content"]})
    if not out:
        raise HTTPError(HTTPStatus.BAD_REQUEST, "messages must not be empty")
    return out


def make_server(
    llm: LLM, host: str = "127.0.0.1", port: int = 8000, model_name: str | None = None, **options: Any
) -> LLMServer:
    """Bind (but do not start) a server for `llm`; port 0 picks a free port. `options` are
    `LLMServer`'s (workers, backlog, api_key, latency_s, timeouts, limits)."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning("serving the LLM on %s: it is reachable from other machines", host)
        if not options.get("api_key"):
            logger.warning("no API key set: anyone who can reach %s may use this server", host)
    return LLMServer((host, port), llm, model_name, **options)


def serve_in_thread(
    llm: LLM, host: str = "127.0.0.1", port: int = 0, model_name: str | None = None, **options: Any
) -> tuple[LLMServer, str]:
    """Start a server for `llm` in a daemon thread; returns ``(server, base_url)`` once it accepts
    requests. Stop it with ``server.shutdown(); server.server_close()``."""
    server = make_server(llm, host, port, model_name, **options)
    thread = threading.Thread(target=server.serve_forever, name="cm-gym-llm-server", daemon=True)
    thread.start()
    server.wait_ready()
    return server, server.base_url
