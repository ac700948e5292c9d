"""The generated SQL benchmark ("SQL", env id ``cm_gym/SQL-v0``): tasks from the template families
of `families.py` over the seeded databases of `schemas.py`.

`load_tasks(seed=0, n_tasks=800)` is deterministic per (seed, n_tasks, generator version). The
first call builds the databases and the task list (a few seconds) and caches the list as JSON next
to the databases; later calls read the cache (well under a second). Every gold query is executed
during generation; a look-alike pair is kept only when both golds run, return rows, and differ.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from cm_gym.core.paths import cache_dir
from cm_gym.core.types import Task
from cm_gym.domains.sql import families, schemas, sqlast
from cm_gym.domains.sql.compare import Result, compare
from cm_gym.domains.sql.features import task_features
from cm_gym.domains.sql.schema import Schema, introspect

logger = logging.getLogger(__name__)

PREFIX = "sqlgen"
GEN_VERSION = "g1"
_SOURCES = (
    "families.py",
    "templates.py",
    "schemas.py",
    "wording.py",
    "features.py",
    "sqlast.py",
    "generated.py",
)


def _fingerprint() -> str:
    """Hash of the generator's source, so an edited generator never reuses a stale cache."""
    h = hashlib.sha256(GEN_VERSION.encode())
    here = Path(__file__).parent
    for name in _SOURCES:
        h.update((here / name).read_bytes())
    return h.hexdigest()[:12]


def _cache_path(seed: int, n_tasks: int) -> Path:
    return cache_dir("sql", "generated") / f"tasks-{GEN_VERSION}-s{seed}-n{n_tasks}-{_fingerprint()}.json"


def _run(conn: sqlite3.Connection, sql: str) -> Result | None:
    try:
        cur = conn.execute(sql)
        rows = cur.fetchmany(501)
        ncols = len(cur.description or ())
    except sqlite3.Error as err:
        logger.warning("generated gold query failed (%s): %s", err, sql)
        return None
    return Result(rows, ncols) if 0 < len(rows) <= 500 else None


def _valid(conn: sqlite3.Connection, pair: families.Pair) -> bool:
    res_a = _run(conn, pair.a.sql)
    if res_a is None:
        return False
    if pair.b is None:
        return True
    res_b = _run(conn, pair.b.sql)
    if res_b is None:
        return False
    ordered = "ORDER BY" in pair.a.sql.upper()
    return not compare(res_a, res_b, ordered=ordered).correct


def _quotas(n_tasks: int) -> dict[str, int]:
    quotas = {name: int(round(n_tasks * share)) for name, (_, share) in families.FAMILIES.items()}
    quotas["boundary_lower"] += n_tasks - sum(quotas.values())
    return quotas


def generate(seed: int = 0, n_tasks: int = 800) -> list[dict[str, Any]]:
    """Generate the task records (plain dicts; see `load_tasks`)."""
    paths = {db: schemas.ensure_database(db, seed) for db in schemas.DATABASES}
    conns = {db: sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True) for db, p in paths.items()}
    schema_of: dict[str, Schema] = {db: introspect(p, db, immutable=False) for db, p in paths.items()}
    rng = random.Random(f"sqlgen:{seed}:{GEN_VERSION}")
    seen: set[str] = set()
    records: list[dict[str, Any]] = []
    try:
        for family, quota in _quotas(n_tasks).items():
            builder = families.FAMILIES[family][0]
            made, attempts = 0, 0
            while made < quota and attempts < quota * 30:
                attempts += 1
                pair = builder(conns, rng)
                if pair is None or pair.a.question in seen or (pair.b and pair.b.question in seen):
                    continue
                if not _valid(conns[pair.db], pair):
                    continue
                pair_id = f"{family}-{len(records):05d}"
                items = [pair.a] + ([pair.b] if pair.b else [])
                for item in items[: quota - made]:
                    seen.add(item.question)
                    sql = sqlast.normalize(item.sql)
                    records.append(
                        {
                            "prompt": item.question,
                            "env_id": pair.db,
                            "reference": sql,
                            "family": pair.family,
                            "features": task_features(item.question, sql, schema_of[pair.db], pair.family),
                            "meta": {"pair": pair_id if pair.b else None, "variant": item.variant},
                        }
                    )
                    made += 1
            if made < quota:
                logger.warning("family %s: only %d of %d tasks generated", family, made, quota)
    finally:
        for conn in conns.values():
            conn.close()
    order = list(range(len(records)))
    random.Random(f"sqlgen-order:{seed}").shuffle(order)
    return [records[i] for i in order]


def _write_atomic(path: Path, data: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tasks-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, separators=(",", ":"))
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the cache is shareable
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _read_cache(path: Path) -> list[dict[str, Any]] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        logger.warning("ignoring unreadable task cache %s (%s); regenerating", path, err)
        return None
    if not isinstance(data, list) or not all(isinstance(r, dict) and "reference" in r for r in data):
        logger.warning("ignoring malformed task cache %s; regenerating", path)
        return None
    return data


def load_tasks(seed: int = 0, n_tasks: int = 800) -> list[Task]:
    """The generated benchmark's tasks (ids ``sqlgen-NNNNN``), deterministic per seed."""
    if n_tasks < 2:
        raise ValueError(f"n_tasks must be at least 2, got {n_tasks}")
    path = _cache_path(seed, n_tasks)
    records = _read_cache(path) if path.exists() else None
    if records is None:
        records = generate(seed, n_tasks)
        _write_atomic(path, records)
        for stale in path.parent.glob(f"tasks-*-s{seed}-n{n_tasks}-*.json"):
            if stale != path:  # written by an older generator version
                stale.unlink(missing_ok=True)
    db_paths = {db: schemas.ensure_database(db, seed) for db in schemas.DATABASES}
    contexts = {db: introspect(p, db, immutable=False).text() for db, p in db_paths.items()}
    tasks = []
    for i, rec in enumerate(records):
        db = rec["env_id"]
        meta = dict(rec["meta"], db_path=str(db_paths[db]), immutable=False, benchmark="SQL", seed=seed)
        tasks.append(
            Task(
                task_id=f"{PREFIX}-{i:05d}",
                domain="sql",
                prompt=rec["prompt"],
                env_id=db,
                reference=rec["reference"],
                context=contexts[db],
                family=rec["family"],
                features=rec["features"],
                meta=meta,
            )
        )
    return tasks
