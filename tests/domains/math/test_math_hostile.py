"""The hostile proof-script corpus: everything that touches files or the process, passes without a
proof, weakens checking or plays with time is refused before Coq runs; what Coq does run ends
within its limits without a proof; nothing is written outside the sandbox; the evaluator keeps
working."""

from __future__ import annotations

import dataclasses
import glob
import time

import pytest

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.math.evaluator import MathEvaluator
from cm_gym.domains.math.hostile import CORPUS, HostileScript, hostile_task
from tests.domains.math.conftest import TEST_LIMITS, make_evaluator

pytestmark = pytest.mark.coq
TASK = hostile_task()


#: the hostile corpus's CPU-time budget: this many times what the reference proof costs on this
#: machine now, and never under `BUDGET_FLOOR_S` (issue 25: a CPU-time budget, not Coq's wall-clock
#: Timeout). A fixed 3 s failed in CI: under memory pressure an ordinary ``lia`` proof (about 1 CPU-s
#: here) used it up, so the budget follows the measured cost, as Dafny's does.
BUDGET_FACTOR = 6.0
BUDGET_FLOOR_S = 3.0


def corpus_budget(reference_cpu_s: float) -> float:
    return max(BUDGET_FLOOR_S, round(BUDGET_FACTOR * reference_cpu_s, 1))


@pytest.fixture(scope="module")
def evaluator() -> MathEvaluator:
    """The runaway scripts end within a few times the reference's cost; the ordinary proofs the
    lexer tricks hide are unaffected, however busy the machine is."""
    probe = make_evaluator()
    used = probe.check(AgentState(TASK), Action(TASK.reference)).details["budget_used"]
    return make_evaluator(limits=dataclasses.replace(TEST_LIMITS, cpu_s=corpus_budget(used)))


def test_corpus_budget_follows_the_reference_cost() -> None:
    assert corpus_budget(0.0) == corpus_budget(0.5) == BUDGET_FLOOR_S
    assert corpus_budget(1.0) == 6.0 and corpus_budget(2.0) == 12.0


def test_corpus_is_large_and_uniquely_named() -> None:
    assert len(CORPUS) >= 50
    assert len({h.name for h in CORPUS}) == len(CORPUS)
    assert {h.expect for h in CORPUS} == {"refused", "contained", "harmless"}


@pytest.mark.parametrize("hostile", CORPUS, ids=lambda h: h.name)
def test_hostile_script_is_contained(evaluator: MathEvaluator, hostile: HostileScript) -> None:
    runs = evaluator.runs
    start = time.perf_counter()
    o = evaluator.check(AgentState(TASK), Action(hostile.script))
    seconds = time.perf_counter() - start
    assert o.feedback or o.reason
    assert seconds < TEST_LIMITS.wall_s + 10
    if hostile.expect == "refused":
        assert o.status in ("refused", "error") and o.score == 0.0 and not o.solved, o.feedback
        assert evaluator.runs == runs, "a refused script must never reach coqc"
    elif hostile.expect == "contained":
        assert not o.solved and o.score == 0.0 and o.status in ("ok", "budget", "error"), o.feedback
    else:
        assert o.status == "ok" and o.solved, o.feedback  # the trick hid nothing: an ordinary proof
    assert not glob.glob("/tmp/cm_pwn*")


def test_evaluator_still_proves_the_reference_after_the_corpus(evaluator: MathEvaluator) -> None:
    assert evaluator.check(AgentState(TASK), Action(TASK.reference)).solved
