"""Spider-layout task loader: ``<root>/dev.json`` (or any list of {db_id, question, query}),
``<root>/tables.json`` (optional; the schema is read from the database otherwise) and
``<root>/database/<db_id>/<db_id>.sqlite``. BIRD's layout is the same with other file names.

The data is only read: databases are opened ``mode=ro&immutable=1``. Malformed input is refused
piece by piece, naming the file (and the entry index where it applies): a task file that cannot be
read, an entry that is not a {db_id, question, query} object, the entries of a database file that
is missing or not SQLite, a ``tables.json`` that cannot be read (the schemas are then read from the
databases); the rest loads. With a `LoadReport` the refusals are recorded there; without one the
loader raises one `SQLDataError` listing them all.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cm_gym.core.paths import data_root
from cm_gym.core.types import Task
from cm_gym.domains.base import LoadReport, refused_message
from cm_gym.domains.sql.features import task_features
from cm_gym.domains.sql.schema import Schema, SQLDataError, connect_ro, from_spider_tables, introspect

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


def _entries(
    path: Path, refused: list[tuple[str, str]]
) -> tuple[int, list[tuple[int, tuple[str, str, str]]]]:
    """The number of entries and (index, (db_id, question, query)) of each well-formed one; the
    rest are `refused`."""
    data = _read_json(path)
    if not isinstance(data, list):
        raise SQLDataError(f"{path}: expected a JSON list of {{db_id, question, query}} objects")
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            refused.append((f"{path}#{i}", f"{path}: entry {i} is not an object"))
            continue
        values = []
        for key in ("db_id", "question", "query"):
            value = item.get(key, item.get("SQL") if key == "query" else None)
            if not isinstance(value, str) or not value.strip():
                refused.append((f"{path}#{i}", f"{path}: entry {i} has no non-empty string {key!r}"))
                break
            values.append(value.strip())
        else:
            out.append((i, (values[0], values[1], values[2])))
    return len(data), out


def _schemas(root: Path, refused: list[tuple[str, str]]) -> dict[str, Schema]:
    """The schemas of ``tables.json`` (a file or entry that cannot be read is `refused`: those
    databases' schemas are then read from the databases themselves)."""
    path = root / "tables.json"
    if not path.exists():
        return {}
    try:
        data = _read_json(path)
        if not isinstance(data, list):
            raise SQLDataError(f"{path}: expected a JSON list of schema objects")
    except SQLDataError as exc:
        refused.append((str(path), str(exc)))
        return {}
    out = {}
    for i, entry in enumerate(data):
        try:
            if not isinstance(entry, dict) or "db_id" not in entry:
                raise SQLDataError(f"{path}: entry {i} is not a schema object with a db_id")
            schema = from_spider_tables(entry, path)
        except SQLDataError as exc:
            refused.append((f"{path}#{i}", str(exc)))
            continue
        out[schema.db_id] = schema
    return out


def database_path(root: Path, db_id: str) -> Path:
    """``<root>/database/<db_id>/<db_id>.sqlite``."""
    return root / "database" / db_id / f"{db_id}.sqlite"


def load_tasks(
    root: Path | str | None = None, files: Sequence[str] = ("dev.json",), report: LoadReport | None = None
) -> list[Task]:
    """Load Spider-layout tasks (ids ``spider-NNNN`` by entry position across the task files);
    default root ``data_root()/"spider"``. `report` collects the refused files and entries
    instead of raising (see the module docstring)."""
    base = Path(root) if root is not None else data_root() / "spider"
    tasks, refused = _load_cached(str(base.resolve()), tuple(files), _signature(base, files))
    if refused and report is None:
        raise SQLDataError(refused_message(list(refused), "Spider"))
    if report is not None:
        report.refused.extend(refused)
    return list(tasks)


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
) -> tuple[tuple[Task, ...], tuple[tuple[str, str], ...]]:
    root = Path(root_str)
    if not root.is_dir():
        raise SQLDataError(f"Spider folder not found: {root}")
    refused: list[tuple[str, str]] = []
    schemas = _schemas(root, refused)
    checked: dict[str, Schema | str] = {}  # db_id -> its schema, or why its database is refused
    tasks: list[Task] = []
    position = 0
    for name in files:
        path = root / name
        try:
            count, entries = _entries(path, refused)
        except SQLDataError as exc:
            refused.append((str(path), str(exc)))
            continue
        for i, (db_id, question, query) in entries:
            idx = position + i
            if db_id not in checked:
                checked[db_id] = _database(root, path, i, db_id, schemas)
            schema = checked[db_id]
            if isinstance(schema, str):
                refused.append((f"{path}#{i}", f"{path}: entry {i}: {schema}"))
                continue
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
        position += count
    logger.info("loaded %d Spider-layout tasks from %s", len(tasks), root)
    return tuple(tasks), tuple(refused)


def _database(root: Path, path: Path, i: int, db_id: str, schemas: dict[str, Schema]) -> Schema | str:
    """The schema of `db_id`'s database, or why it cannot be used (its entries are refused)."""
    db_path = database_path(root, db_id)
    if not db_path.is_file():
        return f"unknown db_id {db_id!r} (no file {db_path})"
    try:
        connect_ro(db_path).close()
        return schemas.get(db_id) or introspect(db_path, db_id)
    except SQLDataError as exc:  # corrupt or foreign file, naming it
        return str(exc)
