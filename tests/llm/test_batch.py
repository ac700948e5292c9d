"""Concurrent cache filling (`cm_gym.llm.batch`) through the real async `openai` client: the
concurrency bound, ``Retry-After``, a failure keeps what arrived, a killed fill resumes without
paying twice, and `RecordingLLM` turns misses into `PendingCall`s."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cm_gym.llm.base import REFLECT
from cm_gym.llm.batch import PendingCall, RecordingLLM, fetch_all
from cm_gym.llm.cache import ResponseCache
from cm_gym.llm.cached import CachedLLM
from cm_gym.llm.errors import LLMError
from cm_gym.llm.openai_client import OpenAICompatibleLLM


class Counting(ThreadingHTTPServer):
    """Answers every chat request after `delay` s; the first `fail` requests get `status`. Tracks
    requests and the most requests in flight at once."""

    daemon_threads = True

    def __init__(self, delay: float = 0.05, fail: int = 0, status: int = 500, retry_after: str = "") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.delay, self.fail, self.status, self.retry_after = delay, fail, status, retry_after
        self.hits = self.inflight = self.max_inflight = 0
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: Counting
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.hits += 1
            hit = self.server.hits
            self.server.inflight += 1
            self.server.max_inflight = max(self.server.max_inflight, self.server.inflight)
        time.sleep(self.server.delay)
        with self.server.lock:
            self.server.inflight -= 1
        if hit <= self.server.fail:
            status, payload = self.server.status, {"error": {"message": "busy", "type": "server_error"}}
        else:
            text = "echo " + body["messages"][1]["content"][:40]
            status, payload = 200, {
                "id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
            }  # fmt: skip
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 429 and self.server.retry_after:
            self.send_header("Retry-After", self.server.retry_after)
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def serve(http_servers: Any) -> Any:
    return lambda **kw: http_servers(Counting(**kw))


def _llm(server: Counting, path: Path, **kw: Any) -> CachedLLM:
    client = OpenAICompatibleLLM(base_url=server.base_url, model="m", backoff_s=0.05, **kw)
    return CachedLLM(client, ResponseCache(path, "rw"))


def _requests(llm: CachedLLM, n: int) -> list[Any]:
    return [llm.request(REFLECT, {"task_id": f"t{i}", "feedback": f"feedback {i}"}) for i in range(n)]


def test_fills_concurrently_within_the_bound_and_replays(serve: Any, tmp_path: Path) -> None:
    server = serve(delay=0.1)
    llm = _llm(server, tmp_path / "c.sqlite")
    requests = _requests(llm, 16)
    stats = fetch_all(llm, requests + requests[:4], concurrency=4)  # duplicates are asked once
    assert stats.calls == 16 == server.hits and stats.tokens == 16 * 12
    assert server.max_inflight == 4  # overlapped, and never more than the bound
    recording = RecordingLLM(llm)
    replayed = recording.complete(REFLECT, {"task_id": "t3", "feedback": "feedback 3"})
    assert replayed.cached and "<task_id>t3<" in replayed.text
    with pytest.raises(PendingCall) as pending:
        recording.complete(REFLECT, {"task_id": "new", "feedback": "x"})
    assert pending.value.request.task_id == "new" and server.hits == 16


def test_retry_after_is_honoured_on_the_async_path(serve: Any, tmp_path: Path) -> None:
    server = serve(delay=0.0, fail=2, status=429, retry_after="0.3")
    llm = _llm(server, tmp_path / "c.sqlite")
    started = time.monotonic()
    assert fetch_all(llm, _requests(llm, 1), concurrency=2).calls == 1
    assert server.hits == 3 and llm.inner.retries == 2  # type: ignore[attr-defined]
    assert time.monotonic() - started >= 0.6  # two waits of Retry-After, not the 0.05 s backoff


def test_a_failure_stops_with_one_error_and_keeps_what_arrived(serve: Any, tmp_path: Path) -> None:
    server = serve(delay=0.0)
    llm = _llm(server, tmp_path / "c.sqlite")
    good = _requests(llm, 5)
    fetch_all(llm, good, concurrency=2)
    bad = serve(delay=0.0, fail=10**6, status=400)
    broken = CachedLLM(OpenAICompatibleLLM(base_url=bad.base_url, model="m"), llm.cache)
    with pytest.raises(LLMError, match="refused the REFLECT request"):
        fetch_all(broken, _requests(broken, 8)[5:], concurrency=2)
    assert len(llm.cache) == 5


_FILL = textwrap.dedent(
    """
    import sys
    from cm_gym.llm.base import REFLECT
    from cm_gym.llm.batch import fetch_all
    from cm_gym.llm.cache import ResponseCache
    from cm_gym.llm.cached import CachedLLM
    from cm_gym.llm.openai_client import OpenAICompatibleLLM
    llm = CachedLLM(OpenAICompatibleLLM(base_url=sys.argv[1], model="m"), ResponseCache(sys.argv[2], "rw"))
    requests = [llm.request(REFLECT, {"task_id": f"t{i}", "feedback": f"feedback {i}"}) for i in range(40)]
    missing = [r for r in requests if not llm.cache.contains(r.key)]
    print(len(missing), flush=True)
    fetch_all(llm, missing, concurrency=4)
    """
)


def _rows(path: Path) -> int:
    """Rows stored so far (0 while the file or its table does not exist yet)."""
    import sqlite3

    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return int(db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_a_killed_fill_resumes_without_paying_twice(serve: Any, tmp_path: Path) -> None:
    server = serve(delay=0.05)
    path = tmp_path / "c.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", _FILL, server.base_url, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "40"
    deadline = time.monotonic() + 60
    while server.hits < 12 or not _rows(path):  # killed mid-fill, after a first flush
        assert time.monotonic() < deadline, "the fill never stored a reply"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    asked_before = server.hits
    with ResponseCache(path, "ro") as cache:
        kept = len(cache)
    assert 0 < kept <= asked_before
    again = subprocess.run(
        [sys.executable, "-c", _FILL, server.base_url, str(path)], capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0 and int(again.stdout.split()[0]) == 40 - kept
    with ResponseCache(path, "ro") as cache:
        assert len(cache) == 40
    # what was lost at the kill is at most the replies in flight and not yet flushed
    assert server.hits - asked_before == 40 - kept
