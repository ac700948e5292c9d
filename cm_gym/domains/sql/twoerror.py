"""Extra generated SQL tasks where two corrections can be needed at once: a boundary and a join in
one query (the ``boundary_join`` family: "which parents have a child whose value is at least v").

`candidate_tasks(n, seed)` builds up to `n` such tasks over the generated benchmark's databases
with the benchmark's own family builder, under ids ``sqltwo<seed>-NNNN`` and a seed of their own,
and drops every question the benchmark itself asks (no near-duplicate of a source task) and every
question of the candidate sets of `disjoint_from` seeds (a training set never shares a question
with an evaluation set). They are
not a registered benchmark: the `combine` study keeps the ones whose memory-free draft carries
two slips (it asks the simulated LLM; a domain never imports it) and passes them to the env as a
task list.
"""

from __future__ import annotations

import random
import sqlite3

from cm_gym.core.types import Task
from cm_gym.domains.sql import families, schemas, sqlast
from cm_gym.domains.sql.features import task_features
from cm_gym.domains.sql.generated import load_tasks
from cm_gym.domains.sql.schema import introspect

PREFIX = "sqltwo"


def candidate_tasks(
    n: int = 400, seed: int = 0, benchmark_seed: int = 0, disjoint_from: tuple[int, ...] = ()
) -> list[Task]:
    """Up to `n` boundary-and-join tasks (deterministic per seed), none asked by the benchmark
    or by the `n`-task candidate sets of the `disjoint_from` seeds."""
    asked = {t.prompt for t in load_tasks(seed=benchmark_seed)}
    for other in disjoint_from:
        asked |= {t.prompt for t in candidate_tasks(n, other, benchmark_seed)}
    paths = {db: schemas.ensure_database(db, benchmark_seed) for db in schemas.DATABASES}
    conns = {db: sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True) for db, p in paths.items()}
    schema_of = {db: introspect(p, db, immutable=False) for db, p in paths.items()}
    rng = random.Random(f"sqltwo:{seed}")
    tasks: list[Task] = []
    seen = set(asked)
    try:
        for _ in range(n * 30):
            if len(tasks) >= n:
                break
            pair = families.boundary_join(conns, rng)
            if pair is None:
                continue
            for item in (pair.a, pair.b):
                if item is None or item.question in seen or len(tasks) >= n:
                    continue
                try:
                    rows = conns[pair.db].execute(item.sql).fetchmany(2)
                except sqlite3.Error:
                    continue
                if not rows:
                    continue
                seen.add(item.question)
                sql = sqlast.normalize(item.sql)
                tasks.append(
                    Task(
                        task_id=f"{PREFIX}{seed}-{len(tasks):04d}",
                        domain="sql",
                        prompt=item.question,
                        env_id=pair.db,
                        reference=sql,
                        context=schema_of[pair.db].text(),
                        family=pair.family,
                        features=task_features(item.question, sql, schema_of[pair.db], pair.family),
                        meta={
                            "db_path": str(paths[pair.db]),
                            "immutable": False,
                            "benchmark": "SQL",
                            "seed": benchmark_seed,
                        },
                    )
                )
    finally:
        for conn in conns.values():
            conn.close()
    return tasks
