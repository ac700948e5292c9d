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


@pytest.fixture(scope="module")
def evaluator() -> MathEvaluator:
    """A CPU-time budget of 3 s (issue 25: not Coq's wall-clock Timeout, a hang guard now): the
    runaway scripts end quickly, the rest is unaffected."""
    return make_evaluator(limits=dataclasses.replace(TEST_LIMITS, cpu_s=3.0))


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
