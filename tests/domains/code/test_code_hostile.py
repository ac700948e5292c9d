"""The hostile-patch corpus: each patch is contained and reported as a failed check with a reason;
nothing escapes (canaries, host /tmp, network, processes) and the evaluator keeps working."""

from __future__ import annotations

import os

import pytest

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.code.evaluator import CodeEvaluator
from cm_gym.domains.code.hostile import CORPUS, HostilePatch, hostile_task
from cm_gym.domains.code.hostile_check import available_layers, check_patch
from cm_gym.domains.code.hostile_forgery import FORGERY
from cm_gym.evaluators.sandbox import Limits

LIMITS = Limits(wall_s=4.0, cpu_s=4.0, memory_mb=256, max_procs=16, max_file_mb=4)
#: patches that run into a timeout (about a second each): still in the default run
SLOWISH = {"infinite_loop", "infinite_loop_at_import", "sleep_past_timeout", "memory_growth", "c_stack_overflow",
           "ignore_signals", "huge_result"}  # fmt: skip


@pytest.fixture(scope="module")
def evaluator() -> CodeEvaluator:
    return CodeEvaluator(limits=LIMITS)


def test_corpus_is_large_and_uniquely_named() -> None:
    assert len(CORPUS) >= 30
    assert len({p.name for p in CORPUS}) == len(CORPUS)
    assert {p.name for p in CORPUS} >= SLOWISH


@pytest.mark.timeout(180)  # each check is bounded by CPU budgets and wall-clock hang guards
@pytest.mark.parametrize("patch", CORPUS + FORGERY, ids=lambda p: p.name)
def test_hostile_patch_is_contained(evaluator: CodeEvaluator, patch: HostilePatch) -> None:
    missing = set(patch.needs) - available_layers(evaluator.sandbox.isolation)
    if missing:
        msg = f"{patch.name} needs isolation {sorted(missing)}, not available here ({evaluator.sandbox.isolation})"
        if os.environ.get("CI") and os.geteuid() == 0:
            pytest.fail(msg)
        pytest.skip(msg)
    result = check_patch(evaluator, patch)  # never raises: no input may crash the evaluator
    if result.skipped:
        pytest.skip(result.skipped)
    assert result.outcome is not None
    assert result.contained, f"{patch.name}: {result.violations} ({result.outcome.feedback})"
    assert not result.outcome.solved and result.outcome.score < 1.0
    assert result.outcome.feedback or result.outcome.reason


def test_evaluator_still_works_after_the_corpus(evaluator: CodeEvaluator) -> None:
    task = hostile_task()
    assert evaluator.check(AgentState(task), Action(task.reference)).solved
