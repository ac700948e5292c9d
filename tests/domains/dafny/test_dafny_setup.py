"""Dafny without the verifier: registration, task loading and one clear `ToolNotFoundError`; and
reading Dafny's ``/trace`` output (canned, no verifier needed)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest

from cm_gym.core.types import CmGymError, Task
from cm_gym.domains.dafny.domain import DafnyDomain
from cm_gym.domains.dafny.verifier import find_dafny, parse_output
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.evaluators.sandbox import ToolNotFoundError

TRACE = """Verifying CheckWellformed$$_module.__default.sorted ...
  [0.455 s, 7 proof obligations]  verified
Prover error: line 18 column 28: unknown parameter 'model_compress'
Legal parameters are:
  auto_config (bool) (default: true)
Verifying CheckWellformed$$_module.__default.BubbleSort ...
  [0.110 s, 8 proof obligations]  verified
Verifying Impl$$_module.__default.BubbleSort ...
  [0.132 s, 23 proof obligations]  errors
task.dfy(34,2): Error BP5003: A postcondition might not hold on this return path.
Verifying Impl$$_0_M.C.Slow__Method ...
  [30.0 s, 5 proof obligations]  timed out

Dafny program verifier finished with 2 verified, 1 error, 1 time out
"""


def test_trace_output_gives_per_member_verdicts() -> None:
    report = parse_output(TRACE)
    assert report.members == {"sorted": True, "BubbleSort": False, "M.C.Slow_Method": False}
    assert report.score == pytest.approx(1 / 3) and not report.solved
    assert report.timed_out_members == ("M.C.Slow_Method",)
    assert report.errors[0] == "line 34: A postcondition might not hold on this return path."


def test_parse_errors_and_missing_summary_score_zero() -> None:
    parsed = parse_output(
        "task.dfy(3,4): Error: invalid UnaryExpression\n1 parse errors detected in task.dfy\n"
    )
    assert parsed.parse_failed and parsed.score == 0.0 and not parsed.solved
    assert parse_output("Segmentation fault").score == 0.0
    clean = parse_output("Dafny program verifier finished with 0 verified, 0 errors\n")
    assert clean.solved and clean.score == 1.0


def test_missing_dafny_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CM_GYM_DAFNY", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolNotFoundError, match="apt-get install -y dafny") as info:
        find_dafny()
    assert isinstance(info.value, CmGymError)
    with pytest.raises(ToolNotFoundError):
        DafnyDomain().make_evaluator()
    monkeypatch.setenv("CM_GYM_DAFNY", str(tmp_path / "nope"))
    with pytest.raises(ToolNotFoundError, match="CM_GYM_DAFNY"):
        find_dafny()


def test_registration_does_not_need_the_verifier() -> None:
    spec = get_benchmark("Dafny")
    assert spec.env_id == "cm_gym/Dafny-v0" and "cm_gym/Dafny-v0" in gym.registry
    assert isinstance(get_domain("dafny"), DafnyDomain)


@pytest.mark.data
def test_tasks_load_without_the_verifier(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dafny_tasks: list[Task]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    tasks = get_benchmark("Dafny").load_tasks()
    assert len(tasks) == 436 == len(dafny_tasks)  # 445 pairs, 9 dropped (issue 25: see the loader)
    assert tasks[0].task_id == "dafny-0000" and len({t.task_id for t in tasks}) == 436
    assert sum(t.meta["hints_identical"] for t in tasks) == 81
    t = next(t for t in tasks if not t.meta["hints_identical"])
    assert t.meta["program"] in t.prompt and t.reference not in t.prompt
    assert all(t.env_id.startswith("dafny/") and t.family for t in tasks)
    assert 50 < len({t.env_id for t in tasks}) < 445  # projects group files


def test_an_implementation_out_of_its_rlimit_is_not_verified() -> None:
    """Issue 25: the budget is Boogie's /rlimit; spending it is a deterministic non-verification
    (either Boogie's "out of resource" or z3's "resource limit exceeded" before the next one)."""
    trace = (
        'Prover error: Invalid PING response from the prover: (error "line 3836 column 7: max. resource '
        'limit exceeded")\n\nVerifying CheckWellformed$$_module.__default.sorted ...\n'
        "  [0.799 s, 7 proof obligations]  errors\n"
        "Verifying Impl$$_module.__default.BinarySearch ...\n  [0.246 s, 25 proof obligations]  out of resource\n"
        "Verifying Impl$$_module.__default.Other ...\n  [0.1 s, 2 proof obligations]  verified\n\n"
        "Dafny program verifier finished with 1 verified, 0 errors\n"
    )
    report = parse_output(trace)
    assert report.members == {"sorted": False, "BinarySearch": False, "Other": True}
    assert report.out_of_resource_members == ("sorted", "BinarySearch") and not report.timed_out_members
    assert not report.solved and report.score == pytest.approx(1 / 3)


def test_a_time_out_shorter_than_boogies_timer_is_the_cpu_backstop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Boogie says "timed out" also when its z3 dies at the CPU backstop: in a run shorter than
    Boogie's wall-clock timer that is the program's failure ("budget"), past it the hang guard."""
    from cm_gym.core.types import Action, AgentState, Task
    from cm_gym.domains.dafny.evaluator import DafnyEvaluator
    from cm_gym.evaluators.sandbox import SandboxResult, ToolNotFoundError

    try:
        ev = DafnyEvaluator(cache=None, cpu_s=60)
    except ToolNotFoundError as exc:
        pytest.skip(f"dafny is not installed: {exc}")
    program = "method M() {}\n"
    task = Task("d-t", "dafny", "p", "dafny/t", program, meta={"program": program})
    for wall, status in ((61.0, "budget"), (ev.verifier.time_limit + 5.0, "infrastructure")):
        run = SandboxResult(0, TRACE, "", b"", False, "", 0, wall, "test")
        monkeypatch.setattr(ev.verifier, "verify", lambda text, run=run, **budget: (parse_output(TRACE), run))
        action = program + f"// {status}\n"  # one program per case: the first verdict is cached
        assert ev.check(AgentState(task), Action(action)).status == status
