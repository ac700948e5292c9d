"""Rule-based edit operators: one decision unit per edit, on the AST, deterministic."""

from __future__ import annotations

import dataclasses

import pytest

from cm_gym.core.types import Task
from cm_gym.domains.sql import SQLDomain, sqlast
from cm_gym.domains.sql.contrast import infer_contrast
from cm_gym.domains.sql.edits import raw_edits

COLUMN_TYPES = {
    "orders.order_id": "number", "orders.customer_id": "number", "orders.product_id": "number",
    "orders.quantity": "number", "customers.customer_id": "number", "customers.name": "text",
    "customers.age": "number",
}  # fmt: skip
QUERY = (
    "SELECT DISTINCT T1.name FROM customers AS T1 JOIN orders AS T2 ON T1.customer_id = T2.customer_id "
    "WHERE T2.quantity >= 5 AND T1.age < 30 AND T2.product_id IS NULL ORDER BY T1.name DESC LIMIT 3"
)
UNIT_KIND = {"comparison": "cmp", "null": "null", "distinct": "distinct", "order": "order", "limit": "limit",
             "agg": "agg", "join_key": "join_key", "where": "where"}  # fmt: skip


def test_each_edit_parses_and_changes_exactly_one_unit() -> None:
    edits = raw_edits(QUERY, COLUMN_TYPES)
    kinds = {e.unit.split(":")[0] for e in edits}
    assert {"comparison", "null", "distinct", "order", "limit", "join_key", "where"} <= kinds
    base = sqlast.normalize(QUERY)
    for edit in edits:
        assert sqlast.normalize(edit.text) == edit.text  # same normal form as drafts
        assert edit.text != base
        change = infer_contrast(base, edit.text)  # re-derivable as ONE unit change from the base
        assert change is not None, edit
        assert change.kind == UNIT_KIND[edit.unit.split(":")[0]]
    assert len({e.text for e in edits}) == len(edits)


def test_specific_edits_are_present() -> None:
    texts = {e.text for e in raw_edits(QUERY, COLUMN_TYPES)}
    assert sqlast.normalize(QUERY.replace("T2.quantity >= 5", "T2.quantity > 5")) in texts
    assert sqlast.normalize(QUERY.replace("T1.age < 30", "T1.age <= 30")) in texts
    assert sqlast.normalize(QUERY.replace("SELECT DISTINCT", "SELECT")) in texts
    assert sqlast.normalize(QUERY.replace("DESC", "ASC")) in texts
    assert sqlast.normalize(QUERY.replace("LIMIT 3", "LIMIT 4")) in texts
    assert sqlast.normalize(QUERY.replace("LIMIT 3", "LIMIT 2")) in texts
    assert sqlast.normalize(QUERY.replace("IS NULL", "IS NOT NULL")) in texts
    assert (
        sqlast.normalize(QUERY.replace("= T2.customer_id", "= T2.order_id")) in texts
    )  # *_id of the same table
    assert sqlast.normalize(QUERY.replace("T2.quantity >= 5 AND ", "")) in texts  # one conjunct dropped


def test_order_is_deterministic_round_robin_with_comparisons_first() -> None:
    first = [e.unit for e in raw_edits(QUERY, COLUMN_TYPES)]
    assert first == [e.unit for e in raw_edits(QUERY, COLUMN_TYPES)]
    assert first[0] == "comparison:0"
    assert first.index("comparison:1") > first.index("null:0")  # round-robin over kinds
    assert len(set(u.split(":")[0] for u in first[:4])) == 4  # K = 4 slots cover four kinds


def test_aggregate_and_count_distinct_edits() -> None:
    units = {e.unit: e.text for e in raw_edits("SELECT COUNT(DISTINCT city), AVG(age), MAX(age) FROM people")}
    assert "SELECT COUNT(city), AVG(age), MAX(age) FROM people" in units.values()
    assert "SELECT COUNT(DISTINCT city), SUM(age), MAX(age) FROM people" in units.values()
    assert "SELECT COUNT(DISTINCT city), AVG(age), MIN(age) FROM people" in units.values()
    assert not raw_edits("SELECT COUNT(*) FROM people")  # nothing local to change


@pytest.mark.parametrize("text", ["", "hello world", "SELECT 1; SELECT 2", "SELECT FROM WHERE"])
def test_unparseable_actions_give_no_edits(text: str) -> None:
    assert raw_edits(text) == []


def test_domain_edit_operators_do_not_read_the_reference() -> None:
    domain = SQLDomain()
    task = Task("t", "sql", "q", "shop", "SELECT 1", features={"column_types": COLUMN_TYPES})
    blind = dataclasses.replace(task, reference="")
    edits = domain.edit_operators(task, QUERY)
    assert edits and edits == domain.edit_operators(blind, QUERY)
    assert all(e.unit and e.description for e in edits)


def test_decision_units_are_clauses() -> None:
    units = SQLDomain().decision_units(QUERY)
    assert any(u.startswith("WHERE") for u in units) and any("LIMIT 3" in u for u in units)
    assert SQLDomain().decision_units("not sql at all;;") == ["not sql at all;;"]


def test_parse_action_extracts_fenced_sql() -> None:
    reply = "Here you go:\n```sql\nSELECT name FROM people;\n```\nDone."
    assert SQLDomain().parse_action(reply) == "SELECT name FROM people"
