"""Client limits where users set them (issue 22): flags, CM_GYM_LLM_* variables and gym.make
keywords; a timed-out call is never re-sent; identical requests in flight share one HTTP request;
`cm-gym run --llm openai --llm-timeout 900 --llm-max-tokens 256` against a slow server sends no
request twice (the server's request log)."""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest

from cm_gym.cli import main
from cm_gym.core.types import AgentState
from cm_gym.domains.registry import get_benchmark
from cm_gym.envs._loading import EnvConfigError
from cm_gym.llm.base import DRAFT_ACTION
from cm_gym.llm.cache import ResponseCache, decode_request
from cm_gym.llm.cached import CachedLLM
from cm_gym.llm.errors import LLMError, LLMTimeoutError
from cm_gym.llm.limits import ClientLimits, resolve_limits
from cm_gym.llm.openai_client import OpenAICompatibleLLM
from cm_gym.llm.prompts import render
from cm_gym.llm.server import LLMServer, serve_in_thread
from cm_gym.llm.simulated import SimulatedLLM

TASK = get_benchmark("SQL").load_tasks()[0]
MESSAGES = render(DRAFT_ACTION, {"task": TASK, "state": AgentState(TASK)}).messages


@pytest.fixture()
def slow_server(request: pytest.FixtureRequest) -> Iterator[tuple[LLMServer, str]]:
    """The simulated LLM over HTTP with an artificial latency (`request.param` seconds)."""
    tasks = {t.task_id: t for t in get_benchmark("SQL").load_tasks()}
    server, url = serve_in_thread(
        SimulatedLLM(seed=0, task_lookup=tasks.get), latency_s=float(request.param), model_name="slow"
    )
    try:
        yield server, url
    finally:
        server.shutdown()
        server.server_close()


def _repeats(server: LLMServer) -> int:
    counts = collections.Counter(digest for _, digest in server.request_log)
    return max(counts.values(), default=0)


def test_limits_come_from_the_keyword_then_the_variable_then_the_default() -> None:
    env = {"CM_GYM_LLM_TIMEOUT": "900", "CM_GYM_LLM_MAX_TOKENS": "256"}
    assert resolve_limits(environ={}) == ClientLimits(60.0, 1024, 4, 8)
    assert resolve_limits(environ=env) == ClientLimits(900.0, 256, 4, 8)
    assert resolve_limits(timeout=5, retries=0, concurrency=2, environ=env) == ClientLimits(5.0, 256, 0, 2)
    with pytest.raises(LLMError, match="CM_GYM_LLM_MAX_TOKENS must be >= 1"):
        resolve_limits(environ={"CM_GYM_LLM_MAX_TOKENS": "0"})
    with pytest.raises(LLMError, match="--llm-timeout must be a number"):
        resolve_limits(timeout="soon")  # type: ignore[arg-type]


def test_max_tokens_keys_the_cache_and_the_timeout_does_not(tmp_path: Path) -> None:
    def key(**kw: float) -> str:
        llm = OpenAICompatibleLLM("http://127.0.0.1:9/v1", "m", **kw)  # type: ignore[arg-type]
        return CachedLLM(llm, ResponseCache(tmp_path / "c.sqlite")).request("REFLECT", {"task_id": "t"}).key

    assert key(max_tokens=256) != key(max_tokens=1024)
    assert key(max_tokens=256, timeout=5) == key(max_tokens=256, timeout=900)


