"""An OpenAI-compatible HTTP server over any `LLM` backend (``POST /v1/chat/completions``,
``GET /v1/models``), on the standard library's `ThreadingHTTPServer`, loopback by default.

The messages must have been rendered by a cm_gym template: `parse_rendered` recovers the template
name and the string fields, and the backend's ``complete`` answers them. Served with the
simulated LLM (`cm-gym serve-llm`) it lets tests and users drive the real `openai` client over
real HTTP without a GPU. Bad requests get OpenAI-style error bodies (400 for malformed JSON or
messages that are not a cm_gym prompt, 404 for unknown paths, 500 for a backend failure).
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cm_gym.llm.base import LLM
from cm_gym.llm.errors import PromptError
from cm_gym.llm.prompts import parse_rendered
from cm_gym.types import CmGymError

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024


class LLMServer(ThreadingHTTPServer):
    """The HTTP server; `request_count` counts chat-completion requests (for replay checks)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], llm: LLM, model_name: str | None = None) -> None:
        super().__init__(address, _Handler)
        self.llm = llm
        self.model_name = model_name or getattr(llm, "name", "cm-gym")
        self.request_count = 0
        self._count_lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (timed out) is routine; anything else is logged with its trace."""
        logger.debug("connection from %s ended with an error", client_address, exc_info=True)

    def count_request(self) -> None:
        with self._count_lock:
            self.request_count += 1

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: LLMServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and
        # delayed ACKs add ~40 ms to every keep-alive request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        logger.debug("%s - %s", self.address_string(), format % args)

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(
                HTTPStatus.OK,
                {
                    "object": "list",
                    "data": [
                        {"id": self.server.model_name, "object": "model", "created": 0, "owned_by": "cm_gym"}
                    ],
                },
            )
        else:
            self._error(HTTPStatus.NOT_FOUND, f"unknown path {self.path}", "not_found_error")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            self._error(HTTPStatus.BAD_REQUEST, "missing or invalid Content-Length")
            return
        raw = self.rfile.read(length)  # read first: keep-alive needs the body consumed
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(HTTPStatus.NOT_FOUND, f"unknown path {self.path}", "not_found_error")
            return
        self.server.count_request()
        try:
            request = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            self._error(HTTPStatus.BAD_REQUEST, f"request body is not valid JSON: {exc}")
            return
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            self._error(HTTPStatus.BAD_REQUEST, "request must be a JSON object with a 'messages' list")
            return
        if request.get("stream"):
            self._error(HTTPStatus.BAD_REQUEST, "streaming is not supported by this server")
            return
        try:
            template, fields = parse_rendered(request["messages"])
        except PromptError as exc:
            self._error(HTTPStatus.BAD_REQUEST, f"messages are not a cm_gym prompt: {exc}")
            return
        try:
            completion = self.server.llm.complete(template, fields)
        except CmGymError as exc:
            self._error(HTTPStatus.UNPROCESSABLE_ENTITY, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - answer 500, keep serving
            logger.exception("backend failed on %s", template)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"backend error: {exc}", "server_error")
            return
        digest = hashlib.sha256(raw).hexdigest()[:24]
        self._send(
            HTTPStatus.OK,
            {
                "id": f"chatcmpl-{digest}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model") or self.server.model_name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": completion.text},
                        "finish_reason": "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": completion.prompt_tokens,
                    "completion_tokens": completion.completion_tokens,
                    "total_tokens": completion.total_tokens,
                },
            },
        )


def make_server(
    llm: LLM, host: str = "127.0.0.1", port: int = 8000, model_name: str | None = None
) -> LLMServer:
    """Bind (but do not start) a server for `llm`; port 0 picks a free port."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning("serving the LLM on %s: it is reachable from other machines", host)
    return LLMServer((host, port), llm, model_name)


def serve_in_thread(
    llm: LLM, host: str = "127.0.0.1", port: int = 0, model_name: str | None = None
) -> tuple[LLMServer, str]:
    """Start a server for `llm` in a daemon thread; returns ``(server, base_url)``. Stop it with
    ``server.shutdown(); server.server_close()``."""
    server = make_server(llm, host, port, model_name)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="cm-gym-llm-server", daemon=True
    )
    thread.start()
    return server, server.base_url
