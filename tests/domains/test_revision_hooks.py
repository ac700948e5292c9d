"""The Domain contract's revision hooks: their generic defaults and the SQL domain's kinds."""

from __future__ import annotations

import re

import pytest

from cm_gym.core.types import Task
from cm_gym.domains.base import Edit, RevisionRates
from tests.toy_domain import ToyDomain, toy_tasks

_OP = re.compile(r"(?<![<>=!])(>=|<=|>|<)(?![<>=])")
_FLIP = {">=": ">", ">": ">=", "<=": "<", "<": "<="}


class KindDomain(ToyDomain):
    """Flips any one comparison; every comparison change is of kind "include" or "exclude"."""

    def edit_operators(self, task: Task, action: str) -> list[Edit]:
        out = []
        for m in _OP.finditer(action):
            new = action[: m.start()] + _FLIP[m.group(0)] + action[m.end() :]
            out.append(Edit(new, f"cmp:{m.start()}", "flip"))
        return out

    def edit_kind(self, a_minus: str, a_plus: str) -> str:
        return "include" if a_plus.count("=") > a_minus.count("=") else "exclude"


def test_generic_hooks_find_analogous_edits_and_unrelated_disturbances() -> None:
    domain, task = KindDomain(), toy_tasks(1)[0]
    draft = "x < 3 AND y >= 2"
    # record: make a lower bound inclusive; the draft has no ">" but an upper bound to make inclusive
    assert domain.record_closeness(task, draft, "a > 1", "a >= 1") == "analogous"
    assert domain.analogous_edits(task, draft, "a > 1", "a >= 1") == ["x <= 3 AND y >= 2"]
    # disturbances are the other kind only: dropping the draft's inclusive bound
    assert domain.disturbances(task, draft, "a > 1", "a >= 1") == ["x < 3 AND y > 2"]
    assert domain.record_closeness(task, "x > 3", "a > 1", "a >= 1") == "match"
    assert domain.record_closeness(task, "x = 3", "a > 1", "a >= 1") == "unrelated"


def test_default_edit_kind_is_the_site_free_contrast() -> None:
    domain = ToyDomain()
    assert domain.edit_kind("age > 18", "age >= 18") == domain.edit_kind("x > 2", "x >= 2") == "> -> >="
    # the default never calls an edit of the opposite direction analogous
    assert domain.analogous_edits(toy_tasks(1)[0], "x >= 3", "a > 1", "a >= 1") == []


def test_revision_rates_are_probabilities_per_closeness() -> None:
    rates = RevisionRates(
        apply=0.6, match_disturb=0.1, overapply=0.3, analogous_disturb=0.2, unrelated_disturb=0.05
    )
    for closeness in ("match", "analogous", "unrelated"):
        p = rates.probabilities(closeness)
        assert sum(p.values()) == pytest.approx(1.0) and min(p.values()) >= 0.0
    assert rates.probabilities("match")["overapply"] == 0.0
    assert rates.branch("match", 0.59) == "apply" and rates.branch("match", 0.65) == "disturb"
    assert rates.branch("match", 0.71) == "unchanged" and rates.branch("unrelated", 0.04) == "disturb"
    with pytest.raises(ValueError, match="at most 1"):
        RevisionRates(apply=0.8, match_disturb=0.3)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        RevisionRates(unrelated_disturb=-0.1)
    with pytest.raises(ValueError, match="closeness"):
        rates.probabilities("near")


def test_sql_kinds_separate_inclusive_from_strict_and_find_analogous_sites() -> None:
    from cm_gym.domains.sql.domain import SQLDomain

    domain = SQLDomain()
    task = Task("t", "sql", "List people aged at most 40.", "db", "", features={})
    minus, plus = "SELECT name FROM people WHERE age > 18", "SELECT name FROM people WHERE age >= 18"
    assert domain.edit_kind(minus, plus) == "cmp:include-boundary"
    assert domain.edit_kind(plus, minus) == "cmp:exclude-boundary"
    draft = "SELECT name FROM people WHERE age < 40"
    assert domain.record_closeness(task, draft, minus, plus) == "analogous"
    assert domain.analogous_edits(task, draft, minus, plus) == ["SELECT name FROM people WHERE age <= 40"]
    assert domain.record_closeness(task, "SELECT name FROM people WHERE age > 40", minus, plus) == "match"
    assert domain.record_closeness(task, "SELECT name FROM people", minus, plus) == "unrelated"
    assert domain.canonical_action("select  name from people") == domain.canonical_action(
        "SELECT name FROM people"
    )
