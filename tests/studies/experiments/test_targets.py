"""Transfer targets are classified from task fields and the store's records alone."""

from __future__ import annotations

from cm_gym.core.types import Task
from cm_gym.memory.record import Record
from cm_gym.studies.experiments.targets import classify, split_envs


def _task(tid: str, env: str, family: str, prompt: str) -> Task:
    return Task(tid, "sql", prompt, env, "SELECT 1", family=family)


def _record(source: Task, condition: str) -> Record:
    return Record.create(
        domain="sql",
        source_task_id=source.task_id,
        env_id=source.env_id,
        situation="boundary",
        a_minus="SELECT a FROM t WHERE x > 1",
        a_plus="SELECT a FROM t WHERE x >= 1",
        evidence={},
        condition=condition,
        contrast_key="> -> >=",
        delta=1.0,
    )


def test_conditions_of_transfer() -> None:
    src = _task("s1", "hr", "boundary_lower", "List the employees aged at least 30 in the hr table")
    other = _task("s2", "hr", "distinct", "Which distinct departments have employees")
    records = [_record(src, 'mentions_any("at least")'), _record(other, "")]
    look = _task(
        "t1", "hr", "boundary_lower", "List the employees aged strictly more than 30 in the hr table"
    )
    new_env = _task("t2", "shop", "boundary_lower", "List the products priced at least 30 in the shop")
    near = _task("t3", "hr", "boundary_lower", "List the employees aged at least 40 in the hr table")
    far = _task("t4", "hr", "boundary_lower", "Which staff members have 40 or more years of age")
    unrelated = _task("t5", "hr", "order", "Sort all employees by name")
    got = classify(records, [src, other], [look, new_env, near, far, unrelated], {"hr"})
    by = got.by_condition
    assert by["look_alike"] == ["t1"] and got.source_of["t1"] == "s1"
    assert by["new_env"] == ["t2"]
    assert by["new_surface"] == ["t4"] and "t3" in by["same_env"] and "t5" in by["same_env"]
    assert sorted(got.all_ids()) == ["t1", "t2", "t3", "t4", "t5"]
    capped = classify(records, [src, other], [look, new_env, near, far, unrelated], {"hr"}, cap=1)
    assert all(len(v) <= 1 for v in capped.by_condition.values())


def test_split_envs_is_a_seeded_half() -> None:
    envs = ["a", "b", "c", "d", "e"]
    assert split_envs(envs, 1) == split_envs(list(reversed(envs)), 1)
    assert len(split_envs(envs, 1)) == 2 and split_envs(["only"], 3) == {"only"}
