"""Qwen2.5-Coder-0.5B on llama.cpp, end to end: one SpiderSQL decision through the real client.

Nothing is built here: the engine and the weights are installed once per machine by
``cm-gym setup-local-model qwen2.5-coder-0.5b`` (`.ci/run` does it). The test starts the engine as
a child process, drafts a real Spider task with the real model, checks it with the real SQLite
world model, revises it with a record shown, and asserts the plumbing: every reply marked real, the
cache rows keyed by the backend's identity (checkpoint sha256, prompts digest) with their requests,
usage counted by the engine, the engine gone after close, and a replay with no engine at all.
What it does not assert is the model's skill. Skipped outside CI when the engine or the weights
are missing; a failure in CI.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cm_gym.agent import BaseAgent, Cost, RecordView
from cm_gym.core.types import AgentState
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.base import DRAFT_ACTION, REVISE_WITH_RECORD
from cm_gym.llm.cache import ResponseCache, decode_request
from cm_gym.llm.factory import make_llm
from cm_gym.llm.fields import render_record

pytestmark = [pytest.mark.real_llm, pytest.mark.slow, pytest.mark.data, pytest.mark.timeout(900)]
MODEL = "qwen2.5-coder-0.5b"


def _require() -> None:
    from cm_gym.llm.errors import LLMError
    from cm_gym.llm.gguf_models import get_model, part_files
    from cm_gym.llm.llama_engine import require_engine

    try:
        require_engine()
        part_files(get_model(MODEL))
    except LLMError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the local model is not installed in CI: {exc}")
        pytest.skip(f"needs `cm-gym setup-local-model {MODEL}`: {exc}")


def test_one_spider_decision_with_the_real_model(tmp_path: Path) -> None:
    _require()
    spec = get_benchmark("SpiderSQL")
    domain = get_domain(spec.domain_name)
    task = next(t for t in spec.load() if "How many singers" in t.prompt)
    cache = tmp_path / "real.sqlite"
    llm = make_llm(f"local:{MODEL}", cache_path=cache)
    backend = llm.inner  # type: ignore[attr-defined]
    try:
        agent = BaseAgent(llm, domain, domain.make_evaluator())
        decision = agent.decide(AgentState(task))
        assert domain.parse_problem(decision.draft) is None, decision.draft  # a query, parsed
        assert decision.outcome.feedback  # checked by the SQLite world model
        draft = decision.draft
        wrong = "SELECT count(*) FROM singer WHERE Age > 100"
        record = RecordView(
            "r-real",
            render_record(
                {
                    "situation": "counting rows of a table",
                    "condition": "",
                    "a_minus": wrong,
                    "a_plus": "SELECT count(*) FROM singer",
                    "evidence": {"score_minus": 0.0, "score_plus": 1.0},
                }
            ),
            wrong,
            "SELECT count(*) FROM singer",
        )
        cost = Cost()
        revised = agent.revise(AgentState(task), wrong, record, cost)
        assert cost.llm_calls == 1 and cost.completion_tokens > 0 and isinstance(revised, str)
        engines = list(backend._engines)
        assert engines and all(e.alive() for e in engines)
    finally:
        backend.close()
    assert not any(e.alive() for e in engines)  # stopped with the backend

    identity = backend.cache_identity()
    rows: dict[str, list[dict]] = {}
    with ResponseCache(cache, mode="ro") as c:
        for _key, template, raw, _, blob in c.rows():
            assert blob is not None
            _, request = decode_request(blob)
            assert request["identity"] == identity
            value = json.loads(raw)
            assert value["provenance"] == f"real:{MODEL}" and value["estimated"] is False
            rows.setdefault(template, []).append(value)
    assert len(rows[DRAFT_ACTION]) == 1 and len(rows[REVISE_WITH_RECORD]) == 1
    assert rows[DRAFT_ACTION][0]["prompt_tokens"] > 100  # the schema was shown

    # a replay needs no engine: ro mode, engines never started, the same draft
    replay = make_llm(f"local:{MODEL}", cache_path=cache, cache_mode="ro")
    again = BaseAgent(replay, domain, domain.make_evaluator()).decide(AgentState(task))
    assert again.draft == draft and replay.inner._clients == []  # type: ignore[attr-defined]
    counts = replay.replies.as_dict()  # type: ignore[attr-defined]
    assert counts["real"] == 1 and counts["simulated"] == 0


def test_serve_llm_publishes_engines_that_runs_attach_to(tmp_path: Path) -> None:
    """`cm-gym serve-llm --model qwen2.5-coder-0.5b` starts the engines and publishes them; a
    `local:` backend in another process attaches instead of starting its own; stopping the server
    stops the engines and withdraws the file."""
    import signal
    import subprocess
    import sys
    import time

    from cm_gym.llm.local_llm import LocalLLM, published_engines_file

    _require()
    env = {**os.environ}
    cmd = [sys.executable, "-m", "cm_gym.cli", "serve-llm", "--model", MODEL, "--engines", "1", "--port", "0",
           "--benchmark", "SQL"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 600
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            lines.append(line)
            if " at http://" in line or not line:
                break
        assert published_engines_file(MODEL).is_file(), "".join(lines)
        llm = LocalLLM(MODEL)
        reply = llm.complete_messages([{"role": "user", "content": "Say OK."}], "check", 4)
        assert reply.text and llm._engines == []  # attached: no engine of its own
        llm.close()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    assert not published_engines_file(MODEL).exists()
