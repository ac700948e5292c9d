"""Issue 11, done when: `cm-gym tabulate` then `cm-gym run --llm openai --llm-cache-mode ro` completes
with the server stopped — through the real `openai` client against the local server, at small
sizes. Also: the bill is printed before any call, a ro miss and a stopped server are one clear line,
and evaluation's concurrent prefetch changes no result."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cm_gym.cli import main
from cm_gym.cli.serve_llm import BenchmarkTaskLookup
from cm_gym.llm.server import LLMServer, serve_in_thread
from cm_gym.llm.simulated import SimulatedLLM

pytestmark = pytest.mark.slow

SIZES = ["--benchmark", "SQL", "--n-build", "16", "--n-train", "8", "--n-eval", "6", "--no-progress"]
RUN = ["--seeds", "0", "--total-decisions", "24", "--checkpoint-every", "12", "--no-tensorboard"]


@pytest.fixture()
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LLMServer]:
    srv, url = serve_in_thread(
        SimulatedLLM(seed=0, task_lookup=BenchmarkTaskLookup(["SQL"])), model_name="sim"
    )
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("CM_GYM_MODEL", "sim")
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    yield srv
    srv.shutdown()
    srv.server_close()


def _results(out: Path) -> dict[str, Any]:
    return json.loads((out / "results.json").read_text())


def test_tabulate_then_run_replays_with_the_server_stopped(
    server: LLMServer, tmp_path: Path, capsys: Any
) -> None:
    cache = ["--llm", "openai", "--llm-cache", str(tmp_path / "llm.sqlite")]
    assert main(["tabulate", *SIZES, *cache, "--out-dir", str(tmp_path / "tab"), "--concurrency", "8"]) == 0
    printed = capsys.readouterr().out
    bill, done = printed.index("bill (upper bound, before any call)"), printed.index("done:")
    assert bill < done
    made = server.request_count
    assert made > 0 and f"done: {made:,} calls made" in printed

    server.shutdown()
    server.server_close()  # nothing listens any more

    out = tmp_path / "replay"  # a fresh folder: memory is rebuilt from the cache too
    assert main(["run", *SIZES, *cache, "--llm-cache-mode", "ro", *RUN, "--out-dir", str(out)]) == 0
    llm = _results(out)["llm"]
    assert llm["live_calls"] == 0 and llm["misses"] == 0 and llm["hits"] > 0
    assert "LLM: 0 live calls" in capsys.readouterr().out

    # a request the cache does not hold (another sampling seed): one clear line, no network
    assert (
        main(
            [
                "run",
                *SIZES,
                *cache,
                "--llm-cache-mode",
                "ro",
                "--llm-seed",
                "7",
                *RUN,
                "--out-dir",
                str(out),
                "--overwrite",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "read-only cache" in err and "DRAFT_ACTION of task" in err
    # the same in rw mode, with the server down: one clear line at once, not retries and a trace
    assert main(["run", *SIZES, *cache, "--llm-seed", "7", *RUN, "--out-dir", str(tmp_path / "down")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("cm-gym: error: cannot connect to") and "retry" not in " ".join(err)


def test_dry_run_prints_the_bill_and_calls_nothing(server: LLMServer, tmp_path: Path, capsys: Any) -> None:
    args = ["tabulate", *SIZES, "--llm", "openai", "--llm-cache", str(tmp_path / "c.sqlite"), "--dry-run"]
    assert main([*args, "--out-dir", str(tmp_path / "t")]) == 0
    assert "at most" in capsys.readouterr().out and server.request_count == 0


def test_evaluation_prefetch_changes_no_result(server: LLMServer, tmp_path: Path) -> None:
    """The protocol run live (rw) with concurrency 8 (construction and evaluation prefetch) and
    with concurrency 1 (no prefetch) gives the same results and the same calls."""
    out: dict[int, dict[str, Any]] = {}
    for concurrency in (8, 1):
        args = [
            "run",
            *SIZES,
            "--llm",
            "openai",
            "--llm-cache",
            str(tmp_path / f"c{concurrency}.sqlite"),
            *RUN,
        ]
        assert (
            main([*args, "--concurrency", str(concurrency), "--out-dir", str(tmp_path / str(concurrency))])
            == 0
        )
        out[concurrency] = _results(tmp_path / str(concurrency))
    assert out[8]["policies"] == out[1]["policies"]
    assert out[8]["llm"]["live_calls"] >= out[1]["llm"]["live_calls"] > 0  # a random policy may fetch extra


def test_construction_prefetch_changes_no_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Construction fetches the first drafts and each decision's DISTIL_RECORD calls at once (a
    cached LLM); the memory it builds is the memory of the plain sequential build."""
    from cm_gym.agent.prefetch import prefetch_first_drafts
    from cm_gym.domains.registry import get_benchmark, get_domain
    from cm_gym.llm.cache import ResponseCache
    from cm_gym.llm.cached import CachedLLM
    from cm_gym.memory.construction import build_memory
    from cm_gym.memory.store import RecordStore

    spec = get_benchmark("SAT")  # SAT decisions often have several improving alternatives
    domain = get_domain(spec.domain_name)
    tasks = list(spec.load_tasks())[:100]  # about ten records; fewer tasks may build none
    lookup = {t.task_id: t for t in tasks}
    prefetched: list[str] = []
    real_prefetch = CachedLLM.prefetch

    def spy(self: CachedLLM, calls: Any) -> int:
        calls = list(calls)
        prefetched.extend(template for template, _ in calls)
        return real_prefetch(self, calls)

    monkeypatch.setattr(CachedLLM, "prefetch", spy)
    records = {}
    for name, cached in (("plain", False), ("prefetched", True)):
        llm: Any = SimulatedLLM(seed=0, task_lookup=lookup)
        if cached:
            llm = CachedLLM(llm, ResponseCache(tmp_path / "c.sqlite", "rw"), concurrency=4)
            assert prefetch_first_drafts(llm, domain, tasks, "react").calls == len(tasks)
        with RecordStore(tmp_path / f"{name}.sqlite", domain=domain.name, benchmark=spec.name) as store:
            build_memory(domain, tasks, store, llm, domain.make_evaluator())
            records[name] = [(r.record_id, r.situation, r.condition, r.a_plus, r.u) for r in store.records]
    assert records["prefetched"] == records["plain"] and records["plain"]
    assert "DISTIL_RECORD" in prefetched  # some decision had several improved alternatives
