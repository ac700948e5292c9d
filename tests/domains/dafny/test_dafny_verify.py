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


#: ground truths measured to verify within 5 s of CPU (`bench/bench_dafny_rlimit.py`, every 3rd)
VERIFY_SAMPLE = (
    "630-dafny_tmp_tmpz2kokaiq_Solution.dfy",
    "CS5232_Project_tmp_tmpai_cfrng_test.dfy",
    "CVS-Projto1_tmp_tmpb1o0bu8z_fact.dfy",
    "Clover_abs.dfy",
    "Clover_array_product.dfy",
    "Clover_below_zero.dfy",
    "Clover_cal_sum.dfy",
    "Clover_count_lessthan.dfy",
    "Clover_has_close_elements.dfy",
    "Clover_is_palindrome.dfy",
    "Clover_match.dfy",
    "Clover_modify_2d_array.dfy",
    "Clover_remove_front.dfy",
    "Clover_reverse.dfy",
    "Clover_slope_search.dfy",
    "Clover_swap_in_array.dfy",
    "Clover_triple2.dfy",
    "Clover_two_sum.dfy",
    "Correctness_tmp_tmpwqvg5q_4_Sorting_Tangent.dfy",
    "Dafny-Exercises_tmp_tmpjm75muf__Session2Exercises_ExerciseSquare_root.dfy",
    "Dafny-Exercises_tmp_tmpjm75muf__Session4Exercises_ExerciseFirstNegative.dfy",
    "Dafny-Exercises_tmp_tmpjm75muf__Session6Exercises_ExerciseCountMin.dfy",
    "Dafny-Exercises_tmp_tmpjm75muf__Session7Exercises_ExerciseSeparate.dfy",
    "Dafny-experiences_tmp_tmp150sm9qy_dafny_started_tutorial_dafny_tutorial_array.dfy",
    "DafnyExercises_tmp_tmpd6qyevja_QuickExercises_testing2.dfy",
    "Dafny_Learning_Experience_tmp_tmpuxvcet_u_week1_7_MaxSum.dfy",
    "Dafny_Learning_Experience_tmp_tmpuxvcet_u_week8_12_week9_lemma.dfy",
    "Dafny_Programs_tmp_tmp99966ew4_trig.dfy",
    "Dafny_Verify_tmp_tmphq7j0row_AI_agent_verify_examples_DoubleArray.dfy",
    "Dafny_Verify_tmp_tmphq7j0row_Fine_Tune_Examples_50_examples_37.dfy",
    "Dafny_Verify_tmp_tmphq7j0row_Fine_Tune_Examples_50_examples_BinarySearch.dfy",
    "Dafny_Verify_tmp_tmphq7j0row_Fine_Tune_Examples_error_data_completion_11.dfy",
)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_ground_truths_verify_and_hints_removed_as_upstream_on_a_sample(
    dafny_evaluator: DafnyEvaluator, dafny_tasks: list[Task]
) -> None:
    """A fixed sample of 32 DafnyBench pairs (every one: ``python
    bench/bench_load_independence.py --only Dafny``). Issue 25: the budget is Boogie's rlimit, not a
    wall-clock limit, and the action format accepts every served ground truth, so every sampled one
    must verify in full, on any machine, however busy. The sample: the first 32 of every 3rd of the 117 ground
    truths that `bench/bench_dafny_rlimit.py` found to verify under Dafny 2.3 within 5 s of CPU (of
    the 124 it measured): some others need many minutes of z3, or do not verify under Dafny 2.3 at
    all (upstream chose them with Dafny 4), which CI cannot afford to rediscover."""
    wanted = set(VERIFY_SAMPLE)
    dafny_tasks = [t for t in dafny_tasks if Path(t.meta["file"]).name in wanted]
    assert len(dafny_tasks) == len(VERIFY_SAMPLE)

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
