"""The SQL plugin registers its two benchmarks and is reachable only through the registry."""

from __future__ import annotations

import gymnasium as gym

from cm_gym.core.types import Action, AgentState, Evaluator
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.domains.sql import SQLDomain


def test_benchmarks_are_registered_with_env_ids() -> None:
    sql = get_benchmark("SQL")
    spider = get_benchmark("cm_gym/SpiderSQL-v0")
    assert sql.env_id == "cm_gym/SQL-v0" and sql.split_by_env is False
    assert spider.name == "SpiderSQL" and spider.split_kind() == "sampled"  # App. D.2: tasks by seed
    assert spider.split_kind("databases") == "environments" and sql.split_kind() == "shuffled"
    assert sql.env_id in gym.registry and spider.env_id in gym.registry
    assert sql.domain().name == spider.domain().name == "sql"


def test_domain_contract() -> None:
    domain = get_domain("sql")
    assert isinstance(domain, SQLDomain)
    assert isinstance(domain.make_evaluator(budget_s=1.0), Evaluator)
    kinds = set(domain.condition_predicates())
    assert {
        "sql_inclusive_wording",
        "sql_strict_wording",
        "sql_mentions_unique",
        "sql_has_numeric_column",
        "sql_same_db",
    } <= kinds
    assert all(k.startswith("sql_") for k in kinds)
    names = {op.name for op in domain.error_model().operators}
    assert {"inclusive_to_strict", "strict_to_inclusive", "missing_distinct", "wrong_join_key", "wrong_aggregate",
            "reversed_order", "limit_off_by_one", "null_mishandling"} <= names  # fmt: skip


def test_load_tasks_through_the_spec() -> None:
    tasks = get_benchmark("SQL").load_tasks(seed=0, n_tasks=24)
    assert len(tasks) == 24 and all(t.task_id.startswith("sqlgen-") for t in tasks)
    evaluator = get_domain("sql").make_evaluator()
    assert all(evaluator.check(AgentState(t), Action(t.reference)).solved for t in tasks)
