"""Spider-layout task loader: ``<root>/dev.json`` (or any list of {db_id, question, query}),
``<root>/tables.json`` (optional; the schema is read from the database otherwise) and
``<root>/database/<db_id>/<db_id>.sqlite``. BIRD's layout is the same with other file names.

The data is only read: databases are opened ``mode=ro&immutable=1``. Any malformed input gives one
`SQLDataError` naming the file (and the entry index where it applies).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cm_gym.domains.sql.features import task_features
from cm_gym.domains.sql.schema import Schema, SQLDataError, connect_ro, from_spider_tables, introspect
from cm_gym.paths import data_root
from cm_gym.types import Task

logger = logging.getLogger(__name__)

PREFIX = "spider"


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise SQLDataError(f"file not found: {path}")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise SQLDataError(f"{path}: not UTF-8 text (byte {err.start})") from err
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SQLDataError(
            f"{path}: malformed JSON at line {err.lineno}, column {err.colno}: {err.msg}"
        ) from err


def _entries(path: Path) -> list[tuple[str, str, str]]:
    data = _read_json(path)
    if not isinstance(data, list):
        raise SQLDataError(f"{path}: expected a JSON list of {{db_id, question, query}} objects")
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise SQLDataError(f"{path}: entry {i} is not an object")
        values = []
        for key in ("db_id", "question", "query"):
            value = item.get(key, item.get("SQL") if key == "query" else None)
            if not isinstance(value, str) or not value.strip():
                raise SQLDataError(f"{path}: entry {i} has no non-empty string {key!r}")
            values.append(value.strip())
        out.append((values[0], values[1], values[2]))
    return out


def _schemas(root: Path) -> dict[str, Schema]:
    path = root / "tables.json"
    if not path.exists():
        return {}
    data = _read_json(path)
    if not isinstance(data, list):
        raise SQLDataError(f"{path}: expected a JSON list of schema objects")
    out = {}
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or "db_id" not in entry:
            raise SQLDataError(f"{path}: entry {i} is not a schema object with a db_id")
        schema = from_spider_tables(entry, path)
        out[schema.db_id] = schema
    return out


def database_path(root: Path, db_id: str) -> Path:
    """``<root>/database/<db_id>/<db_id>.sqlite``."""
    return root / "database" / db_id / f"{db_id}.sqlite"


def load_tasks(root: Path | str | None = None, files: Sequence[str] = ("dev.json",)) -> list[Task]:
    """Load Spider-layout tasks (ids ``spider-NNNN`` in file order); default root
    ``data_root()/"spider"``."""
    base = Path(root) if root is not None else data_root() / "spider"
    return list(_load_cached(str(base.resolve()), tuple(files), _signature(base, files)))


def _signature(root: Path, files: Sequence[str]) -> tuple[tuple[str, int, int], ...]:
    """(name, mtime, size) of the task and schema files: a changed file invalidates the cache."""
    out = []
    for name in (*files, "tables.json"):
        try:
            st = (root / name).stat()
            out.append((name, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((name, -1, -1))
    return tuple(out)


@functools.lru_cache(maxsize=8)
def _load_cached(
    root_str: str, files: tuple[str, ...], signature: tuple[tuple[str, int, int], ...]
) -> tuple[Task, ...]:
    root = Path(root_str)
    if not root.is_dir():
        raise SQLDataError(f"Spider folder not found: {root}")
    schemas = _schemas(root)
    checked: dict[str, Schema] = {}
    tasks: list[Task] = []
    for name in files:
        path = root / name
        for i, (db_id, question, query) in enumerate(_entries(path)):
            if db_id not in checked:
                db_path = database_path(root, db_id)
                if not db_path.is_file():
                    raise SQLDataError(f"{path}: entry {i}: unknown db_id {db_id!r} (no file {db_path})")
                connect_ro(db_path).close()  # corrupt or foreign file → SQLDataError naming it
                checked[db_id] = schemas.get(db_id) or introspect(db_path, db_id)
            schema = checked[db_id]
            idx = len(tasks)
            features = task_features(question, query, schema)
            tasks.append(
                Task(
                    task_id=f"{PREFIX}-{idx:04d}",
                    domain="sql",
                    prompt=question,
                    env_id=db_id,
                    reference=query,
                    context=schema.text(),
                    family=features["family"],
                    features=features,
                    meta={
                        "db_path": str(database_path(root, db_id)),
                        "immutable": True,
                        "source": f"{name}#{i}",
                        "benchmark": "SpiderSQL",
                    },
                )
            )
    logger.info("loaded %d Spider-layout tasks from %s", len(tasks), root)
    return tuple(tasks)
