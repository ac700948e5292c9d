"""CodeHumanEvalSynth: HumanEval as synthesis (prompt → program), judged by CodeHumanEval's tests
and judge; recorded completions are its drafts; its simulated slips and conditions."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.base import LoadReport
from cm_gym.domains.conditions import parse_condition
from cm_gym.domains.humaneval.synth import SLIP_PROBABILITY, HumanEvalSynthDomain, load_synth_tasks
from cm_gym.llm.recordings import load_recordings
from cm_gym.llm.simulated import SimulatedLLM

ROWS = [
    {"task_id": "T/0", "entry_point": "count_below",
     "prompt": 'def count_below(xs, k):\n    """Count values strictly less than k."""\n',
     "canonical_solution": "    n = 0\n    for i in range(len(xs)):\n        if xs[i] < k:\n            n += 1\n    return n\n",
     "test": "def check(candidate):\n    assert candidate([1, 2, 3], 2) == 1\n    assert candidate([5, 5], 5) == 0\n"
             "    assert candidate([0, 1, 2, 3, 4], 9) == 5\n"},
]  # fmt: skip


def test_a_synthesis_task_shows_the_prompt_and_judges_programs(tmp_path: Path) -> None:
    with gzip.open(tmp_path / "HumanEval.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(json.dumps(r) for r in ROWS) + "\n")
    (task,) = load_synth_tasks(root=tmp_path, report=LoadReport())
    row = ROWS[0]
    assert task.domain == "humaneval_synth" and task.task_id == "humaneval-synth-0"
    assert row["prompt"] in task.prompt and row["canonical_solution"] not in task.prompt
    assert task.reference == row["prompt"] + row["canonical_solution"]
    assert set(task.features["names"]) == {"count_below", "xs", "k"}  # the prompt's names only
    domain = HumanEvalSynthDomain()
    assert domain.recording_key(task) == "T/0"
    completion = "    return sum(1 for x in xs if x < k)\n"
    program = domain.recorded_reply(task, completion)
    assert program == row["prompt"] + completion
    ev = domain.make_evaluator()
    try:
        state = AgentState(task)
        assert ev.check(state, Action(domain.parse_action(program))).solved
        wrong = row["prompt"] + "    return sum(1 for x in xs if x <= k)\n"
        assert not ev.check(state, Action(wrong)).solved
        assert ev.check(state, Action(completion)).status == "error"  # a bare body is not a program
    finally:
        ev.close()
    # conditions read only what the task shows: a fix renaming a local variable is not conditioned on it
    minus = (
        row["prompt"]
        + "    n = 0\n    for i in range(len(xs)):\n        if xs[i] <= k:\n            n += 1\n    return n\n"
    )
    d = domain.distil(task, minus, task.reference)
    kinds = {p.split("(")[0] for p in d.condition.split(" AND ") if p}
    assert kinds <= {"mentions_any", "mentions_none", "he_names"} and "mentions_any" in kinds
    assert parse_condition(d.condition, {**domain.condition_predicates()}).holds(task)


@pytest.mark.data
def test_recorded_completions_are_judged_like_humanevals_own_check(shared_data: Path) -> None:
    """A sample of published GPT-4 / Reflexion completions (every 16th problem, plus HumanEval/133
    where upstream's flag and HumanEval's check disagree): solved iff ``check`` passed them."""
    tasks = {t.meta["problem"]: t for t in load_synth_tasks()}
    assert len(tasks) == 164
    rows = load_recordings("humaneval")
    domain = HumanEvalSynthDomain()
    ev = domain.make_evaluator()
    problems = [f"HumanEval/{n}" for n in range(0, 164, 16)] + ["HumanEval/133"]
    seen = set()
    try:
        for problem in problems:
            for system in ("gpt-4", "gpt-4-reflexion"):
                out = rows.get(problem, system)
                assert out is not None
                reply = domain.recorded_reply(tasks[problem], out.text)
                solved = ev.check(AgentState(tasks[problem]), Action(domain.parse_action(reply))).solved
                assert solved == (out.verdict == "pass"), (problem, system)
                seen.add(solved)
    finally:
        ev.close()
    assert seen == {True, False}


@pytest.mark.data
def test_simulated_slips_are_the_problems_vetted_bugs(shared_data: Path) -> None:
    tasks = load_synth_tasks()[:40]
    domain = HumanEvalSynthDomain()
    ops = domain.error_model().operators
    assert all(op.probability(t) in (0.0, SLIP_PROBABILITY) for op in ops for t in tasks)
    slipped = [t for t in tasks if t.meta["slips"]]
    assert len(slipped) >= 35
    task = slipped[0]
    family, bug = next(iter(task.meta["slips"].items()))
    op = next(o for o in ops if o.name == f"writes_{family}_bug")
    assert op.apply(task, task.reference, None) == bug  # the vetted bug, written into the solution
    sim = SimulatedLLM(seed=0)
    drafts = [sim.draft_action(t) for t in tasks]
    assert sum(d != t.reference for d, t in zip(drafts, tasks, strict=True)) >= 1
