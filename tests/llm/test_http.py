"""Real HTTP end to end: the official `openai` client against the cm_gym server on 127.0.0.1, cache
replay with zero requests, and the client's retries against a scripted flaky server."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
import pytest

from cm_gym.core.types import AgentState, Attempt, Outcome, Task
from cm_gym.llm.base import DRAFT_ACTION, GENERATE_LOCAL_ALTERNATIVES, REFLECT, REVISE_WITH_RECORD
from cm_gym.llm.cache import ResponseCache
from cm_gym.llm.cached import CachedLLM
from cm_gym.llm.errors import LLMError, LLMTimeoutError, LLMUnreachableError
from cm_gym.llm.openai_client import OpenAICompatibleLLM
from cm_gym.llm.prompts import render_messages
from cm_gym.llm.server import LLMServer, serve_in_thread
from cm_gym.llm.simulated import SimulatedLLM


@pytest.fixture()
def sim_server(toy_lookup: dict[str, Task]) -> Iterator[LLMServer]:
    server, _ = serve_in_thread(SimulatedLLM(seed=11, task_lookup=toy_lookup), model_name="sim-test")
    yield server
    server.shutdown()
    server.server_close()


def _client(base_url: str, **kw: Any) -> OpenAICompatibleLLM:
    kw.setdefault("sleep", lambda s: None)
    return OpenAICompatibleLLM(base_url=base_url, model="sim-test", api_key="EMPTY", **kw)


def _cases(task: Task) -> list[tuple[str, dict[str, Any]]]:
    failed = Outcome(score=0.0, solved=False, feedback="Wrong result set.")
    state = AgentState(task).with_attempt(Attempt("SELECT 1", failed))
    base = {"task": task, "state": state, "agent": "react"}
    return [
        (DRAFT_ACTION, base),
        (DRAFT_ACTION, base | {"state": AgentState(task)}),
        (
            REVISE_WITH_RECORD,
            base
            | {
                "draft": task.reference,
                "record": "r",
                "record_id": "x",
                "record_a_minus": "age >= 18",
                "record_a_plus": "age > 18",
            },
        ),
        (GENERATE_LOCAL_ALTERNATIVES, base | {"action": task.reference}),
        (REFLECT, base | {"feedback": "Rows differ."}),
    ]


def test_openai_client_over_http_matches_in_process(sim_server: LLMServer, toy: list[Task]) -> None:
    client = _client(sim_server.base_url)
    local = SimulatedLLM(seed=11)
    n = 0
    for task in toy[:6]:
        for template, fields in _cases(task):
            remote = client.complete(template, fields)
            expected = local.complete(template, fields)
            assert remote.text == expected.text
            assert (remote.prompt_tokens, remote.completion_tokens) == (
                expected.prompt_tokens,
                expected.completion_tokens,
            )
            assert not remote.estimated and not remote.cached
            n += 1
    assert sim_server.request_count == n == client.requests


def test_models_endpoint_with_the_openai_client(sim_server: LLMServer) -> None:
    raw = openai.OpenAI(base_url=sim_server.base_url, api_key="EMPTY", max_retries=0)
    assert [m.id for m in raw.models.list()] == ["sim-test"]


def _post(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_server_rejects_bad_requests_with_openai_errors(sim_server: LLMServer, toy: list[Task]) -> None:
    url = sim_server.base_url + "/chat/completions"
    status, body = _post(url, b"{not json")
    assert (
        status == 400
        and body["error"]["type"] == "invalid_request_error"
        and "JSON" in body["error"]["message"]
    )
    status, body = _post(
        url, json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    )
    assert status == 400 and "not a cm_gym prompt" in body["error"]["message"]
    assert "answers only prompts rendered by cm_gym" in body["error"]["message"]  # a chat client learns why
    unknown = Task("nope-1", "llmtoy", "q", "e", "SELECT 1")
    messages = render_messages(DRAFT_ACTION, {"task": unknown})
    status, body = _post(url, json.dumps({"model": "m", "messages": messages}).encode())
    assert status == 422 and "nope-1" in body["error"]["message"]
    status, body = _post(sim_server.base_url + "/nowhere", b"{}")
    assert status == 404
    # the server keeps serving after bad requests
    messages = render_messages(DRAFT_ACTION, {"task": toy[0]})
    status, body = _post(url, json.dumps({"model": "m", "messages": messages}).encode())
    assert status == 200 and body["choices"][0]["message"]["content"].startswith("```")
    assert (
        body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    )


def test_cache_replay_over_http_makes_no_requests(
    sim_server: LLMServer, toy: list[Task], tmp_path: Path
) -> None:
    path = tmp_path / "replay.sqlite"
    calls = [case for task in toy[:8] for case in _cases(task)]
    rw = CachedLLM(_client(sim_server.base_url), ResponseCache(path, "rw"))
    first = [rw.complete(t, f) for t, f in calls]
    assert sim_server.request_count == len(calls)
    rw.cache.close()
    ro = CachedLLM(_client(sim_server.base_url), ResponseCache(path, "ro"))
    second = [ro.complete(t, f) for t, f in calls]
    assert sim_server.request_count == len(calls)  # zero HTTP requests on the replay
    assert [c.text for c in second] == [c.text for c in first]
    assert all(c.cached for c in second)
    assert ro.cache.stats()["tokens_saved"] == sum(c.total_tokens for c in first)
    assert ro.cache.stats()["misses"] == 0


# -- a scripted flaky server ----------------------------------------------------------------------
_OK = {
    "id": "x",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "CHOICE: 2"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
}


class Scripted(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script: list[tuple[int, Any, dict[str, str]]]) -> None:
        super().__init__(("127.0.0.1", 0), _ScriptedHandler)
        self.script, self.hits = list(script), 0
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out closed the socket: expected in these tests


class _ScriptedHandler(BaseHTTPRequestHandler):
    server: Scripted

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            i = min(self.server.hits, len(self.server.script) - 1)
            self.server.hits += 1
        status, body, headers = self.server.script[i]
        if "X-Delay" in headers:
            time.sleep(float(headers["X-Delay"]))
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def scripted(http_servers: Any) -> Any:
    return lambda *script: http_servers(Scripted(list(script)))


_ERR = {"error": {"message": "boom", "type": "server_error"}}
_JUDGE = {"candidates": ["a", "b"], "task_id": "t"}


def test_retries_500_and_429_then_succeeds(scripted: Any) -> None:
    server = scripted((500, _ERR, {}), (429, _ERR, {"Retry-After": "3"}), (503, _ERR, {}), (200, _OK, {}))
    sleeps: list[float] = []
    client = _client(server.base_url, sleep=sleeps.append, max_retries=4, backoff_s=0.5, backoff_max_s=8)
    completion = client.complete("BEST_OF_N_JUDGE", _JUDGE)
    assert completion.text == "CHOICE: 2" and (completion.prompt_tokens, completion.completion_tokens) == (
        11,
        3,
    )
    assert server.hits == 4 and client.retries == 3
    assert sleeps == [0.5, 3.0, 2.0]  # exponential backoff; Retry-After honoured


def test_exhausted_retries_give_one_clear_error(scripted: Any) -> None:
    server = scripted((500, _ERR, {}))
    client = _client(server.base_url, max_retries=2)
    with pytest.raises(LLMError, match="failed after 3 attempts"):
        client.complete("BEST_OF_N_JUDGE", _JUDGE)
    assert server.hits == 3


def test_client_errors_are_not_retried(scripted: Any) -> None:
    server = scripted((400, {"error": {"message": "bad model", "type": "invalid_request_error"}}, {}))
    client = _client(server.base_url, max_retries=3)
    with pytest.raises(LLMError, match="refused"):
        client.complete("BEST_OF_N_JUDGE", _JUDGE)
    assert server.hits == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{this is not json", "failed after 2 attempts"),
        (_OK | {"choices": []}, "empty choice list"),
        (
            _OK | {"choices": [{"index": 0, "message": {"role": "assistant", "content": None}}]},
            "without message content",
        ),
    ],
)
def test_malformed_answers_are_retried_then_fail(scripted: Any, body: Any, message: str) -> None:
    server = scripted((200, body, {}))
    client = _client(server.base_url, max_retries=1)
    with pytest.raises(LLMError, match=message):
        client.complete("BEST_OF_N_JUDGE", _JUDGE)
    assert server.hits == 2


def test_missing_usage_is_estimated(scripted: Any) -> None:
    server = scripted((200, {k: v for k, v in _OK.items() if k != "usage"}, {}))
    completion = _client(server.base_url).complete("BEST_OF_N_JUDGE", _JUDGE)
    assert completion.estimated and completion.prompt_tokens > 10 and completion.completion_tokens == 3


def test_slow_server_times_out_once_and_is_not_resent(scripted: Any) -> None:
    """A reply that did not come in time may still be computing: no re-send (issue 22), one line
    naming the limit and the flag."""
    server = scripted((200, _OK, {"X-Delay": "0.6"}))
    client = _client(server.base_url, max_retries=1, timeout=0.15)
    with pytest.raises(LLMTimeoutError, match=r"timed out after 0.15 s .*--llm-timeout"):
        client.complete("BEST_OF_N_JUDGE", _JUDGE)
    time.sleep(0.7)
    assert client.requests == 1 and server.hits == 1


def test_server_down_is_a_clear_error() -> None:
    with socket.socket() as s:  # a port that nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = _client(f"http://127.0.0.1:{port}/v1", max_retries=2, timeout=2)
    with pytest.raises(LLMUnreachableError, match="cannot connect to .*start the server"):
        client.complete("BEST_OF_N_JUDGE", _JUDGE)
    assert client.requests == 1  # a server that was never reached is not retried


def test_model_name_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CM_GYM_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    with pytest.raises(LLMError, match="CM_GYM_MODEL"):
        OpenAICompatibleLLM(base_url="http://127.0.0.1:1/v1")
    monkeypatch.setenv("CM_GYM_MODEL", "from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    llm = OpenAICompatibleLLM()
    assert (llm.model, llm.base_url) == ("from-env", "http://127.0.0.1:9/v1")
    assert llm.cache_identity()["model"] == "from-env"


def test_concurrent_clients_get_the_in_process_answers(sim_server: LLMServer, toy: list[Task]) -> None:
    local = SimulatedLLM(seed=11)
    calls = [case for task in toy[:12] for case in _cases(task)]
    results: dict[int, str] = {}

    def worker(offset: int) -> None:
        client = _client(sim_server.base_url)
        for i in range(offset, len(calls), 4):
            results[i] = client.complete(*calls[i]).text

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert [results[i] for i in range(len(calls))] == [local.complete(t, f).text for t, f in calls]
