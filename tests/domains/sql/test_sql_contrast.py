"""Contrast keys and the transfer of a record's a⁻ → a⁺ to a new draft (paper's age example)."""

from __future__ import annotations

import pytest

from cm_gym.core.types import Task
from cm_gym.domains.sql import SQLDomain

DOMAIN = SQLDomain()
BLIND = Task("new", "sql", "List employees earning at least 5000.", "hr", reference="")  # reference blanked
AGE_MINUS = "SELECT name FROM people WHERE age > 18"
AGE_PLUS = "SELECT name FROM people WHERE age >= 18"


def test_paper_age_example_transfers_to_another_column() -> None:
    draft = "SELECT name FROM employees WHERE salary > 5000"
    assert (
        DOMAIN.apply_contrast(BLIND, draft, AGE_MINUS, AGE_PLUS)
        == "SELECT name FROM employees WHERE salary >= 5000"
    )


def test_same_column_is_preferred_over_the_first_match() -> None:
    draft = "SELECT name FROM employees WHERE salary > 5000 AND age > 30"
    out = DOMAIN.apply_contrast(BLIND, draft, AGE_MINUS, AGE_PLUS)
    assert out == "SELECT name FROM employees WHERE salary > 5000 AND age >= 30"


@pytest.mark.parametrize(
    "draft",
    [
        "SELECT name FROM employees WHERE salary >= 5000",  # already inclusive: pattern absent
        "SELECT name FROM employees",
        "not even SQL",
    ],
)
def test_no_match_returns_none(draft: str) -> None:
    assert DOMAIN.apply_contrast(BLIND, draft, AGE_MINUS, AGE_PLUS) is None


@pytest.mark.parametrize(
    ("a_minus", "a_plus", "draft", "expected", "key"),
    [
        (
            "SELECT city FROM e",
            "SELECT DISTINCT city FROM e",
            "SELECT kind FROM pets",
            "SELECT DISTINCT kind FROM pets",
            "distinct:add",
        ),
        (
            "SELECT DISTINCT city FROM e",
            "SELECT city FROM e",
            "SELECT DISTINCT kind FROM pets",
            "SELECT kind FROM pets",
            "distinct:remove",
        ),
        (
            "SELECT COUNT(city) FROM e",
            "SELECT COUNT(DISTINCT city) FROM e",
            "SELECT COUNT(kind) FROM pets",
            "SELECT COUNT(DISTINCT kind) FROM pets",
            "distinct:add",
        ),
        (
            "SELECT a FROM t ORDER BY a ASC",
            "SELECT a FROM t ORDER BY a DESC",
            "SELECT b FROM u ORDER BY b, c DESC",
            "SELECT b FROM u ORDER BY b DESC, c DESC",
            "order:ASC->DESC",
        ),
        (
            "SELECT a FROM t ORDER BY a LIMIT 2",
            "SELECT a FROM t ORDER BY a LIMIT 3",
            "SELECT b FROM u ORDER BY b DESC LIMIT 5",
            "SELECT b FROM u ORDER BY b DESC LIMIT 6",
            "limit:+1",
        ),
        (
            "SELECT SUM(x) FROM t",
            "SELECT AVG(x) FROM t",
            "SELECT MAX(y), SUM(z) FROM u",
            "SELECT MAX(y), AVG(z) FROM u",
            "agg:SUM->AVG",
        ),
        (
            "SELECT a FROM t WHERE b IS NOT NULL",
            "SELECT a FROM t WHERE b IS NULL",
            "SELECT c FROM u WHERE d IS NOT NULL",
            "SELECT c FROM u WHERE d IS NULL",
            "null:IS NOT->IS",
        ),
        (
            "SELECT a FROM t WHERE b < 3",
            "SELECT a FROM t WHERE b <= 3",
            "SELECT c FROM u WHERE d < 9",
            "SELECT c FROM u WHERE d <= 9",
            "cmp:LT->LTE",
        ),
        (
            "SELECT T1.order_id, T2.name FROM orders AS T1 JOIN customers AS T2 ON T1.order_id = T2.customer_id",
            "SELECT T1.order_id, T2.name FROM orders AS T1 JOIN customers AS T2 ON T1.customer_id = T2.customer_id",
            "SELECT T1.order_id, T2.name FROM orders AS T1 JOIN products AS T2 ON T1.order_id = T2.product_id",
            "SELECT T1.order_id, T2.name FROM orders AS T1 JOIN products AS T2 ON T1.customer_id = T2.product_id",
            "join_key",
        ),
    ],
)
def test_contrast_kinds_transfer(a_minus: str, a_plus: str, draft: str, expected: str, key: str) -> None:
    assert DOMAIN.contrast_key(a_minus, a_plus) == key
    assert DOMAIN.apply_contrast(BLIND, draft, a_minus, a_plus) == expected


def test_join_key_contrast_in_a_multi_join() -> None:
    a_plus = (
        "SELECT COUNT(*) FROM student AS T1 JOIN has_pet AS T2 ON T1.stuid = T2.stuid "
        "JOIN pets AS T3 ON T2.petid = T3.petid"
    )
    a_minus = a_plus.replace("T1.stuid = T2.stuid", "T1.stuid = T2.petid")
    assert DOMAIN.contrast_key(a_minus, a_plus) == "join_key"
    draft = "SELECT T1.name FROM student AS T1 JOIN has_pet AS T2 ON T1.stuid = T2.petid"
    assert DOMAIN.apply_contrast(BLIND, draft, a_minus, a_plus) == (
        "SELECT T1.name FROM student AS T1 JOIN has_pet AS T2 ON T1.stuid = T2.stuid"
    )


def test_contrast_keys_are_canonical_and_invertible() -> None:
    assert DOMAIN.contrast_key(AGE_MINUS, AGE_PLUS) == "cmp:GT->GTE"
    assert DOMAIN.inverse_contrast_key(AGE_MINUS, AGE_PLUS) == "cmp:GTE->GT"
    # formatting differences do not matter: keys come from the AST
    assert (
        DOMAIN.contrast_key(
            "select name from people where age>18", "SELECT name\nFROM people WHERE age >= 18;"
        )
        == "cmp:GT->GTE"
    )
    assert DOMAIN.contrast_key("SELECT a FROM t LIMIT 3", "SELECT a FROM t LIMIT 2") == "limit:-1"
    assert (
        DOMAIN.contrast_key("SELECT a FROM t WHERE b = 1 AND c = 2", "SELECT a FROM t WHERE b = 1")
        == "where:drop"
    )


def test_multi_unit_contrast_falls_back_to_token_runs() -> None:
    a_minus, a_plus = "select name from people where age > 18", "SELECT id FROM people WHERE age >= 21"
    key = DOMAIN.contrast_key(a_minus, a_plus)
    assert "name -> id" in key and "select" not in key  # normal forms compared: no case noise
    out = DOMAIN.apply_contrast(BLIND, "SELECT name FROM people WHERE age > 18 AND x = 1", a_minus, a_plus)
    assert out is not None and "21" in out


def test_apply_contrast_never_reads_the_reference() -> None:
    draft = "SELECT name FROM employees WHERE salary > 5000"
    with_ref = Task("new", "sql", BLIND.prompt, "hr", reference="SELECT secret FROM x WHERE salary > 5000")
    assert DOMAIN.apply_contrast(with_ref, draft, AGE_MINUS, AGE_PLUS) == DOMAIN.apply_contrast(
        BLIND, draft, AGE_MINUS, AGE_PLUS
    )
