"""The portfolio search: every candidate's tactics exist in Coq 8.16 (an unknown name would stop
the probe), a candidate that kills the probe is skipped and the probe resumes, accepted candidates
are verified for real, and a deterministic sample of the shipped proofs still checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.math import portfolio
from cm_gym.domains.math.evaluator import MathEvaluator
from cm_gym.domains.math.hostile import hostile_task
from cm_gym.domains.math.loader import load_minif2f_tasks
from cm_gym.domains.math.statement import statement_of

pytestmark = pytest.mark.coq


def test_every_candidate_runs_and_the_first_verified_one_is_the_reference(evaluator: MathEvaluator) -> None:
    task = hostile_task()
    result = portfolio.PortfolioSearch(evaluator, per_try_s=1).search(task, statement_of(task))
    assert result.tried == len(portfolio.CANDIDATES)
    assert result.proved and result.candidate == "lia" and "lia" in result.accepted
    assert evaluator.check(AgentState(task), Action(result.script)).solved


def test_a_candidate_that_stops_the_probe_is_skipped(
    evaluator: MathEvaluator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(portfolio, "CANDIDATES", (
        ("ring", "intros.\nring."),
        ("unknown", "intros.\nno_such_tactic_anywhere."),  # an error no tryif catches
        ("lia", "Require Import Lia.\nintros.\nlia."),
    ))  # fmt: skip
    monkeypatch.setattr(portfolio, "PROBE_LIBRARIES", ("Coq.micromega.Lia",))
    search = portfolio.PortfolioSearch(evaluator, per_try_s=1)
    ok, tried, error = search._probe(statement_of(hostile_task()))
    assert tried == {0, 1, 2} and 2 in ok and 1 not in ok
    assert "no_such_tactic_anywhere" in error


@pytest.mark.data
def test_a_sample_of_the_shipped_proofs_still_checks(shared_data: Path, evaluator: MathEvaluator) -> None:
    tasks = load_minif2f_tasks(shared_data)
    assert len(tasks) >= 20
    by_domain: dict[str, object] = {}
    for t in tasks:
        by_domain.setdefault(str(t.features["domain"]), t)
    for task in (by_domain["R"], by_domain["nat"]):  # the bench re-checks every one (--verify)
        o = evaluator.check(AgentState(task), Action(task.reference))  # type: ignore[arg-type]
        assert o.solved, (task.task_id, o.feedback)  # type: ignore[attr-defined]
