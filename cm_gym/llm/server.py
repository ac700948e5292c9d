"""An OpenAI-compatible HTTP server over any `LLM` backend (``POST /v1/chat/completions``,
``GET /v1/models``), loopback by default.

The messages must have been rendered by a cm_gym template: `parse_rendered` recovers the template
name and the string fields (linear time, exact), and the backend's ``complete`` answers them.
Served with the simulated LLM (`cm-gym serve-llm`) it lets tests and users drive the real `openai`
client over real HTTP without a GPU; served over a cached OpenAI-compatible backend it is a
caching proxy.

It survives its clients: an asyncio server (idle keep-alive connections cost no thread) with a
real listen backlog, a bounded worker pool for the backend calls, a body-size limit, time limits
on reading a request and on idle connections, a cap on open connections, and an optional API key
(``Authorization: Bearer KEY``; any byte string but an empty one, compared as bytes in constant
time: `cm_gym.llm.apikey`). Bad requests get OpenAI-style error bodies: 400 (malformed JSON,
not a cm_gym prompt), 401 (API key), 404, 405, 411, 413, 422 (the backend refused: e.g. a task it
cannot resolve), 431, 500, 503. `latency_s` adds an artificial delay to every completion — the
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

from cm_gym.core import boundedjson
from cm_gym.core.types import CmGymError
from cm_gym.llm._http import MAX_HEAD_BYTES, HTTPError, RequestHead, encode_response, error_body, parse_head
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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready, self._done = threading.Event(), threading.Event()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def base_url(self) -> str:
        host, port = self.server_address
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"

    # -- life cycle ------------------------------------------------------------------------------
    def serve_forever(self, poll_interval: float | None = None) -> None:
        """Serve until `shutdown()` (or KeyboardInterrupt) in the calling thread."""
        try:
            asyncio.run(self._serve())
        finally:
            self._done.set()

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(
            self._connection, sock=self._sock, backlog=self.backlog, limit=MAX_HEAD_BYTES
        )
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for writer in list(self._writers):
                writer.close()
            await asyncio.sleep(0)

    def wait_ready(self, timeout: float = 10.0) -> None:
        if not self._ready.wait(timeout):
            raise RuntimeError("the LLM server did not start")

    def shutdown(self) -> None:
        """Stop `serve_forever` (from any thread) and wait for it to return."""
        if self._loop is not None and self._stop is not None and not self._done.is_set():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._done.wait(timeout=10)

    def server_close(self) -> None:
        self._sock.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- one connection --------------------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:  # headers and body in one write anyway; no Nagle delay on replies
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if len(self._writers) >= self.max_connections:
            writer.write(
                encode_response(503, error_body("too many connections", "server_error"), keep_alive=False)
            )
            await _close(writer)
            return
        self._writers.add(writer)
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away
        except Exception:  # noqa: BLE001 - one broken connection never stops the server
            logger.exception("LLM server connection failed")
        finally:
            self._writers.discard(writer)
            await _close(writer)

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read, answer; True to keep the connection for another request."""
        try:
            raw_head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.idle_timeout_s)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError):
            return False  # idle, slow, or closed: free the connection
        except asyncio.LimitOverrunError:
            await self._reply(
                writer, HTTPError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request head too large")
            )
            return False
        try:
            head = parse_head(raw_head)
            length = head.content_length(self.max_body_bytes)
        except HTTPError as exc:
            await self._reply(writer, exc)
            return False
        try:
            body = await asyncio.wait_for(reader.readexactly(length), self.read_timeout_s) if length else b""
        except asyncio.TimeoutError:
            await self._reply(
                writer, HTTPError(HTTPStatus.REQUEST_TIMEOUT, "request body not received in time")
            )
            return False
        try:
            status, payload = await self._dispatch(head, body)
        except HTTPError as exc:
            await self._reply(writer, exc, keep_alive=head.keep_alive)
            return head.keep_alive
        writer.write(encode_response(status, payload, keep_alive=head.keep_alive))
        await writer.drain()
        return head.keep_alive

    async def _reply(self, writer: asyncio.StreamWriter, exc: HTTPError, keep_alive: bool = False) -> None:
        extra = {"WWW-Authenticate": "Bearer"} if exc.status == HTTPStatus.UNAUTHORIZED else None
        code = "invalid_api_key" if exc.status == HTTPStatus.UNAUTHORIZED else None
        body = error_body(exc.message, exc.kind, code)
        writer.write(encode_response(exc.status, body, keep_alive=keep_alive, extra=extra))
        await writer.drain()

    # -- routing ---------------------------------------------------------------------------------
    async def _dispatch(self, head: RequestHead, body: bytes) -> tuple[int, dict[str, Any]]:
        if self._key is not None and not authorized(head.headers.get("authorization", ""), self._key):
            raise HTTPError(HTTPStatus.UNAUTHORIZED, "invalid or missing API key (Authorization: Bearer KEY)")
        path = head.path
        if path in ("/v1/models", "/models"):
            if head.method != "GET":
                raise HTTPError(HTTPStatus.METHOD_NOT_ALLOWED, f"{head.method} not allowed on {path}")
            model = {"id": self.model_name, "object": "model", "created": 0, "owned_by": "cm_gym"}
            return HTTPStatus.OK, {"object": "list", "data": [model]}
        if path not in ("/v1/chat/completions", "/chat/completions"):
            raise HTTPError(HTTPStatus.NOT_FOUND, f"unknown path {path[:200]}", "not_found_error")
        if head.method != "POST":
            raise HTTPError(HTTPStatus.METHOD_NOT_ALLOWED, f"{head.method} not allowed on {path}")
        self.request_count += 1
        self.request_log.append((time.time(), hashlib.sha256(body).hexdigest()))
        return HTTPStatus.OK, await self._chat(body)

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


async def _close(writer: asyncio.StreamWriter) -> None:
    try:
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), 2.0)
    except (OSError, asyncio.TimeoutError):
        pass


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
