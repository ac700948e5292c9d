"""SQL condition predicates and rule-based distillation (true on the source, false on look-alikes)."""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict

import pytest

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.sql import SQLDomain, conditions
from cm_gym.domains.sql.edits import raw_edits

DOMAIN = SQLDomain()
PRED = DOMAIN.condition_predicates()
GENERIC = {
    "mentions_any",
    "mentions_none",
    "same_env",
    "different_env",
    "feature_equals",
    "feature_in",
    "family_is",
}
SCHEMA = "Database: club\nTables:\n  people(id INTEGER PK, name TEXT, age INTEGER, joined DATE)\nForeign keys: none"


def _t(prompt: str, reference: str = "SELECT 1", env: str = "club") -> Task:
    return Task("t-" + str(abs(hash(prompt)) % 1000), "sql", prompt, env, reference, context=SCHEMA)


@pytest.mark.parametrize(
    ("prompt", "inclusive", "strict"),
    [
        ("List people aged 18 or older.", True, False),
        ("Which people are at least 18?", True, False),
        ("Which cities have no fewer than 3 people?", True, False),
        ("Which people are older than 18?", False, True),
        ("List people strictly above 18.", False, True),
        ("List people aged over 18.", False, True),
        ("Which teams have no more than 5 players?", True, False),  # inclusive upper bound
        ("List people who joined on or after 2020-01-01.", True, False),
        ("List people who joined after 2020-01-01.", False, True),
        ("List all people.", False, False),
    ],
)
def test_boundary_wording_predicates(prompt: str, inclusive: bool, strict: bool) -> None:
    task = _t(prompt)
    assert PRED["sql_inclusive_wording"](task, ()) is inclusive
    assert PRED["sql_strict_wording"](task, ()) is strict


def test_side_specific_and_other_predicates() -> None:
    assert PRED["sql_inclusive_wording"](_t("at most 5 players"), ("upper",))
    assert not PRED["sql_inclusive_wording"](_t("at most 5 players"), ("lower",))
    assert PRED["sql_strict_wording"](_t("fewer than 5 players"), ("upper",))
    assert PRED["sql_mentions_unique"](_t("List the distinct cities."), ())
    assert not PRED["sql_mentions_unique"](_t("List the city of every person, with repeats."), ())
    assert PRED["sql_mentions_repeats"](_t("List the city of every person, with repeats."), ())
    assert PRED["sql_order_wording"](_t("names from highest to lowest salary"), ("desc",))
    assert PRED["sql_order_wording"](_t("the 3 youngest people"), ("asc",))
    assert PRED["sql_asks_top_k"](_t("the top 3 people by age"), ())
    assert PRED["sql_agg_wording"](_t("What is the average age?"), ("avg",))
    assert PRED["sql_null_wording"](_t("people without a manager"), ("null",))
    assert PRED["sql_null_wording"](_t("people who have a manager"), ("not_null",))
    assert PRED["sql_mentions_number"](_t("aged 18"), ()) and not PRED["sql_mentions_number"](
        _t("all people"), ()
    )
    assert PRED["sql_has_numeric_column"](_t("q"), ("age",)) and not PRED["sql_has_numeric_column"](
        _t("q"), ("name",)
    )
    assert PRED["sql_has_column_type"](_t("q"), ("time",))
    assert PRED["sql_has_column"](_t("q"), ("people", "age")) and PRED["sql_has_column"](
        _t("q"), ("people.name",)
    )
    assert not PRED["sql_has_column"](_t("q"), ("people", "salary"))
    assert PRED["sql_has_table"](_t("q"), ("people",))
    assert PRED["sql_same_db"](_t("q"), ("club",)) and not PRED["sql_same_db"](_t("q"), ("shop",))


def test_predicates_do_not_read_the_reference() -> None:
    task = _t(
        "List people aged 18 or older.", reference="SELECT name FROM people WHERE age > 18 ORDER BY age DESC"
    )
    blind = dataclasses.replace(task, reference="")
    for kind, fn in PRED.items():
        for args in ((), ("lower",), ("desc",), ("age",), ("people", "age"), ("club",)):
            assert fn(task, args) == fn(blind, args), kind


def _kinds(condition: str) -> set[str]:
    return {kind for kind, _ in conditions.parse(condition)}


