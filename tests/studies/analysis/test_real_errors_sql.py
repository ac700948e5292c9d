"""The SQL classifier of real wrong answers (`cm_gym.studies.analysis.real_errors_sql`) on hand-written
pairs of each kind and on real rows, and the profile slips that produce those kinds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cm_gym.core.types import Task
from cm_gym.domains.sql import errormodel_profiles as prof
from cm_gym.studies.analysis.real_errors import ErrorSample, Failure, distance, tv_distance
from cm_gym.studies.analysis.real_errors_sql import SQL_KINDS, classify_sql

GOLD = "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.singer_id WHERE T1.age > 30"

PAIRS = [  # (answer, gold, expected kinds, local)
    ("SELECT name, age FROM singer", "SELECT name FROM singer", ("column",), True),
    ("SELECT name FROM singer", "SELECT name, age FROM singer", ("column",), True),
    ("SELECT country FROM singer", "SELECT name FROM singer", ("column",), True),
    ("SELECT SUM(age) FROM singer", "SELECT AVG(age) FROM singer", ("aggregate",), True),
    ("SELECT DISTINCT name FROM singer", "SELECT name FROM singer", ("distinct",), True),
    ("SELECT COUNT(DISTINCT name) FROM singer", "SELECT COUNT(*) FROM singer", ("distinct",), True),
    (GOLD.replace("JOIN", "LEFT JOIN"), GOLD, ("join",), True),
    (GOLD.replace("T1.id = T2.singer_id", "T1.id = T2.id"), GOLD, ("join",), True),
    ("SELECT name FROM singer WHERE age > 30", GOLD, ("join",), True),
    (GOLD.replace("> 30", ">= 30"), GOLD, ("predicate",), True),
    (GOLD + " AND T2.year = 2014", GOLD, ("predicate",), True),
    (GOLD.replace("> 30", "> 40"), GOLD, ("literal",), True),
    ("SELECT name FROM t WHERE sex = 'female'", "SELECT name FROM t WHERE sex = 'F'", ("literal",), True),
    ("SELECT a, COUNT(*) FROM t GROUP BY b", "SELECT a, COUNT(*) FROM t GROUP BY a", ("grouping",), True),
    ("SELECT a FROM t GROUP BY a", "SELECT a FROM t GROUP BY a HAVING COUNT(*) > 1", ("grouping",), True),
    ("SELECT a FROM t GROUP BY a HAVING COUNT(*) >= 2", "SELECT a FROM t GROUP BY a HAVING COUNT(*) > 2",
     ("predicate",), True),
    ("SELECT name FROM t ORDER BY age DESC", "SELECT name FROM t ORDER BY age", ("ordering",), True),
    ("SELECT name FROM t ORDER BY age LIMIT 2", "SELECT name FROM t ORDER BY age LIMIT 1", ("limit",), True),
    ("SELECT a FROM t", "SELECT a FROM t INTERSECT SELECT a FROM u", ("set_operation",), False),
    ("SELECT a FROM t UNION SELECT a FROM u", "SELECT a FROM t INTERSECT SELECT a FROM u", ("set_operation",), False),
    ("SELECT a FROM t WHERE b = (SELECT MIN(b) FROM t)", "SELECT a FROM t ORDER BY b LIMIT 1", None, False),
    ("SELEC name FROM", "SELECT name FROM singer", ("does_not_run",), False),
    ("SELECT s.Name AS n FROM Singer s", "select name from singer", ("no_structural_diff",), False),
]  # fmt: skip


@pytest.mark.parametrize("answer,gold,kinds,local", PAIRS)
def test_each_kind_on_hand_written_pairs(answer: str, gold: str, kinds: tuple | None, local: bool) -> None:
    diff = classify_sql(answer, gold)
    if kinds is None:  # a subquery for ORDER BY … LIMIT 1: nesting among others, never local
        assert "nesting" in diff.kinds and {"ordering", "limit"} <= set(diff.kinds)
    else:
        assert diff.kinds == kinds, diff.details
    assert diff.local is local
    assert set(diff.kinds) <= set(SQL_KINDS)


def test_several_kinds_at_once_and_a_run_failure() -> None:
    diff = classify_sql(
        "SELECT name, age FROM singer ORDER BY age DESC", "SELECT name FROM singer ORDER BY age"
    )
    assert diff.kinds == ("column", "ordering") and not diff.local
    assert "column:extra" in diff.subkinds
    failed = classify_sql("SELECT nme FROM singer", "SELECT name FROM singer", runs=False)
    assert failed.kinds == ("column", "does_not_run")
    with pytest.raises(ValueError, match="gold"):
        classify_sql("SELECT 1", "not sql at all (")


def test_distance_is_total_variation_over_spread_kinds() -> None:
    real = ErrorSample("sql", "real", SQL_KINDS, n_tasks=10, n_solved=8,
                       failures=[Failure("a", ("column",), True), Failure("b", ("column", "join"), False)])  # fmt: skip
    assert real.mass()["column"] == 1.5 and real.mass()["join"] == 0.5
    sim = ErrorSample(
        "sql", "sim", SQL_KINDS, n_tasks=10, n_solved=9, failures=[Failure("c", ("limit",), True)]
    )
    d = distance(real, sim)
    assert d.tv == pytest.approx(1.0) and d.none_gap == pytest.approx(10.0)
    assert tv_distance({"a": 0.5, "b": 0.5}, {"a": 0.5, "b": 0.5}) == 0.0


def _task(reference: str, **features: object) -> Task:
    types = {"singer.name": "text", "singer.age": "number", "singer.country": "text", "singer.id": "number",
             "concert.singer_id": "number", "concert.year": "number", "concert.name": "text"}  # fmt: skip
    return Task("t", "sql", "q", "db", reference, features={"column_types": types, **features})


@pytest.mark.parametrize(
    "slip,reference,kind",
    [
        ("extra_column", "SELECT name FROM singer ORDER BY age", "column"),
        ("missing_column", "SELECT name, age FROM singer", "column"),
        ("wrong_column", "SELECT name FROM singer", "column"),
        ("wrong_literal", "SELECT name FROM singer WHERE country = 'france'", "literal"),
        ("drop_predicate", "SELECT name FROM singer WHERE age > 3 AND country = 'x'", "predicate"),
        ("left_join", GOLD, "join"),
        (
            "drop_join",
            "SELECT T2.singer_id FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.singer_id",
            "join",
        ),
        ("wrong_group", "SELECT country, name, COUNT(*) FROM singer GROUP BY country", "grouping"),
        ("drop_set_branch", "SELECT name FROM singer EXCEPT SELECT name FROM concert", "set_operation"),
        ("subquery_for_order", "SELECT name FROM singer ORDER BY age LIMIT 1", "nesting"),
        ("unknown_column", "SELECT name FROM singer", "column"),
    ],
)
def test_each_added_slip_makes_its_kind(slip: str, reference: str, kind: str) -> None:
    task = _task(reference)
    gate, apply = prof.ADDED[slip]
    assert prof.gate(slip, task) == 1.0
    out = apply(task, reference, np.random.default_rng(0))
    assert out is not None and out != reference
    assert kind in classify_sql(out, reference).kinds
    assert prof.TARGETS[slip].split(":")[0] in classify_sql(out, reference).kinds or slip == "unknown_column"


def test_profile_model_refuses_unknown_slips_and_keeps_default_gates() -> None:
    with pytest.raises(ValueError, match="unknown SQL slip"):
        prof.profile_error_model({"rates": {"not_a_slip": 0.5}})
    model = prof.profile_error_model({"rates": {"reversed_order": 0.7, "extra_column": 0.2}})
    by_name = {op.name: op for op in model.operators}
    asc = _task("SELECT name FROM singer ORDER BY age", has_order=True, order_wording="asc")
    desc = _task("SELECT name FROM singer ORDER BY age", has_order=True, order_wording="desc")
    assert by_name["reversed_order"].probability(asc) == pytest.approx(
        0.7
    )  # the wording cue keeps its weight
    assert by_name["reversed_order"].probability(desc) == pytest.approx(0.7 * 0.1 / 0.35)
    assert by_name["extra_column"].probability(asc) == pytest.approx(0.2)
    assert by_name["limit_off_by_one"].probability(asc) == 0.0  # left out of the profile: never fires


@pytest.mark.data
def test_real_rows_are_classified(shared_data: Path) -> None:
    from cm_gym.llm.recordings import load_recordings, spider_key

    rows = load_recordings("spider")
    key = spider_key(
        "concert_singer", "What is the average, minimum, and maximum age of all singers from France?"
    )
    assert rows.get(key, "gpt-4-zero-shot") is not None
    wrong = [r for r in rows.for_system("gpt-4-zero-shot").values() if r.verdict != "correct"][:40]
    kinds = [classify_sql(r.text, r.gold or "", runs=r.verdict != "error") for r in wrong]
    assert all(k.kinds and set(k.kinds) <= set(SQL_KINDS) for k in kinds)
    assert sum("does_not_run" in k.kinds for k in kinds) == sum(r.verdict == "error" for r in wrong)
    assert len({k for d in kinds for k in d.kinds}) >= 6  # real mistakes come in many kinds
