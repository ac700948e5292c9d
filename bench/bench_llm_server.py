"""The OpenAI-compatible server's own cost (`cm-gym serve-llm`): requests per second and the
server's CPU time per request, on keep-alive and fresh connections, plain HTTP clients and the
real `openai` client.

    python bench/bench_llm_server.py [--requests 2000] [--clients 4]
    PYTHONPATH=/path/to/other/checkout python bench/bench_llm_server.py   # another version's server

The server runs in a child process (this script with ``--serve``) over a stub backend that
answers at once, so the figures are the server's: HTTP parsing and replies, the JSON body, the
rendered-prompt parser and the hand-off to the worker pool, not the simulated LLM's work. The CPU
per request is the child's user + system CPU time over a workload divided by its requests; the
clients run in this process, so on a machine with few cores they compete with the server and the
requests per second are a lower bound. The child imports `cm_gym` from the same ``PYTHONPATH`` as
this process, which is how `docs/llm-servers.md` compared the hand-written server with uvicorn.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from cm_gym.core.types import Task
from cm_gym.llm.base import DRAFT_ACTION, Completion
from cm_gym.llm.prompts import render_messages

TASK = Task(
    "bench-1",
    "sql",
    "How many singers from each country are older than the average age of all singers?",
    "CREATE TABLE singer (singer_id int, name text, country text, age int, is_male bool);\n" * 8,
    "SELECT country, count(*) FROM singer WHERE age > (SELECT avg(age) FROM singer) GROUP BY country",
)


class Stub:
    """A backend that answers every prompt at once with the same reply."""

    name = "bench"

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        return Completion("```sql\nSELECT 1\n```", prompt_tokens=300, completion_tokens=8)


def serve() -> None:
    """The child: serve the stub, print the base URL and the server's library, then answer
    ``cpu`` on stdin with this process's CPU seconds until ``quit``."""
    from cm_gym.llm.server import serve_in_thread

    server, url = serve_in_thread(Stub(), model_name="bench")  # type: ignore[arg-type]
    impl = "uvicorn " + sys.modules["uvicorn"].__version__ if "uvicorn" in sys.modules else "asyncio streams"
    print(url, impl, flush=True)
    for line in sys.stdin:
        if line.strip() == "cpu":
            t = os.times()
            print(t.user + t.system, flush=True)
        elif line.strip() == "quit":
            break
    server.shutdown()
    server.server_close()


class Child:
    """The server process and its CPU clock."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.url, self.impl = self.proc.stdout.readline().split(" ", 1)
        self.impl = self.impl.strip()
        host, port = self.url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        self.address = (host, int(port))

    def cpu(self) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("cpu\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=30)


def http_worker(
    address: tuple[str, int], method: str, path: str, body: bytes | None, keep: bool
) -> Callable[[int], None]:
    """A client loop on http.client: `n` requests on one keep-alive connection, or each on a new one."""

    def run(n: int) -> None:
        conn = http.client.HTTPConnection(*address, timeout=30)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if not keep:
            headers["Connection"] = "close"
        for _ in range(n):
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            assert response.status == 200, response.status
            if not keep:
                conn.close()
        conn.close()

    return run


def openai_worker(url: str, messages: list[dict[str, str]]) -> Callable[[int], None]:
    """A client loop on the real `openai` client (one client, keep-alive, as cm_gym's own)."""

    def run(n: int) -> None:
        import openai

        client = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0)
        for _ in range(n):
            reply = client.chat.completions.create(model="bench", messages=messages, temperature=0)  # type: ignore[arg-type]
            assert reply.choices[0].message.content

    return run


def measure(child: Child, run: Callable[[int], None], requests: int, clients: int) -> tuple[float, float]:
    """(requests per second, server CPU milliseconds per request) for `requests` split over
    `clients` threads."""
    run(max(1, requests // 50))  # warm up (imports, first connection)
    per = max(1, requests // clients)
    threads = [threading.Thread(target=run, args=(per,)) for _ in range(clients)]
    cpu0, t0 = child.cpu(), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed, cpu = time.perf_counter() - t0, child.cpu() - cpu0
    done = per * clients
    return done / elapsed, cpu / done * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per workload")
    parser.add_argument("--clients", type=int, default=4, help="concurrent client threads")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve()
        return
    messages = render_messages(DRAFT_ACTION, {"task": TASK})
    chat = json.dumps({"model": "bench", "messages": messages, "temperature": 0}).encode()
    child = Child()
    try:
        a = child.address
        workloads = [
            ("GET /v1/models, keep-alive", http_worker(a, "GET", "/v1/models", None, True), args.requests),
            (
                "POST chat (0.8 KB prompt), keep-alive",
                http_worker(a, "POST", "/v1/chat/completions", chat, True),
                args.requests,
            ),
            (
                "GET /v1/models, new connection each",
                http_worker(a, "GET", "/v1/models", None, False),
                args.requests // 2,
            ),
            ("POST chat, openai client", openai_worker(child.url, messages), args.requests // 4),
        ]
        print(f"server: {child.impl}; {args.clients} client threads; load average {os.getloadavg()[0]:.1f}")
        print(f"{'workload':40s} {'requests':>8s} {'req/s':>8s} {'server CPU ms/req':>18s}")
        for label, run, n in workloads:
            rate, cpu_ms = measure(child, run, n, args.clients)
            print(f"{label:40s} {n // args.clients * args.clients:8d} {rate:8.0f} {cpu_ms:18.3f}", flush=True)
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    finally:
        child.close()


if __name__ == "__main__":
    main()
