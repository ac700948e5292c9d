"""LLM-layer figures: exact cache replay over real HTTP, simulated-LLM throughput and its share of a
decision's time, and the simulated LLM's draft failure rates per task family.

    python bench/bench_llm_replay.py [--benchmark SQL] [--tasks 100] [--seed 0]

1. Replay: N tasks × (DRAFT_ACTION + REVISE_WITH_RECORD) = 2N calls through the `openai` client to
   the local `cm-gym serve-llm` server (the simulated LLM), via `CachedLLM` in "rw" mode on a fresh
   cache; then the same calls in "ro" mode. Prints HTTP requests, new tokens, identical text, both
   wall times and their ratio (target >= 20x).
2. Throughput: in-process simulated-LLM calls per second, and the share of one agent decision
   (draft -> evaluate) spent in the LLM.
3. Draft failure rate per family at decision 0, and after 1 / 2 failed attempts (ReAct, Reflexion).

Uses the SQL benchmark when it is registered, else the LLM tests' toy domain.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cm_gym.agent import BaseAgent, Cost, RecordView
from cm_gym.core.types import Action, AgentState, Attempt, Outcome, Task
from cm_gym.domains.base import Domain
from cm_gym.domains.registry import RegistryError, get_benchmark, get_domain
from cm_gym.llm.base import DRAFT_ACTION, LLM, Completion
from cm_gym.llm.cache import ResponseCache
from cm_gym.llm.cached import CachedLLM
from cm_gym.llm.openai_client import OpenAICompatibleLLM
from cm_gym.llm.prompts import render_record
from cm_gym.llm.server import serve_in_thread
from cm_gym.llm.simulated import SimulatedLLM


class Recorder:
    """Wraps an LLM; keeps every completion and the time spent inside it."""

    def __init__(self, inner: LLM) -> None:
        self.inner, self.name = inner, inner.name
        self.completions: list[Completion] = []
        self.seconds = 0.0

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        start = time.perf_counter()
        completion = self.inner.complete(template, fields)
        self.seconds += time.perf_counter() - start
        self.completions.append(completion)
        return completion


def load(benchmark: str | None, n_toy: int) -> tuple[str, list[Task], Domain]:
    """The benchmark's tasks and domain: SQL when available, else the LLM tests' toy domain."""
    for name in [benchmark] if benchmark else ["SQL"]:
        try:
            spec = get_benchmark(name)
        except RegistryError as exc:
            if benchmark:
                raise
            print(f"[note] {exc}; using the LLM tests' toy domain instead")
            break
        tasks = list(spec.load_tasks())
        return spec.name, tasks, get_domain(tasks[0].domain)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "llm"))
    from conftest import TOY_BENCHMARK, ensure_toy_registered, toy_tasks  # type: ignore[import-not-found]

    ensure_toy_registered()
    tasks = toy_tasks(n_toy)
    return TOY_BENCHMARK, tasks, get_domain(tasks[0].domain)


def records_for(tasks: list[Task], domain: Domain, sim: SimulatedLLM) -> list[RecordView]:
    """One plausible record per task: a draft and a local edit of it, taken from the previous task
    (as memory construction would produce after verification)."""
    views = []
    for i in range(len(tasks)):
        source = tasks[i - 1]
        a_minus = sim.draft_action(source)
        edits = [e.text for e in domain.edit_operators(source, a_minus) if e.text != a_minus]
        a_plus = edits[0] if edits else source.reference
        rendered = render_record(
            {
                "situation": "A query clause may need the change shown.",
                "a_minus": a_minus,
                "a_plus": a_plus,
                "evidence": {"score_minus": 0.0, "score_plus": 1.0},
                "condition": "",
            }
        )
        views.append(RecordView(f"bench-{i}", rendered, a_minus, a_plus))
    return views


def run_calls(
    llm: LLM, tasks: list[Task], domain: Domain, records: list[RecordView]
) -> tuple[Recorder, float]:
    """DRAFT_ACTION then REVISE_WITH_RECORD for every task through the agent loop's own calls."""
    recorder = Recorder(llm)
    agent = BaseAgent(recorder, domain, evaluator=None, kind="react")  # type: ignore[arg-type]
    start = time.perf_counter()
    for task, record in zip(tasks, records, strict=True):
        state = AgentState(task)
        draft = agent.draft(state, Cost())
        agent.revise(state, draft, record, Cost())
    return recorder, time.perf_counter() - start


