"""Dafny 2.3 as the world model (needs `dafny`): ground truths verify, hints-removed programs fail
or verify as upstream says, refusals never reach the verifier. A sample here; all 445 in slow."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cm_gym.agent import BaseAgent
from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.dafny.domain import DafnyDomain
from cm_gym.domains.dafny.evaluator import DafnyEvaluator
from tests.domains.dafny.conftest import by_file

pytestmark = [pytest.mark.dafny, pytest.mark.data]


def test_ground_truth_verifies_and_hints_removed_fails(
    dafny_evaluator: DafnyEvaluator, dafny_tasks: list[Task]
) -> None:
    task = by_file(dafny_tasks, "CS494-final-project_tmp_tmp7nof55uq_bubblesort")
    state = AgentState(task)
    gt = dafny_evaluator.check(state, Action(task.reference))
    assert gt.solved and gt.score == 1.0 and gt.status == "ok"
    hr = dafny_evaluator.check(state, Action(task.meta["program"]))
    assert not hr.solved and hr.status == "ok" and hr.score == pytest.approx(2 / 3)
    assert "BubbleSort" in hr.feedback and "postcondition" in hr.feedback and len(hr.feedback) <= 800


def test_a_program_that_needs_no_hints_verifies_as_is(
    dafny_evaluator: DafnyEvaluator, dafny_tasks: list[Task]
) -> None:
    task = by_file(dafny_tasks, "Clover_abs")
    assert task.meta["hints_identical"]
    assert dafny_evaluator.check(AgentState(task), Action(task.meta["program"])).solved


def test_refusals_and_parse_errors(dafny_evaluator: DafnyEvaluator, dafny_tasks: list[Task]) -> None:
    task = by_file(dafny_tasks, "Clover_array_append")
    state = AgentState(task)
    calls_before = dafny_evaluator.calls
    cheat = task.reference.replace("    invariant 0 <= i <= a.Length\n", "    assume false;\n")
    refused = dafny_evaluator.check(state, Action(cheat))
    assert (
        refused.status == "error"
        and "forbidden" in refused.reason
        and dafny_evaluator.calls == calls_before + 1
    )
    broken = task.reference.replace("invariant 0 <= i <= a.Length", "invariant 0 <= i <=")
    parse = dafny_evaluator.check(state, Action(broken))
    assert parse.status == "error" and parse.score == 0.0 and "parse" in parse.feedback


def test_base_agent_over_dafny_tasks(dafny_evaluator: DafnyEvaluator, dafny_tasks: list[Task]) -> None:
    simulated = pytest.importorskip("cm_gym.llm.simulated")
    agent = BaseAgent(simulated.SimulatedLLM(seed=3), DafnyDomain(), dafny_evaluator)
    for name in ("Clover_array_append", "Clover_abs"):
        decision = agent.decide(AgentState(by_file(dafny_tasks, name)))
        assert 0.0 <= decision.outcome.score <= 1.0 and decision.outcome.status in ("ok", "error")


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_ground_truths_verify_and_hints_removed_as_upstream_on_a_sample(
    dafny_evaluator: DafnyEvaluator, dafny_tasks: list[Task], shared_data: Path
) -> None:
    """A deterministic sample of 32 DafnyBench pairs (every one: ``python
    bench/bench_load_independence.py --only Dafny``). Issue 25: the budget is Boogie's rlimit, not a
    wall-clock limit, and the action format accepts every served ground truth, so every one must
    verify in full, on any machine, however busy. The sample is drawn from the files whose rlimit
    cost `bench/bench_dafny_rlimit.py` measured (the first 99 in file order), less the costliest
    (`Session2Exercises_ExerciseExp`, minutes of z3): some unmeasured ground truths need many
    minutes of z3 under Dafny 2.3 (upstream chose them with Dafny 4), which CI cannot afford."""
    first = {p.name for p in sorted((shared_data / "dafny" / "ground_truth").glob("*.dfy"))[:99]}
    measured = [t for t in dafny_tasks if Path(t.meta["file"]).name in first]
    measured = [t for t in measured if "Session2Exercises_ExerciseExp" not in t.meta["file"]]
    dafny_tasks = measured[:: max(1, len(measured) // 32)][:32]

    def run(task: Task) -> tuple[Task, Outcome, Outcome | None]:
        state = AgentState(task)
        # a hint-free program that does not verify may spend its whole rlimit (minutes of z3): only
        # the pairs upstream needs no hints for are checked without annotations
        bare = (
            dafny_evaluator.check(state, Action(task.meta["program"]))
            if task.meta["hints_identical"]
            else None
        )
        return task, dafny_evaluator.check(state, Action(task.reference)), bare

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, dafny_tasks))
    failed = [(t.meta["file"], gt.status, gt.feedback[:200]) for t, gt, _ in results if not gt.solved]
    assert not failed, failed
    assert all(gt.details.get("budget_kind") == "boogie-rlimit" for _, gt, _ in results)
    # identical pairs (upstream: no hints needed) verify without annotations
    for t, _, hr in results:
        if hr is not None:
            assert hr.solved, (t.meta["file"], hr.feedback[:200])
