"""Environment change families: every family changes copies only, keeps the changed tasks solvable
by their (rewritten) references, moves the content version of exactly the environments it
touched, and each domain's adaptation edit undoes what its change did to an old action."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.environment import (
    EnvironmentChangeError,
    environment_versions,
    load_environment,
    save_environment,
)
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.memory.snapshot import file_sha256


def _tasks(benchmark: str) -> list:
    return list(get_benchmark(benchmark).load_tasks())


@pytest.fixture(scope="module")
def sql() -> tuple:
    return get_domain("sql"), _tasks("SQL")[:240]  # a prefix keeps the features' recomputation quick


@pytest.mark.parametrize("family", ["rename_column", "split_table", "type_to_text", "view_replaces_table"])
def test_sql_family_changes_copies_and_keeps_golds_correct(sql: tuple, family: str, tmp_path: Path) -> None:
    domain, tasks = sql
    originals = {t.meta["db_path"] for t in tasks}
    before = {p: file_sha256(Path(p)) for p in originals}
    changed, change = domain.apply_change(family, tasks, tmp_path / "env", seed=0)
    assert {p: file_sha256(Path(p)) for p in originals} == before  # the source databases are untouched
    assert all(Path(t.meta["db_path"]).parent == (tmp_path / "env").resolve() for t in changed)
    old_v, new_v = environment_versions(domain, tasks), environment_versions(domain, changed)
    assert set(change.touched_envs) == {e for e in new_v if new_v[e] != old_v[e]} != set()
    evaluator = domain.make_evaluator()
    sample = [c for c in changed if c.task_id in set(change.rewritten_tasks)][:15] or changed[:15]
    for c in sample:
        assert evaluator.check(AgentState(c), Action(c.reference)).solved, c.reference
    old = {t.task_id: t for t in tasks}
    stale = sum(not evaluator.check(AgentState(c), Action(old[c.task_id].reference)).solved for c in sample)
    if family == "view_replaces_table":  # the control: every old query still means what it meant
        assert not change.rewritten_tasks and stale == 0
    elif family in ("rename_column", "split_table"):
        assert stale == len(sample)  # an old query on a renamed / moved column no longer runs


def test_sql_adaptation_edit_repairs_a_renamed_column(sql: tuple, tmp_path: Path) -> None:
    domain, tasks = sql
    changed, change = domain.apply_change("rename_column", tasks, tmp_path / "env", seed=0)
    old = {t.task_id: t for t in tasks}
    evaluator = domain.make_evaluator()
    task = next(c for c in changed if c.task_id in set(change.rewritten_tasks))
    edits = domain.adaptation_edits(task, old[task.task_id].reference)
    assert any(evaluator.check(AgentState(task), Action(e.text)).solved for e in edits)
    assert domain.adaptation_edits(task, task.reference) == []  # nothing to adapt in a fitting query


def test_changed_environment_round_trips_and_refuses_bad_input(sql: tuple, tmp_path: Path) -> None:
    domain, tasks = sql
    changed, change = domain.apply_change("view_replaces_table", tasks[:40], tmp_path / "env", seed=0)
    save_environment(tmp_path / "env", changed, change, benchmark="SQL", domain=domain)
    env = load_environment(tmp_path / "env")
    assert [t.task_id for t in env.tasks] == [
        t.task_id for t in changed
    ] and env.change.family == change.family
    assert env.tasks[0].features == changed[0].features and env.tasks[0].meta == changed[0].meta
    with pytest.raises(EnvironmentChangeError, match="not empty"):
        domain.apply_change("rename_column", tasks[:5], tmp_path / "env")
    with pytest.raises(EnvironmentChangeError, match="no change family"):
        domain.apply_change("no_such_change", tasks[:5], tmp_path / "other")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "environment.json").write_text("{not json")
    with pytest.raises(EnvironmentChangeError, match="not a readable"):
        load_environment(tmp_path / "bad")


@pytest.mark.parametrize(
    ("benchmark", "family"),
    [("SAT", "requirement_changed"), ("SMT", "logic_to_real"), ("SMT", "variables_renamed")],
)
def test_sat_smt_families_keep_references_correct(benchmark: str, family: str, tmp_path: Path) -> None:
    tasks = _tasks(benchmark)[::6]  # every family, a sixth of its tasks (each change solves its problems)
    domain = get_domain(get_benchmark(benchmark).domain_name)
    versions = environment_versions(domain, tasks)
    assert all(len(v) == 1 for v in versions.values())  # one version per environment, not per task
    changed, change = domain.apply_change(family, tasks, tmp_path / "env", seed=0)
    touched = [c for c in changed if c.task_id in set(change.rewritten_tasks)]
    assert touched and set(change.touched_envs) == {c.env_id for c in touched}
    new = environment_versions(domain, changed)
    assert all(new[e] != versions[e] for e in change.touched_envs)
    evaluator = domain.make_evaluator()
    old = {t.task_id: t for t in tasks}
    flipped = 0
    for c in touched[:: max(1, len(touched) // 10)]:
        assert evaluator.check(AgentState(c), Action(c.reference)).solved
        flipped += not evaluator.check(AgentState(c), Action(old[c.task_id].reference)).solved
    assert flipped > 0  # some old references are now wrong: records built on them can go stale
    if family == "variables_renamed":
        c = touched[0]
        (edit,) = domain.adaptation_edits(c, old[c.task_id].reference)[:1]
        assert "v_" in edit.text


@pytest.mark.slow
def test_code_signature_change_and_its_repair(tmp_path: Path) -> None:
    tasks = _tasks("Code")[:6]
    domain = get_domain("code")
    changed, change = domain.apply_change("signature_changed", tasks, tmp_path / "env", seed=0)
    task = next(c for c in changed if c.task_id in set(change.rewritten_tasks))
    old = next(t for t in tasks if t.task_id == task.task_id)
    evaluator = domain.make_evaluator()
    assert evaluator.check(AgentState(task), Action(task.reference)).solved
    assert not evaluator.check(AgentState(task), Action(old.reference)).solved  # arguments arrive swapped
    (edit,) = domain.adaptation_edits(task, old.reference)
    assert evaluator.check(AgentState(task), Action(edit.text)).solved
    added, _ = domain.apply_change("tests_added", tasks[:2], tmp_path / "env2", seed=0)
    assert len(added[0].meta["suite"]["cases"]) > len(tasks[0].meta["suite"]["cases"])
    assert evaluator.check(AgentState(added[0]), Action(added[0].reference)).solved


def test_tests_added_skips_inputs_the_reference_never_halts_on(tmp_path: Path) -> None:
    """collatz_steps(0) loops forever: the change must finish and add no test for that input."""
    from cm_gym.core.types import Task

    reference = "def steps(n):\n    k = 0\n    while n != 1:\n        n = n // 2 if n % 2 == 0 else 3 * n + 1\n        k += 1\n    return k\n"
    cases = [{"name": "t1", "expr": "steps(*input_data)", "input": [1], "expected": 0}]
    task = Task(
        "codegen-9999",
        "code",
        "fix steps",
        "codegen/steps",
        reference,
        features={"test_names": ["t1"], "n_tests": 1},
        meta={"template": "steps", "suite": {"mode": "cases", "function": "steps", "cases": cases}},
    )
    (changed,), _ = get_domain("code").apply_change("tests_added", [task], tmp_path / "env", seed=0)
    added = {c["name"]: c for c in changed.meta["suite"]["cases"]}
    assert set(added) == {"t1", "t1_plus_one"}  # steps(0) never halts: no t1_minus_one
    assert added["t1_plus_one"]["input"] == [2] and added["t1_plus_one"]["expected"] == 1
    assert task.meta["suite"]["cases"] == cases  # the original task is untouched


def test_dafny_lemma_renamed_is_textual_and_adaptable(tmp_path: Path) -> None:
    from cm_gym.core.types import Task
    from cm_gym.domains.dafny.changes import CHANGE_FAMILIES, adaptation_edits

    program = "lemma Foo(x: int)\n  ensures x + 0 == x\n{}\nmethod Main() { Foo(1); }\n"
    task = Task(
        "d-1",
        "dafny",
        "p",
        "dafny/p",
        program,
        features={"members": ["Foo", "Main"]},
        meta={"program": program},
    )
    (changed,), change = CHANGE_FAMILIES["lemma_renamed"].apply([task], tmp_path, 0)
    assert "lemma Foo_v2(" in changed.meta["program"] and "Foo_v2(1)" in changed.reference
    assert changed.features["members"] == ["Foo_v2", "Main"] and change.touched_envs == ("dafny/p",)
    (edit,) = adaptation_edits(changed, program)
    assert edit.text == changed.reference
    assert get_domain("dafny").environment_version(changed) != get_domain("dafny").environment_version(task)
    assert dataclasses.replace(task).meta == {"program": program}  # the original is untouched
