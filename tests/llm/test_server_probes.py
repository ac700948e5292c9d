"""The LLM server survives its clients (issue 14, item 4): hostile prompts parse in linear time, a
body-size limit, idle connections released, a real listen backlog, malformed HTTP refused with the
right status, and an optional API key. Each probe runs over real sockets against `serve_in_thread`."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from cm_gym.core.types import Task
from cm_gym.llm.base import DRAFT_ACTION
from cm_gym.llm.errors import LLMError
from cm_gym.llm.openai_client import OpenAICompatibleLLM
from cm_gym.llm.prompts import render_messages
from cm_gym.llm.server import LLMServer, serve_in_thread
from cm_gym.llm.simulated import SimulatedLLM


@pytest.fixture()
def server(toy_lookup: dict[str, Task], request: pytest.FixtureRequest) -> Iterator[LLMServer]:
    options = getattr(request, "param", {})
    srv, _ = serve_in_thread(SimulatedLLM(seed=3, task_lookup=toy_lookup), model_name="probe", **options)
    yield srv
    srv.shutdown()
    srv.server_close()


def _post(url: str, body: bytes, timeout: float = 10.0, **headers: str) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _raw(server: LLMServer, data: bytes, timeout: float = 10.0) -> bytes:
    """Send raw bytes on a fresh connection; return everything the server answers until it closes."""
    with socket.create_connection(server.server_address, timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def test_hostile_8kb_prompt_is_refused_at_once(server: LLMServer, toy: list[Task]) -> None:
    """The old template regex backtracked for minutes on this ~9 KB message, blocking a worker."""
    system = render_messages(DRAFT_ACTION, {"task": toy[0]})[0]
    hostile = (
        "<task_id>"
        + "</task_id> <agent></agent> <decision></decision> <failed_attempts></failed_attempts>\n\n<state_text>\n"
        * 80
        + "x"
    )
    body = json.dumps({"model": "m", "messages": [system, {"role": "user", "content": hostile}]}).encode()
    assert len(body) > 8000
    status, reply = _post(server.base_url + "/chat/completions", body, timeout=10)
    assert status == 400 and "not a cm_gym prompt" in reply["error"]["message"]
    good = json.dumps({"model": "m", "messages": render_messages(DRAFT_ACTION, {"task": toy[0]})}).encode()
    assert _post(server.base_url + "/chat/completions", good)[0] == 200


def test_body_size_limit_and_malformed_http(server: LLMServer) -> None:
    big = _raw(server, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n")
    assert big.startswith(b"HTTP/1.1 413 ") and b"limit" in big
    assert _raw(server, b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    chunked = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    assert _raw(server, chunked).startswith(b"HTTP/1.1 411 ")
    assert _raw(server, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 411 ")
    huge_head = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 40000 + b"\r\n\r\n"
    assert _raw(server, huge_head).startswith(b"HTTP/1.1 431 ")
    endless_head = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 40000  # never ends
    assert _raw(server, endless_head).startswith(b"HTTP/1.1 431 ")
    many = (
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(120)) + b"\r\n"
    )
    reply = _raw(server, many)
    assert reply.startswith(b"HTTP/1.1 431 ") and b"more than 100 header lines" in reply
    two_keys = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n"
    assert _raw(server, two_keys).startswith(b"HTTP/1.1 400 ")
    assert _raw(server, b"DELETE /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").startswith(
        b"HTTP/1.1 405 "
    )
    assert _raw(server, b"GET /v1/models HTTP/2.0\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 505 ")
    # HTTP/1.1 without Host is refused (RFC 9112 section 3.2; h11 enforces it), saying so
    no_host = _raw(server, b"GET /v1/models HTTP/1.1\r\n\r\n")
    assert no_host.startswith(b"HTTP/1.1 400 ") and b"Host" in no_host
    # every refusal is an OpenAI-style JSON error body
    assert json.loads(big.split(b"\r\n\r\n", 1)[1])["error"]["type"] == "invalid_request_error"
    # it still serves, with keep-alive: two requests on one connection
    two = _raw(
        server,
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    assert two.count(b"HTTP/1.1 200 OK") == 2


def test_replies_are_not_held_by_nagle(server: LLMServer) -> None:
    """uvicorn writes a reply's head and body apart: without TCP_NODELAY on the server's side of
    every connection, a keep-alive client waits for its delayed ACK (40 ms a request)."""
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=10)
    try:
        conn.request("GET", "/v1/models")
        assert conn.getresponse().read()
        sockets = [c.transport.get_extra_info("socket") for c in server._server.server_state.connections]
        assert sockets and all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in sockets)
    finally:
        conn.close()


@pytest.mark.parametrize("server", [{"read_timeout_s": 0.3}], indirect=True)
def test_a_body_that_does_not_come_is_408(server: LLMServer, toy: list[Task]) -> None:
    """The head promises 100 bytes, 10 come: the server answers 408 and closes, and serves on."""
    slow = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"{" * 10
    reply = _raw(server, slow)
    assert reply.startswith(b"HTTP/1.1 408 ") and b"not received in time" in reply
    good = json.dumps({"model": "m", "messages": render_messages(DRAFT_ACTION, {"task": toy[0]})}).encode()
    assert _post(server.base_url + "/chat/completions", good)[0] == 200
    assert server.request_count == 1  # the cut request never reached the backend


@pytest.mark.parametrize("server", [{"max_connections": 3}], indirect=True)
def test_connections_over_the_cap_get_503_and_the_others_are_served(server: LLMServer) -> None:
    host, port = server.server_address[:2]
    held = [http.client.HTTPConnection(host, port, timeout=10) for _ in range(3)]
    try:
        for conn in held:  # each is open on the server once it has answered on it
            conn.request("GET", "/v1/models")
            assert conn.getresponse().read() and conn.sock is not None
        over = _raw(server, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        assert over.startswith(b"HTTP/1.1 503 ") and b"too many connections" in over
        for conn in held:  # the connections under the cap keep being served, on the same sockets
            sock = conn.sock
            conn.request("GET", "/v1/models")
            response = conn.getresponse()
            assert response.status == 200 and response.read() and conn.sock is sock
    finally:
        for conn in held:
            conn.close()
    # once they are closed, new clients get in (the openai client retries the 503 until then)
    raw = openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=8)
    assert [m.id for m in raw.models.list()] == ["probe"]


@pytest.mark.parametrize("server", [{"idle_timeout_s": 0.5}], indirect=True)
def test_idle_connections_are_released_and_do_not_block_others(server: LLMServer, toy: list[Task]) -> None:
    idle = [socket.create_connection(server.server_address, timeout=10) for _ in range(300)]
    partial = socket.create_connection(server.server_address, timeout=10)
    partial.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Le")  # a slow client
    try:
        client = OpenAICompatibleLLM(base_url=server.base_url, model="probe", max_retries=0, timeout=10)
        assert client.complete(DRAFT_ACTION, {"task": toy[1]}).text.startswith("```")  # not starved
        for sock in [*idle[:5], partial]:
            assert sock.recv(1) == b""  # the server closed it after the idle timeout
    finally:
        for sock in [*idle, partial]:
            sock.close()


def test_fifty_parallel_requests_are_all_answered(server: LLMServer, toy: list[Task]) -> None:
    """Each on a new connection, all at once: the old backlog of 5 reset a third of them."""
    bodies = [
        json.dumps(
            {"model": "m", "messages": render_messages(DRAFT_ACTION, {"task": toy[i % len(toy)]})}
        ).encode()
        for i in range(50)
    ]
    statuses: list[Any] = [None] * 50
    barrier = threading.Barrier(50)

    def one(i: int) -> None:
        barrier.wait()
        try:
            statuses[i] = _post(server.base_url + "/chat/completions", bodies[i], Connection="close")[0]
        except OSError as exc:  # a reset connection
            statuses[i] = repr(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert statuses == [200] * 50
    assert server.request_count == 50


@pytest.mark.parametrize("server", [{"api_key": "s3cret"}], indirect=True)
def test_api_key_is_required_when_set(server: LLMServer, toy: list[Task]) -> None:
    wrong = OpenAICompatibleLLM(base_url=server.base_url, model="probe", api_key="nope", max_retries=2)
    with pytest.raises(LLMError, match="refused"):
        wrong.complete(DRAFT_ACTION, {"task": toy[0]})
    assert wrong.requests == 1  # 401 is not retried
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.base_url, api_key="nope", max_retries=0).models.list()
    right = OpenAICompatibleLLM(base_url=server.base_url, model="probe", api_key="s3cret", max_retries=0)
    assert right.complete(DRAFT_ACTION, {"task": toy[0]}).text.startswith("```")
    assert server.request_count == 1  # refused requests never reach the backend


@pytest.mark.parametrize("server", [{"latency_s": 0.3, "workers": 1}], indirect=True)
def test_artificial_latency_holds_no_worker(server: LLMServer, toy: list[Task]) -> None:
    """With one worker and 0.3 s latency, 6 concurrent requests overlap their waits (the latency is
    an asyncio sleep, as a real model's would be a remote wait); checked by counting in-flight
    replies, not by timing."""
    starts: list[float] = []
    ends: list[float] = []

    def one(i: int) -> None:
        client = OpenAICompatibleLLM(base_url=server.base_url, model="probe", max_retries=0)
        starts.append(time.monotonic())
        client.complete(DRAFT_ACTION, {"task": toy[i]})
        ends.append(time.monotonic())

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(ends) == 6
    # every request started before the first one finished: they were in flight together
    assert max(starts) < min(ends)


def test_caching_proxy_forwards_once(server: LLMServer, toy: list[Task], tmp_path: Any) -> None:
    """`serve-llm --llm openai`: the server in front of another endpoint, with the response cache:
    the upstream sees each distinct request once, whoever asks."""
    from cm_gym.llm.factory import make_llm

    upstream = make_llm(
        "openai:probe", base_url=server.base_url, cache_path=tmp_path / "proxy.sqlite", max_retries=0
    )
    proxy, url = serve_in_thread(upstream, model_name="proxy")
    try:
        clients = [OpenAICompatibleLLM(base_url=url, model="proxy", max_retries=0) for _ in range(2)]
        texts = [c.complete(DRAFT_ACTION, {"task": t}).text for c in clients for t in toy[:3]]
        assert texts[:3] == texts[3:] and proxy.request_count == 6
        assert server.request_count == 3  # the second client was answered from the proxy's cache
    finally:
        proxy.shutdown()
        proxy.server_close()
