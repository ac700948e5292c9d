"""Text-to-SQL domain: registers the generated benchmark "SQL" (``cm_gym/SQL-v0``) and the
Spider-layout benchmark "SpiderSQL" (``cm_gym/SpiderSQL-v0``, real data under
``data_root()/"spider"``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cm_gym.core.types import Task
from cm_gym.domains.base import LoadReport
from cm_gym.domains.registry import register_benchmark
from cm_gym.domains.sql.domain import SQLDomain

__all__ = ["SQLDomain", "load_generated_tasks", "load_spider_tasks"]


def load_generated_tasks(seed: int = 0, n_tasks: int = 800) -> list[Task]:
    """Tasks of the generated benchmark (built and cached on first use)."""
    from cm_gym.domains.sql.generated import load_tasks

    return load_tasks(seed=seed, n_tasks=n_tasks)


def load_spider_tasks(
    root: Path | str | None = None, files: Sequence[str] = ("dev.json",), report: LoadReport | None = None
) -> list[Task]:
    """Tasks of a Spider-layout folder (default ``data_root()/"spider"``); `report` collects the
    refused files and entries instead of raising."""
    from cm_gym.domains.sql.loader import load_tasks

    return load_tasks(root=root, files=files, report=report)


register_benchmark(
    "SQL",
    domain=SQLDomain,
    load_tasks=load_generated_tasks,
    description="generated Text-to-SQL tasks with look-alike pairs (boundaries, DISTINCT, joins, ...)",
    split_by_env=False,
)
register_benchmark(
    "SpiderSQL",
    domain=SQLDomain,
    load_tasks=load_spider_tasks,
    description="Spider-layout Text-to-SQL (dev.json, tables.json, database/<db>/<db>.sqlite)",
    # the paper's main SQL split (App. D.2): tasks sampled by seed, shared ids removed; databases
    # apart is the "new environment" condition (split="databases")
    split_by_env=False,
    default_split="tasks",
    data_layout="Spider layout: dev.json (db_id, question, query), tables.json, database/<db>/<db>.sqlite",
)
