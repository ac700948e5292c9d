"""Issue 33: a budget that bounds every Dafny action. A one-line hostile annotation (Fermat's last
theorem for cubes as a quantified assertion) ground z3's ``nlsat`` for 12 minutes at any
``/rlimit``. A task whose reference verifies without ``nlsat`` is now checked without it (z3 then
honours the rlimit) and every check's CPU backstop is a small multiple of its task's reference
(`reference_cpu_budget`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.dafny.evaluator import (
    CPU_FACTOR,
    CPU_FLOOR_S,
    MAX_CPU_S,
    CheckBudget,
    DafnyEvaluator,
    reference_cpu_budget,
)
from cm_gym.domains.dafny.hostile import FERMAT, FERMAT_TASK_FILE, with_fermat
from cm_gym.domains.dafny.verifier import NO_NLSAT, DafnyVerifier
from cm_gym.evaluators.budgets import infrastructure
from cm_gym.evaluators.sandbox import ToolNotFoundError
from tests.domains.dafny.conftest import by_file


def test_the_cpu_backstop_is_a_small_multiple_of_the_reference() -> None:
    assert reference_cpu_budget(0.0) == reference_cpu_budget(1.2) == CPU_FLOOR_S == 30.0
    assert reference_cpu_budget(3.5) == 60.0  # 10 × 3.5 s, rounded up to the 30 s grid
    assert reference_cpu_budget(4.0) == reference_cpu_budget(5.9) == 60.0  # jitter seldom moves it
    assert reference_cpu_budget(1e6) == MAX_CPU_S and CPU_FACTOR == 10.0


def test_z3_runs_without_nlsat_and_the_option_keys_the_verdict(tmp_path: Path) -> None:
    try:
        ev = DafnyEvaluator(cache=None)
    except ToolNotFoundError as exc:
        pytest.skip(f"dafny is not installed: {exc}")
    assert NO_NLSAT == ("smt.arith.nl.nra=false",) and ev.verifier.z3_options == ()
    assert "/z3opt:smt.arith.nl.nra=false" in ev.verifier.argv(z3_options=NO_NLSAT)
    assert not any("z3opt" in a for a in ev.verifier.argv())
    without = DafnyEvaluator(verifier=DafnyVerifier(z3_options=NO_NLSAT), cache=None)
    assert without._key("method M() {}\n") != ev._key("method M() {}\n")
    program = "method M() {}\n"
    assert ev._key(program, CheckBudget(60.0)) != ev._key(program, CheckBudget(120.0))
    assert ev._key(program, CheckBudget(60.0, z3_options=NO_NLSAT)) != ev._key(program, CheckBudget(60.0))
    # a given CPU backstop fixes the budget: no reference is measured
    fixed = DafnyEvaluator(cache=None, cpu_s=5)
    assert fixed.task_budget(program, program) == CheckBudget(5.0, "fixed") and fixed.runs == 0


def test_the_budget_comes_from_the_reference_and_a_hang_guard_stop_chooses_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reference is verified without nlsat first, with it when that fails; the CPU backstop is
    10 × its CPU seconds in the mode it verified in; a measurement the hang guard stopped (a busy
    machine) chooses no mode and is not remembered."""
    try:
        ev = DafnyEvaluator(cache=None)
    except ToolNotFoundError as exc:
        pytest.skip(f"dafny is not installed: {exc}")
    tried: list[tuple[str, ...]] = []

    def measure(program: str, text: str, budget: CheckBudget | None = None) -> Outcome:
        assert budget is not None and budget.cpu_s == MAX_CPU_S
        tried.append(budget.z3_options)
        if budget.z3_options == NO_NLSAT:  # this reference needs nlsat
            return Outcome(0.0, False, "budget", status="budget", details={"cpu_s": 64.0})
        return Outcome(1.0, True, "verified", details={"cpu_s": 4.9})

    monkeypatch.setattr(ev, "_check", measure)
    assert ev.task_budget("p", "ref") == CheckBudget(60.0, "reference", 4.9, ())
    assert ev.task_budget("p", "ref \n") == CheckBudget(60.0, "reference", 4.9, ())  # remembered
    assert tried == [NO_NLSAT, ()]
    assert ev._budget_for("ref", "ref", ev.task_budget("p", "ref")) == CheckBudget(MAX_CPU_S, "fixed")
    monkeypatch.setattr(ev, "_check", lambda program, text, budget=None: infrastructure("hang guard"))
    assert ev.task_budget("p", "other") == CheckBudget(ev.verifier.limits.cpu_s, "fixed")
    assert "other\n" not in ev._budgets  # measured again at the next check


def test_the_probe_is_the_reference_plus_one_assertion(dafny_tasks: list[Task]) -> None:
    task = by_file(dafny_tasks, FERMAT_TASK_FILE)
    action = with_fermat(str(task.reference))
    assert task.task_id == "dafny-0025" and action.count(FERMAT) == 1
    assert action.replace(FERMAT + "\n", "") == str(task.reference).rstrip() + "\n"


@pytest.mark.dafny
@pytest.mark.data
@pytest.mark.timeout(1800)
def test_the_fermat_probe_stops_within_its_budget(dafny_tasks: list[Task], tmp_path: Path) -> None:
    """The probe's check stops with status "budget" (the program's own failure, cached): the task's
    reference verifies without ``nlsat``, so z3 runs without it and stops at the rlimit (measured:
    about 62 s of CPU at the default 50M units) or first at the CPU backstop of max(30 s, 10 × the
    reference's CPU seconds) per verifier process. The CPU it used is bounded by the budget the
    evaluator reports (Boogie's mono process and its z3 each have that backstop), not the old
    1,200 s; the verdict is the same either way."""
    try:
        ev = DafnyEvaluator(cache=tmp_path / "v.sqlite")
    except ToolNotFoundError as exc:
        pytest.skip(f"dafny is not installed: {exc}")
    task = by_file(dafny_tasks, FERMAT_TASK_FILE)
    state = AgentState(task)
    out = ev.check(state, Action(with_fermat(str(task.reference))))
    d = out.details
    assert out.status == "budget" and not out.solved and out.score == 0.0, out.feedback
    assert d["budget_kind"] == "boogie-rlimit" and d["stopped_by"] in ("rlimit", "rlimit-or-cpu", "cpu")
    assert d["cpu_budget_kind"] == "reference" and d["reference_cpu_s"] > 0
    assert d["z3_options"] == list(NO_NLSAT)  # the reference needs no nlsat
    assert d["cpu_budget_s"] == reference_cpu_budget(d["reference_cpu_s"]) < MAX_CPU_S
    assert 0 < d["cpu_s"] <= 2 * d["cpu_budget_s"], d  # two processes, each under the backstop
    assert ev.runs == 2  # the reference (measured once), then the probe
    # the reference itself still verifies, from the cache of its measuring run
    assert ev.check(state, Action(str(task.reference))).solved and ev.runs == 2
    ev.close()
    again = DafnyEvaluator(cache=tmp_path / "v.sqlite")  # a budget stop is cached: paid for once
    hit = again.check(state, Action(with_fermat(str(task.reference))))
    assert again.runs == 0 and hit.status == "budget" and hit.details["cached"]
