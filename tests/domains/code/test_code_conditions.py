"""Code condition predicates and distilled conditions, on look-alike tasks."""

from __future__ import annotations

import dataclasses

import pytest

from cm_gym.core.types import Task
from cm_gym.domains.code.domain import CodeDomain
from cm_gym.domains.code.generated import load_generated_tasks
from cm_gym.domains.conditions import parse_condition


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    return {f"{t.meta['template']}:{t.features['bug_class']}": t for t in load_generated_tasks()}


def holds(text: str, task: Task) -> bool:
    return parse_condition(text, CodeDomain().condition_predicates()).holds(task)


def test_predicates_read_task_features(tasks: dict[str, Task]) -> None:
    below = tasks["count_below:flipped_comparison"]
    fact = tasks["factorial:missing_base_case"]
    assert holds('code_bug_class_is("flipped_comparison")', below)
    assert not holds('code_bug_class_is("off_by_one")', below)
    assert holds("code_function_has_loop()", below) and not holds("code_function_has_loop()", fact)
    assert holds("code_function_has_recursion()", tasks["factorial:wrong_return"])
    assert holds('code_signature_has("xs", "t")', below) and not holds('code_signature_has("n")', below)
    assert holds('code_arity_is("2")', below) and holds('code_arity_is("1")', fact)
    assert holds('code_test_names_mention("boundary")', below) and not holds(
        'code_test_names_mention("tie")', below
    )
    assert holds('code_has_comparison("<=")', below)  # the buggy program's comparison
    assert holds('code_boundary_is("strict")', below) and holds(
        'code_uses_call("range")', tasks["triangle_number:off_by_one"]
    )


def test_predicates_are_false_on_other_domains(tasks: dict[str, Task]) -> None:
    alien = dataclasses.replace(tasks["count_below:flipped_comparison"], domain="sql")
    assert not holds('code_bug_class_is("flipped_comparison")', alien)


def test_distilled_condition_holds_at_home_and_not_on_the_lookalike(tasks: dict[str, Task]) -> None:
    domain = CodeDomain()
    src = tasks["count_below:flipped_comparison"]
    d = domain.distil(dataclasses.replace(src, reference=""), src.meta["buggy"], src.reference)
    assert "<= -> <" in d.situation and "count_below" in d.situation
    assert holds(d.condition, src)
    assert (
        holds(d.condition, tasks["first_index_greater:flipped_comparison"]) is False
    )  # no `<=` to fix there
    twin = tasks["count_at_most:flipped_comparison"]  # `<` → `<=` is right there: the record must not apply
    assert not holds(d.condition, twin)
    back = domain.distil(twin, twin.meta["buggy"], twin.reference)
    assert holds(back.condition, twin) and not holds(back.condition, src)


@pytest.mark.parametrize("key", ["factorial:missing_base_case", "triangle_number:off_by_one", "gcd:swapped_arguments",
                                 "histogram:wrong_variable"])  # fmt: skip
def test_every_distilled_condition_parses_and_holds_on_its_source(tasks: dict[str, Task], key: str) -> None:
    t = tasks[key]
    d = CodeDomain().distil(t, t.meta["buggy"], t.reference)
    assert d.situation and d.condition
    assert holds(d.condition, t)
