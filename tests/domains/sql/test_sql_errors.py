"""The simulated-LLM SQL error model: feature-dependent, systematic, tunable slips."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.sql import SQLDomain, sqlast
from cm_gym.domains.sql.errormodel import SQLErrorRates, error_model


def _task(prompt: str, reference: str, **features: object) -> Task:
    from cm_gym.domains.sql.features import query_features, question_features

    feats = {**question_features(prompt), **query_features(reference, {}), **features}
    return Task("t", "sql", prompt, "db", reference, features=feats)


def _ops() -> dict:
    return {op.name: op for op in SQLDomain().error_model().operators}


def test_probabilities_depend_on_wording() -> None:
    ops = _ops()
    inclusive = _task("List people aged 18 or older.", "SELECT name FROM people WHERE age >= 18")
    strict = _task("List people older than 18.", "SELECT name FROM people WHERE age > 18")
    plain = _task("List all people.", "SELECT name FROM people")
    assert ops["inclusive_to_strict"].probability(inclusive) == 0.6
    assert ops["inclusive_to_strict"].probability(strict) == 0.0
    assert ops["strict_to_inclusive"].probability(strict) == 0.15
    assert all(op.probability(plain) == 0.0 for op in ops.values())
    distinct = _task("List the distinct cities.", "SELECT DISTINCT city FROM people")
    assert ops["missing_distinct"].probability(distinct) == 0.5
    asc = _task("List names, youngest first.", "SELECT name FROM people ORDER BY age ASC")
    desc = _task("List names, oldest first.", "SELECT name FROM people ORDER BY age DESC")
    assert ops["reversed_order"].probability(asc) > ops["reversed_order"].probability(desc) > 0


def test_slips_apply_on_the_ast_and_return_none_when_they_do_not_fit() -> None:
    ops = _ops()
    rng = np.random.default_rng(0)
    inclusive = _task("List people aged 18 or older.", "SELECT name FROM people WHERE age >= 18")
    assert (
        ops["inclusive_to_strict"].apply(inclusive, inclusive.reference, rng)
        == "SELECT name FROM people WHERE age > 18"
    )
    assert ops["inclusive_to_strict"].apply(inclusive, "SELECT name FROM people", rng) is None
    upper = _task("List people aged at most 30.", "SELECT name FROM people WHERE age <= 30 AND id >= 2")
    assert (
        ops["inclusive_to_strict"].apply(upper, upper.reference, rng)
        == "SELECT name FROM people WHERE age < 30 AND id >= 2"
    )
    topk = _task("the 3 oldest people", "SELECT name FROM people ORDER BY age DESC LIMIT 3")
    assert ops["limit_off_by_one"].apply(topk, topk.reference, rng).endswith("LIMIT 2")
    assert (
        ops["reversed_order"].apply(topk, topk.reference, rng)
        == "SELECT name FROM people ORDER BY age ASC LIMIT 3"
    )
    null = _task("people without a boss", "SELECT name FROM people WHERE boss_id IS NULL")
    assert (
        ops["null_mishandling"].apply(null, null.reference, rng)
        == "SELECT name FROM people WHERE boss_id IS NOT NULL"
    )
    agg = _task("average age", "SELECT AVG(age) FROM people")
    assert ops["wrong_aggregate"].apply(agg, agg.reference, rng) == "SELECT SUM(age) FROM people"


def test_slips_never_read_the_reference() -> None:
    rng = np.random.default_rng(0)
    task = _task(
        "List the distinct cities of people aged 18 or older.",
        "SELECT DISTINCT city FROM people WHERE age >= 18",
    )
    blind = dataclasses.replace(task, reference="")
    for op in SQLDomain().error_model().operators:
        assert op.probability(task) == op.probability(blind)
        assert op.apply(task, task.reference, rng) == op.apply(blind, task.reference, rng)


def test_rates_are_tunable() -> None:
    task = _task("List people aged 18 or older.", "SELECT name FROM people WHERE age >= 18")
    never = error_model(SQLErrorRates(inclusive_to_strict=0.0))
    always = error_model(SQLErrorRates(inclusive_to_strict=1.0, fix_react=0.9))
    assert next(o for o in never.operators if o.name == "inclusive_to_strict").probability(task) == 0.0
    assert next(o for o in always.operators if o.name == "inclusive_to_strict").probability(task) == 1.0
    assert always.fix_prob["react"] == 0.9 and always.fix_prob["reflexion"] == SQLErrorRates().fix_reflexion
    assert 0 < always.revision.apply < 1


def _draft(task: Task, rng: np.random.Generator) -> tuple[str, list[str]]:
    action, names = task.reference, []
    for op in SQLDomain().error_model().operators:
        p = op.probability(task)
        if p > 0 and rng.random() < p:
            out = op.apply(task, action, rng)
            if out is not None:
                action, names = out, names + [op.name]
    return action, names


def test_errors_are_systematic_on_the_generated_benchmark(gen_tasks: list[Task]) -> None:
    rng = np.random.default_rng(0)
    evaluator = SQLDomain().make_evaluator()
    slipped: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    failed = 0
    for task in gen_tasks:
        draft, names = _draft(task, rng)
        assert draft == task.reference or sqlast.normalize(draft) == draft  # normal form
        group = f"{task.family}/{task.meta['variant']}"
        seen[group] += 1
        slipped[group] += "inclusive_to_strict" in names or "strict_to_inclusive" in names
        outcome = evaluator.check(AgentState(task), Action(draft))
        failed += not outcome.solved
        if draft == task.reference:
            assert outcome.solved
    inclusive = slipped["boundary_lower/inclusive"] / seen["boundary_lower/inclusive"]
    strict = slipped["boundary_lower/strict"] / seen["boundary_lower/strict"]
    assert 0.45 <= inclusive <= 0.75  # p = 0.6 on every inclusive-wording task
    assert 0.03 <= strict <= 0.3  # p = 0.15 on every strict-wording task
    assert 0.2 <= failed / len(gen_tasks) <= 0.6  # drafts fail often, not always