def test_paper_example_distils_a_condition_false_on_the_strict_lookalike() -> None:
    source = _t("List the names of people who are at least 18 years old.")
    lookalike = _t("List the names of people who are more than 18 years old.")
    other_surface = _t("Which people are aged 21 or older? Give their names.")
    dist = DOMAIN.distil(
        source, "SELECT name FROM people WHERE age > 18", "SELECT name FROM people WHERE age >= 18"
    )
    assert "`age > 18`" in dist.situation and "at least" in dist.situation
    parts = conditions.parse(dist.condition)
    assert _kinds(dist.condition) <= GENERIC | set(PRED)
    assert "mentions_any" in _kinds(dist.condition) and "mentions_none" in _kinds(dist.condition)
    assert re.fullmatch(r'(\w+\((("[^"]*")(, )?)*\))( AND \w+\((("[^"]*")(, )?)*\))*', dist.condition)
    assert conditions.holds(source, parts)
    assert not conditions.holds(lookalike, parts)
    assert conditions.holds(other_surface, parts)  # same error, new surface


def test_unrecognised_contrast_distils_to_same_db() -> None:
    dist = DOMAIN.distil(_t("q"), "SELECT name FROM people", "SELECT id, age FROM people WHERE age > 3")
    assert dist.condition == 'sql_same_db("club")'


def test_distilled_conditions_separate_generated_lookalike_pairs(gen_tasks: list[Task]) -> None:
    """For every look-alike pair, the record that fixes the family's slip on one task carries a
    condition that holds there and fails on its look-alike (where applying it would be wrong)."""
    main_kind = {"boundary": "comparison", "group_having": "comparison", "distinct": "distinct",
                 "count_distinct": "distinct", "aggregate": "agg", "null_check": "null", "order": "order",
                 "topk": "order", "join_key": "join_key"}  # fmt: skip
    evaluator = DOMAIN.make_evaluator()
    pairs: dict[str, list[Task]] = defaultdict(list)
    for task in gen_tasks:
        if task.meta["pair"]:
            pairs[task.meta["pair"]].append(task)
    separated: dict[str, list[bool]] = defaultdict(list)
    per_family: dict[str, int] = defaultdict(int)
    for a, b in pairs.values():
        per_family[a.family] += 1
        if per_family[a.family] > 15:  # 15 pairs per family keep the test fast
            continue
        for source, other in ((a, b), (b, a)):
            fam = "boundary" if source.family.startswith("boundary") else source.family
            if fam not in main_kind:
                continue
            unit = main_kind[fam] + ":0"
            edit = next(
                (e for e in raw_edits(source.reference, source.features["column_types"]) if e.unit == unit),
                None,
            )
            if edit is None or evaluator.check(AgentState(source), Action(edit.text)).solved:
                continue
            dist = DOMAIN.distil(source, edit.text, source.reference)
            parts = conditions.parse(dist.condition)
            assert conditions.holds(source, parts), (source.prompt, dist.condition)
            separated[fam].append(not conditions.holds(other, parts))
    for fam, flags in separated.items():
        rate = sum(flags) / len(flags)
        assert rate >= (0.75 if fam == "join_key" else 1.0), (fam, rate)
    assert {"boundary", "distinct", "aggregate", "null_check", "order", "join_key"} <= set(separated)


def test_wording_shortcuts_answer_as_the_phrase_by_phrase_definitions() -> None:
    """`mentions_any` lowers the text once, `_blank` sorts a phrase set once, the bound-free text
    and top-k answer are memoised: the same answers as `mentions` phrase by phrase, on mixed-case
    and non-ASCII texts (``"İ".lower()`` is two characters), asked twice."""
    import random

    from cm_gym.domains.sql import wording

    rng = random.Random(35)
    words = [
        "At",
        "least",
        "MOST",
        "top",
        "3",
        "İstanbul",
        "first",
        "no",
        "more",
        "than",
        "ß",
        "after",
        "the",
    ]
    phrases = ["at least", "no more than", "most", "top 3", "istanbul", "i̇stanbul", "STRASSE", "after the"]
    for _ in range(400):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
        chosen = rng.sample(phrases, rng.randint(0, 4))
        assert wording.mentions_any(text, chosen) == any(wording.mentions(text, p) for p in chosen)
        expected = wording._blank(text.lower(), wording.LOWER_INCLUSIVE + wording.UPPER_INCLUSIVE)[0]
        assert wording._without_bounds(text) == expected == wording._without_bounds(text)
        assert wording.asks_top_k(text) == (wording._TOP_K.search(expected) is not None)
    same_length = ("ab", "cd", "abc")
    assert wording._longest_first(same_length) == ("abc", "ab", "cd")
