"""Issue 25: how each world model turns its budget and its hang guard into a verdict, without the
external tools (the runs are stubbed; the tools' own behaviour is tested in their domains): a
budget spent is the action's failure, a hang guard is "infrastructure" (retried once, never
cached), and every verdict names its budget."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.evaluators.budgets import INFRASTRUCTURE, budget_details, infrastructure, retry_once
from cm_gym.evaluators.sandbox import Limits, SandboxResult


def _run(**kw: Any) -> SandboxResult:
    base = dict(returncode=0, stdout="", stderr="", report=b"", timed_out=False, killed="", signal=0,
                wall_s=1.0, isolation="test", cpu_s=0.5)  # fmt: skip
    return SandboxResult(**{**base, **kw})


def test_retry_once_gives_a_second_chance_then_reports_infrastructure() -> None:
    calls: list[int] = []

    def flaky() -> Outcome:
        calls.append(1)
        return infrastructure("stopped") if len(calls) == 1 else Outcome(1.0, True, "ok")

    assert retry_once(flaky).solved and retry_once(flaky).details == {}  # second try's outcome
    stuck = retry_once(lambda: infrastructure("stopped", hang_guard_s=1.0))
    assert stuck.status == INFRASTRUCTURE and stuck.details["attempts"] == 2 and not stuck.completed
    assert budget_details("cpu-seconds", 10.0, 0.123456) == {
        "budget_kind": "cpu-seconds", "budget_limit": 10.0, "budget_used": 0.123
    }  # fmt: skip


class _Verifier:
    """A DafnyVerifier stand-in whose runs say what the test wants."""

    def __init__(self, output: str, **run: Any) -> None:
        self.output, self.run = output, run
        self.dafny, self.rlimit, self.time_limit = "/usr/bin/true", 1000, 600
        self.limits = Limits(wall_s=1800.0, cpu_s=1200.0)
        self.runs = 0

    def verify(self, text: str, **budget: Any) -> tuple[Any, SandboxResult]:
        from cm_gym.domains.dafny.verifier import parse_output

        self.runs += 1
        return parse_output(self.output), _run(**self.run)


PROGRAM = "method M() { }\n"
TASK = Task("dafny-stub", "dafny", "p", "stub", PROGRAM, meta={"program": PROGRAM})
OK = "Verifying Impl$$_module.__default.M ...\n  [0.1 s, 1 proof obligation]  {}\n\nDafny program verifier finished with 1 verified, 0 errors\n"


@pytest.mark.parametrize(
    ("output", "run", "status", "cached"),
    [
        (OK.format("verified"), {}, "ok", True),
        (OK.format("out of resource"), {}, "ok", True),  # the budget: a deterministic verdict
        (
            OK.format("timed out"),
            {"wall_s": 601.0},
            INFRASTRUCTURE,
            False,
        ),  # Boogie's /timeLimit: a hang guard
        # "timed out" sooner than Boogie's timer could fire: z3 killed at the CPU backstop, the
        # program's own failure in CPU time (cached)
        (OK.format("timed out"), {"wall_s": 61.0}, "budget", True),
        # issue 33: z3 killed at its CPU backstop under Boogie ("inconclusive"): the program's own
        # failure in CPU time, cached
        (OK.format("inconclusive"), {"cpu_s": 1201.0}, "budget", True),
        ("", {"timed_out": True, "killed": "timeout"}, INFRASTRUCTURE, False),  # the sandbox's wall clock
        ("", {"returncode": -signal.SIGXCPU, "signal": signal.SIGXCPU}, "budget", True),  # CPU time: cached
    ],
)
def test_dafny_verdicts_by_budget_and_hang_guard(output: str, run: dict, status: str, cached: bool) -> None:
    from cm_gym.domains.dafny.evaluator import DafnyEvaluator

    verifier = _Verifier(output, **run)
    evaluator = DafnyEvaluator(verifier=verifier, cache=None)  # type: ignore[arg-type]
    first = evaluator.check(AgentState(TASK), Action(PROGRAM))
    assert first.status == status and first.details["budget_kind"] == "boogie-rlimit", first.feedback
    assert verifier.runs == (2 if status == INFRASTRUCTURE else 1)  # retried once
    evaluator.check(AgentState(TASK), Action(PROGRAM))
    assert verifier.runs == (1 if cached else 2 * (2 if status == INFRASTRUCTURE else 1))


def test_coq_verdicts_by_cpu_budget_and_hang_guard() -> None:
    from cm_gym.domains.math.checker import CoqVerdict
    from cm_gym.domains.math.evaluator import MathEvaluator
    from cm_gym.domains.math.script import parse_script

    evaluator = MathEvaluator.__new__(MathEvaluator)
    evaluator.limits = Limits(wall_s=1200.0, cpu_s=60.0)
    evaluator.install = type("Install", (), {"short_version": "8.16"})()  # type: ignore[assignment]
    script = parse_script("intros.\nlia.\nauto.")
    # killed at its CPU budget while running sentence 3, two goals closed and one open: no partial
    # credit (issue 27), a budget verdict
    spent = evaluator._score(CoqVerdict("none", 3, "", (2, 1, 1)), script,
                             _run(returncode=-signal.SIGXCPU, signal=signal.SIGXCPU, cpu_s=60.0))  # fmt: skip
    assert spent.status == "budget" and spent.score == 0.0 and spent.details["budget_used"] == 60.0
    assert spent.details["budget_kind"] == "cpu-seconds" and "sentence 3" in spent.reason
    guard = evaluator._score(CoqVerdict("sentence", 2, "Timeout!", (2, 1)), script, _run())
    assert guard.status == INFRASTRUCTURE and guard.score == 0.0
    wall = evaluator._score(CoqVerdict("none", 1, "", (2,)), script, _run(timed_out=True, killed="timeout"))
    assert wall.status == INFRASTRUCTURE


def test_a_code_check_the_machine_starved_is_retried_then_infrastructure(tmp_path: Path) -> None:
    from cm_gym.domains.code.evaluator import CodeEvaluator
    from cm_gym.domains.code.hostile import hostile_task

    task = hostile_task()
    suite = {**task.meta["suite"], "per_test_timeout": 60.0, "hang_guard_s": 0.3}  # a guard far too small
    starved = Task(task.task_id, task.domain, task.prompt, task.env_id, task.reference,
                   meta={**task.meta, "suite": suite})  # fmt: skip
    spin = "import time\ndef add(a, b):\n    t = time.process_time()\n    while time.process_time() - t < 3:\n        pass\n    return a + b\n"
    evaluator = CodeEvaluator()
    outcome = evaluator.check(AgentState(starved), Action(spin))
    evaluator.close()
    assert outcome.status == INFRASTRUCTURE and outcome.details["attempts"] == 2 and not outcome.solved
    assert outcome.details["budget_kind"] == "cpu-seconds"


def test_z3_strategies_with_wall_clock_limits_inside_are_not_used() -> None:
    """z3's qflia / qfnia / qfnra strategies give up sub-strategies after so many milliseconds
    (``try_for``): refused in actions, and ``default`` on their logics is the SMT core."""
    from cm_gym.domains.smt.errors import SmtConfigRefused
    from cm_gym.domains.smt.solver import parse_config, run, wall_clock_logic

    for tactic in ("qflia", "qfnra", "(then simplify qfnia)"):
        with pytest.raises(SmtConfigRefused, match="wall-clock"):
            run(
                "(declare-fun x () Int)(assert (> x 0))",
                parse_config(f"logic: QF_LIA\ntactic: {tactic}\nrlimit: 1000"),
            )
    assert all(wall_clock_logic(name) for name in ("QF_NRA", "QF_NIA", "NRA", "QF_LIA", "auto"))
    assert not any(wall_clock_logic(name) for name in ("QF_LRA", "QF_BV"))
    body = "(declare-fun x () Real)(declare-fun y () Real)(assert (= (* x x y) 2.0))(assert (> y 1.0))"
    a, b = (run(body, parse_config("logic: QF_NRA\ntactic: default\nrlimit: 5000000")) for _ in range(2))
    assert a.verdict == b.verdict == "sat" and a.rlimit_used == b.rlimit_used