def test_flags_are_checked_on_every_command_that_takes_llm(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (
        ["run"],
        ["train"],
        ["evaluate"],
        ["tabulate"],
        ["build", "--benchmark", "SQL", "--out", "x"],
    ):
        with pytest.raises(SystemExit):
            main([*command, "--llm-timeout", "0"])
        assert "--llm-timeout" in capsys.readouterr().err
    for command in (["experiment", "ablations"], ["serve-llm"]):
        with pytest.raises(SystemExit):
            main([*command, "--llm-max-tokens", "-3"])
        assert "--llm-max-tokens" in capsys.readouterr().err


@pytest.mark.parametrize("slow_server", [1.5], indirect=True)
def test_a_timed_out_call_is_one_line_and_never_resent(slow_server: tuple[LLMServer, str]) -> None:
    server, url = slow_server
    llm = OpenAICompatibleLLM(url, "slow", timeout=0.3, max_retries=4, sleep=lambda s: None)
    with pytest.raises(LLMTimeoutError) as err:
        llm.complete_messages(MESSAGES, DRAFT_ACTION)
    message = str(err.value)
    assert "\n" not in message and "0.3 s" in message and "--llm-timeout" in message
    time.sleep(1.6)  # the server finishes the abandoned request
    assert len(server.request_log) == 1 and llm.requests == 1


@pytest.mark.parametrize("slow_server", [0.4], indirect=True)
def test_identical_requests_in_flight_share_one_http_request(slow_server: tuple[LLMServer, str]) -> None:
    server, url = slow_server
    llm = OpenAICompatibleLLM(url, "slow", timeout=30)
    texts: list[str] = []
    threads = [
        threading.Thread(target=lambda: texts.append(llm.complete_messages(MESSAGES).text)) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(texts) == 4 and len(set(texts)) == 1
    assert len(server.request_log) == 1
    llm.complete_messages(MESSAGES)  # not in flight any more: a new request
    assert len(server.request_log) == 2


@pytest.mark.slow
@pytest.mark.parametrize("slow_server", [0.3], indirect=True)
def test_run_against_a_slow_server_sends_no_request_twice(
    slow_server: tuple[LLMServer, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, url = slow_server
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("CM_GYM_MODEL", "slow")
    cache = tmp_path / "c.sqlite"
    sizes = ["--seeds", "0", "--total-decisions", "20", "--checkpoint-every", "10", "--n-build", "3"]
    sizes += ["--n-train", "3", "--n-eval", "3", "--obs-layouts", "paper", "--policies", "none", "top1"]
    args = ["run", "--benchmark", "SQL", "--llm", "openai", "--llm-cache", str(cache), *sizes]
    args += ["--no-tensorboard", "--no-progress", "--out-dir", str(tmp_path / "run")]
    assert main([*args, "--llm-timeout", "900", "--llm-max-tokens", "256"]) == 0
    assert server.request_log and _repeats(server) == 1
    with ResponseCache(cache, mode="ro") as c:
        rows = list(c.rows())
        identities = {json.dumps(decode_request(blob)[1]["identity"], sort_keys=True) for *_, blob in rows}
    assert len(rows) == len(server.request_log)  # every request sent once, kept once
    assert [json.loads(i)["max_tokens"] for i in identities] == [256]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["config"]["llm_timeout"] == 900 and results["config"]["llm_max_tokens"] == 256


def test_gym_make_takes_the_limits(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CM_GYM_MODEL", "m")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    kw = {"tasks": "train", "llm_cache": tmp_path / "c.sqlite"}
    env = gym.make("cm_gym/SQL-v0", llm="openai", llm_timeout=900, llm_max_tokens=256, llm_retries=0, **kw)
    inner = env.unwrapped.llm.inner
    assert (inner.timeout, inner.max_tokens, inner.max_retries) == (900, 256, 0)
    env.close()
    monkeypatch.setenv("CM_GYM_LLM_TIMEOUT", "77")
    env = gym.make("cm_gym/SQL-v0", llm="openai", **kw)
    assert env.unwrapped.llm.inner.timeout == 77
    env.close()
    with pytest.raises(EnvConfigError, match="llm_timeout"):
        gym.make("cm_gym/SQL-v0", llm=SimulatedLLM(), llm_timeout=5)
    with pytest.raises(EnvConfigError, match="llm_max_tokens must be >= 1"):
        gym.make("cm_gym/SQL-v0", llm="openai", llm_max_tokens=0, **kw)