def replay(tasks: list[Task], domain: Domain, seed: int) -> None:
    lookup = {t.task_id: t for t in tasks}
    server, base_url = serve_in_thread(
        SimulatedLLM(seed=seed, task_lookup=lookup), model_name="cm-gym-simulated"
    )
    records = records_for(tasks, domain, SimulatedLLM(seed=seed))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "responses.sqlite"

            def client() -> OpenAICompatibleLLM:
                return OpenAICompatibleLLM(base_url=base_url, model="cm-gym-simulated", seed=seed)

            rw = CachedLLM(client(), ResponseCache(path, "rw"))
            first, t_rw = run_calls(rw, tasks, domain, records)
            requests_rw = server.request_count
            rw.cache.close()
            ro = CachedLLM(client(), ResponseCache(path, "ro"))
            second, t_ro = run_calls(ro, tasks, domain, records)
            requests_ro = server.request_count - requests_rw
            stats = ro.cache.stats()
            ro.cache.close()
    finally:
        server.shutdown()
        server.server_close()
    n = len(first.completions)
    new_tokens = sum(c.total_tokens for c in second.completions if not c.cached)
    identical = [c.text for c in first.completions] == [c.text for c in second.completions]
    print(
        f"\n== replay: {n} calls ({len(tasks)} x DRAFT_ACTION + REVISE_WITH_RECORD) via openai client -> {base_url}"
    )
    print(
        f"pass 1 (rw, fresh cache): {t_rw * 1000:8.1f} ms  HTTP requests {requests_rw:4d}  tokens "
        f"{sum(c.total_tokens for c in first.completions)}"
    )
    print(
        f"pass 2 (ro, replay)     : {t_ro * 1000:8.1f} ms  HTTP requests {requests_ro:4d}  new tokens {new_tokens}  "
        f"tokens saved {stats['tokens_saved']}  hits {stats['hits']} misses {stats['misses']}"
    )
    print(f"identical text: {identical}   speed-up rw/ro: {t_rw / t_ro:.1f}x (target >= 20x)")
    assert requests_ro == 0 and new_tokens == 0 and identical, "replay was not exact"


def throughput(tasks: list[Task], domain: Domain, seed: int) -> None:
    """Calls/s and the LLM's share of a decision, cold (first draft of each task: the domain's
    error operators run) and warm (the simulator's draft memo hit, as in RL replays)."""
    print(f"\n== simulated LLM in-process ({len(tasks)} tasks)")
    sim = SimulatedLLM(seed=seed)
    fields = [{"task": t, "state": AgentState(t), "agent": "react"} for t in tasks]
    for label in ("cold", "warm"):
        start = time.perf_counter()
        for f in fields:
            sim.complete(DRAFT_ACTION, f)
        elapsed = time.perf_counter() - start
        print(
            f"DRAFT_ACTION {label}: {len(fields) / elapsed:9,.0f} calls/s ({elapsed / len(fields) * 1000:.3f} ms/call)"
        )
    evaluator = domain.make_evaluator()
    recorder = Recorder(SimulatedLLM(seed=seed + 1))
    agent = BaseAgent(recorder, domain, evaluator, kind="react")
    for label in ("cold", "warm"):
        recorder.seconds, recorder.completions = 0.0, []
        start = time.perf_counter()
        for task in tasks:
            agent.decide(AgentState(task))
        total = time.perf_counter() - start
        print(
            f"decision (draft -> evaluate) {label}: {total / len(tasks) * 1000:.2f} ms; LLM share "
            f"{recorder.seconds / total:.0%} ({recorder.seconds / len(recorder.completions) * 1000:.3f} ms per LLM call)"
        )


def failure_rates(tasks: list[Task], domain: Domain, seed: int) -> None:
    sim = SimulatedLLM(seed=seed)
    evaluator = domain.make_evaluator()
    failed = Outcome(score=0.0, solved=False, feedback="wrong")
    table: dict[str, list[list[int]]] = defaultdict(lambda: [[0, 0] for _ in range(5)])
    for task in tasks:
        row = table[task.family or "(none)"]
        for j, (agent, fails) in enumerate(
            [("react", 0), ("react", 1), ("react", 2), ("reflexion", 1), ("reflexion", 2)]
        ):
            state = AgentState(task)
            for _ in range(fails):
                state = state.with_attempt(Attempt("previous", failed))
            draft = domain.parse_action(
                sim.complete(DRAFT_ACTION, {"task": task, "state": state, "agent": agent}).text
            )
            outcome = evaluator.check(state, Action(draft))
            row[j][0] += int(not outcome.solved)
            row[j][1] += 1
    print(f"\n== simulated-LLM draft failure rate per family (seed {seed})")
    print(
        f"{'family':28s} {'n':>4s} {'d0':>6s} {'react+1':>8s} {'react+2':>8s} {'reflx+1':>8s} {'reflx+2':>8s}"
    )
    for family in sorted(table):
        row = table[family]
        rates = " ".join(f"{r[0] / r[1]:8.0%}" for r in row[1:])
        print(f"{family:28s} {row[0][1]:4d} {row[0][0] / row[0][1]:6.0%} {rates}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default=None)
    parser.add_argument("--tasks", type=int, default=100, help="tasks in the replay (2 calls each)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    name, tasks, domain = load(args.benchmark, args.tasks)
    print(f"benchmark {name}: {len(tasks)} tasks, domain {domain.name}")
    if len(tasks) < args.tasks:
        print(f"[note] only {len(tasks)} tasks: the replay makes {2 * len(tasks)} calls")
    sample = tasks[: args.tasks]
    replay(sample, domain, args.seed)
    throughput(tasks, domain, args.seed)
    failure_rates(tasks, domain, args.seed)


if __name__ == "__main__":
    main()
