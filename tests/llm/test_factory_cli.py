"""`make_llm` and the `cm-gym serve-llm` command (run for real in a subprocess)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cm_gym.cli import make_parser
from cm_gym.cli.serve_llm import BenchmarkTaskLookup
from cm_gym.core.types import Task
from cm_gym.llm.base import DRAFT_ACTION
from cm_gym.llm.cached import CachedLLM
from cm_gym.llm.errors import LLMError
from cm_gym.llm.factory import make_llm
from cm_gym.llm.openai_client import OpenAICompatibleLLM
from cm_gym.llm.simulated import SimulatedLLM

HERE = Path(__file__).resolve().parent


def test_make_llm_specs(tmp_path: Path, toy: list[Task], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache-root"))
    sim = make_llm("simulated", seed=4)
    assert isinstance(sim, SimulatedLLM) and sim.seed == 4
    oa = make_llm("openai:my-model", base_url="http://127.0.0.1:1/v1", seed=2, cache_mode="off")
    assert isinstance(oa, OpenAICompatibleLLM) and (oa.model, oa.seed) == ("my-model", 2)
    # a real endpoint is cached by default, in the default file under CM_GYM_CACHE
    default = make_llm("openai:my-model", base_url="http://127.0.0.1:1/v1")
    assert isinstance(default, CachedLLM) and isinstance(default.inner, OpenAICompatibleLLM)
    assert default.cache.path == tmp_path / "cache-root" / "llm" / "responses.sqlite"
    assert default.cache.mode == "rw"
    default.cache.close()
    explicit = make_llm("openai:my-model", base_url="http://x/v1", cache_path=tmp_path / "o.sqlite")
    assert isinstance(explicit, CachedLLM) and explicit.cache.path == tmp_path / "o.sqlite"
    cached = make_llm("simulated", seed=4, cache_path=tmp_path / "c.sqlite")
    assert isinstance(cached, CachedLLM)
    assert (
        cached.complete(DRAFT_ACTION, {"task": toy[0]}).text
        == sim.complete(DRAFT_ACTION, {"task": toy[0]}).text
    )
    assert isinstance(make_llm("simulated", cache_path=tmp_path / "c.sqlite", cache_mode="off"), SimulatedLLM)
    with pytest.raises(LLMError, match="unknown LLM spec"):
        make_llm("gpt-banana")


def test_benchmark_task_lookup_loads_lazily(toy: list[Task]) -> None:
    lookup = BenchmarkTaskLookup(["LLMTestToy"])
    assert lookup._pending == ["LLMTestToy"]
    assert lookup(toy[3].task_id) == toy[3]
    assert lookup._pending == [] and lookup("no-such-task") is None


def test_serve_llm_is_a_subcommand() -> None:
    args = make_parser().parse_args(["serve-llm", "--port", "0", "--benchmark", "LLMTestToy", "--seed", "3"])
    assert (args.port, args.host, args.benchmark, args.seed) == (0, "127.0.0.1", ["LLMTestToy"], 3)
    assert callable(args.func)


# The child presses "Ctrl-C" on itself only if SIGINT reaches it: a parent that runs with SIGINT
# ignored or blocked (a CI runner, a library thread) passes that on through exec, so the child
# restores the default first, as an interactive shell would have it.
_SERVE = (
    "import signal; signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT]); "
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "import sys; sys.path.insert(0, {here!r}); from conftest import ensure_toy_registered; "
    "ensure_toy_registered(); from cm_gym.cli import main; "
    "sys.exit(main(['serve-llm', '--port', '0', '--benchmark', 'LLMTestToy', '--seed', '9', '--model-name', 'toy-sim']))"
)


def test_serve_llm_command_serves_the_openai_client(toy: list[Task]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-u", "-c", _SERVE.format(here=str(HERE))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("serving the simulated LLM"), first + (
            proc.stderr.read() if proc.poll() else ""
        )
        base_url = first.split(" at ")[1].split(" for ")[0]
        assert base_url.startswith("http://127.0.0.1:")
        client = OpenAICompatibleLLM(base_url=base_url, model="toy-sim", max_retries=0)
        for task in toy[:4]:
            remote = client.complete(DRAFT_ACTION, {"task": task})
            assert remote.text == SimulatedLLM(seed=9).complete(DRAFT_ACTION, {"task": task}).text
    finally:
        os.kill(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=30)
    assert code == 0
