"""SQL environments that change: the SQL domain's change families and content version.

Every family works on *copies*: each database the tasks use is copied (SQLite's backup API, the
source opened read-only) to ``<folder>/<db>.sqlite`` and changed there; the shared data and the
generated cache are never written. The changed tasks point at the copies (``meta["db_path"]``),
show the changed schema (``context``, views included) and carry features recomputed from it. A
gold query that the change breaks is rewritten to the query that means the same on the changed
database, so the question keeps its answer; recorded actions (a record's a⁻ / a⁺) are not
rewritten — that is what ``cm-gym memory reverify`` checks.

Per database, the family picks its target deterministically from the tasks: the candidate that
the most gold queries mention (ties broken by a seeded draw), so the change matters.

* ``rename_column`` (schema) — a column whose name is unique in its database is renamed
  (``salary`` → ``salary_amount``); gold queries use the new name.
* ``split_table`` (schema) — the most-used table loses half of its non-key columns whose names
  are unique in the database (the most-used ones) to a new table ``<t>_details`` keyed by the
  same primary key; a gold query that touches
  the table reads it through the equivalent join, ``(SELECT … FROM t JOIN t_details …) AS t``.
* ``type_to_text`` (data, "a boundary now stored as strings") — a numeric column that gold
  queries compare is stored as TEXT (``CAST(x AS TEXT)``); gold queries compare and return it
  through ``CAST(x AS INTEGER|REAL)``. An uncast comparison now compares strings in SQLite.
* ``view_replaces_table`` (schema, a control) — the most-used table is renamed ``<t>_data`` and a
  view ``t`` over it takes its place. Every query means what it meant: no record may go stale.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from sqlglot import exp

from cm_gym.core.types import Task
from cm_gym.domains.base import Edit
from cm_gym.domains.environment import ChangeFamily, EnvChange, EnvironmentChangeError
from cm_gym.domains.sql import sqlast
from cm_gym.domains.sql.features import task_features
from cm_gym.domains.sql.schema import Column, Schema, connect_ro, introspect, type_class

_NUMERIC = ("integer", "real", "number")


# -- content version -----------------------------------------------------------------------------
@lru_cache(maxsize=256)
def _db_digest(path: str, mtime_ns: int, size: int) -> str:
    h = hashlib.sha256()
    conn = connect_ro(path, immutable=True)
    try:
        objects = conn.execute(
            "SELECT type, name, COALESCE(sql, '') FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
            "ORDER BY type, name"
        ).fetchall()
        for kind, name, sql in objects:
            h.update(f"{kind}\x1f{name}\x1f{' '.join(sql.split())}\x1e".encode())
            if kind == "table":
                quoted = name.replace('"', '""')
                for row in conn.execute(f'SELECT * FROM "{quoted}" ORDER BY rowid'):
                    h.update(repr(row).encode("utf-8", "replace"))
    except sqlite3.DatabaseError as exc:
        h.update(f"unreadable: {exc}".encode())
    finally:
        conn.close()
    return h.hexdigest()[:16]


def environment_version(name: str, task: Task) -> str:
    """The SQL content version: `database_version` (the Domain hook, `domains.environment`)."""
    return database_version(task)


def adaptation_edits(task: Task, action: str) -> list[Edit]:
    """An unknown column or table → the closest the schema has; a text column compared with a
    number → CAST (`sql/adapt.py`; re-verification only)."""
    from cm_gym.domains.sql.adapt import adaptation_edits as edits

    return edits(action, (task.features or {}).get("column_types"))


def database_version(task: Task) -> str:
    """Content version of a SQL task's database: its schema (tables, views, indexes) and every
    row, read through SQLite (not the file's bytes, which a rebuild may lay out differently)."""
    path = (task.meta or {}).get("db_path")
    if not path:
        return "no-database"
    try:
        st = Path(path).stat()
    except OSError:
        return "missing-database"
    return _db_digest(str(Path(path).resolve()), st.st_mtime_ns, st.st_size)


# -- copies and schemas --------------------------------------------------------------------------
def _copy(source: str, target: Path) -> None:
    src = connect_ro(source, immutable=True)
    dst = sqlite3.connect(str(target))
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def schema_of(path: Path, db_id: str) -> Schema:
    """Tables *and views* of a changed database (an agent queries a view like a table)."""
    return introspect(path, db_id, immutable=False, views=True)


def _rng(seed: int, *parts: str) -> np.random.Generator:
    h = hashlib.blake2b("\x1f".join((str(seed), *parts)).encode(), digest_size=8)
    return np.random.default_rng(int.from_bytes(h.digest(), "big"))


def _mentions(tasks: Sequence[Task]) -> Counter[str]:
    """How many gold queries mention each identifier (lower-case)."""
    out: Counter[str] = Counter()
    for task in tasks:
        out.update(set(re.findall(r"[A-Za-z_]\w*", task.reference.lower())))
    return out


def _pick(cands: Sequence[str], mentions: Counter[str], rng: np.random.Generator) -> str | None:
    """The candidate the most gold queries mention (a seeded draw among ties); None if unused."""
    scored = [(mentions[c.lower()], c) for c in cands if mentions[c.lower()] > 0]
    if not scored:
        return None
    best = max(n for n, _ in scored)
    tied = sorted(c for n, c in scored if n == best)
    return tied[int(rng.integers(len(tied)))]


def _unique_columns(schema: Schema) -> dict[str, tuple[str, Column]]:
    """Column name (lower) → (table, column) for names that occur in one table only."""
    seen: Counter[str] = Counter(c.name.lower() for cols in schema.tables.values() for c in cols)
    return {
        c.name.lower(): (t, c) for t, cols in schema.tables.items() for c in cols if seen[c.name.lower()] == 1
    }


def _rewrite(sql: str, fn: Callable[[exp.Expression], bool]) -> str | None:
    """Apply `fn` to the parsed gold query (in place); the normalised SQL when it changed it."""
    try:
        tree = sqlast.parse(sql)
    except sqlast.SQLParseError:
        return None
    return sqlast.to_sql(tree) if fn(tree) else None


# -- the families --------------------------------------------------------------------------------
#: ``plan(db, schema, tasks of that db, seed) -> (DDL script, gold rewriter or None, description)``
Plan = tuple[str, Callable[[exp.Expression], bool] | None, str]


def _plan_rename(db: str, schema: Schema, tasks: Sequence[Task], seed: int) -> Plan | None:
    unique = _unique_columns(schema)
    keys = {
        c.name.lower()
        for cols in schema.tables.values()
        for c in cols
        if c.pk or c.name.lower().endswith("_id")
    }
    name = _pick([n for n in unique if n not in keys], _mentions(tasks), _rng(seed, "rename", db))
    if name is None:
        return None
    table, col = unique[name]
    new = f"{col.name}_{('amount', 'value', 'v2')[int(_rng(seed, 'suffix', db).integers(3))]}"

    def fix(tree: exp.Expression) -> bool:
        hit = False
        for node in tree.find_all(exp.Column):
            if node.name.lower() == name:
                node.set("this", exp.to_identifier(new))
                hit = True
        return hit

    return (
        f'ALTER TABLE "{table}" RENAME COLUMN "{col.name}" TO "{new}";',
        fix,
        f"{table}.{col.name} renamed {new}",
    )


def _plan_text(db: str, schema: Schema, tasks: Sequence[Task], seed: int) -> Plan | None:
    unique = _unique_columns(schema)
    numeric = [
        n
        for n, (_, c) in unique.items()
        if type_class(c.type) in _NUMERIC and not c.pk and not n.endswith("_id")
    ]
    compared: Counter[str] = Counter()
    for task in tasks:  # prefer columns the gold queries compare (boundaries), then any mention
        compared.update({sqlast.column_name(n.this).lower() for n in _comparisons(task.reference)})
    name = _pick(numeric, compared, _rng(seed, "text", db)) or _pick(
        numeric, _mentions(tasks), _rng(seed, "text", db)
    )
    if name is None:
        return None
    table, col = unique[name]
    cast = "INTEGER" if "INT" in col.type.upper() else "REAL"
    cols = schema.tables[table]
    decl = ", ".join(
        f'"{c.name}" ' + ("TEXT" if c.name == col.name else (c.type or "")) + (" PRIMARY KEY" if c.pk else "")
        for c in cols
    )
    select = ", ".join(f'CAST("{c.name}" AS TEXT)' if c.name == col.name else f'"{c.name}"' for c in cols)
    ddl = (
        f'CREATE TABLE "{table}__new" ({decl}); INSERT INTO "{table}__new" SELECT {select} FROM "{table}"; '
        f'DROP TABLE "{table}"; ALTER TABLE "{table}__new" RENAME TO "{table}";'
    )

    def fix(tree: exp.Expression) -> bool:
        hit = False
        for node in list(tree.find_all(exp.Column)):
            if node.name.lower() == name and not isinstance(node.parent, exp.Cast):
                node.replace(exp.Cast(this=node.copy(), to=exp.DataType.build(cast)))
                hit = True
        return hit

    return ddl, fix, f"{table}.{col.name} now stored as TEXT (was {col.type or 'untyped'})"


def _comparisons(sql: str) -> list[exp.Expression]:
    try:
        return [c for c in sqlast.comparisons(sqlast.parse(sql)) if isinstance(c.this, exp.Column)]
    except sqlast.SQLParseError:
        return []


def _main_table(schema: Schema, tasks: Sequence[Task], seed: int, tag: str) -> str | None:
    real = [t for t in schema.tables if any(c.pk for c in schema.tables[t])]
    return _pick(real, _mentions(tasks), _rng(seed, tag))


def _plan_view(db: str, schema: Schema, tasks: Sequence[Task], seed: int) -> Plan | None:
    table = _main_table(schema, tasks, seed, f"view:{db}")
    if table is None:
        return None
    ddl = f'ALTER TABLE "{table}" RENAME TO "{table}_data"; CREATE VIEW "{table}" AS SELECT * FROM "{table}_data";'
    return ddl, None, f"table {table} replaced by a view over {table}_data"


def _plan_split(db: str, schema: Schema, tasks: Sequence[Task], seed: int) -> Plan | None:
    table = _main_table(schema, tasks, seed, f"split:{db}")
    if table is None:
        return None
    cols = schema.tables[table]
    pk = next(c for c in cols if c.pk)
    unique = _unique_columns(schema)  # moved columns keep unambiguous names
    rest = [c for c in cols if not c.pk and not c.name.lower().endswith("_id") and c.name.lower() in unique]
    if len(rest) < 2:
        return None
    mentions = _mentions(tasks)
    ranked = sorted(rest, key=lambda c: (-mentions[c.name.lower()], c.name))
    moved = sorted(ranked[: max(1, len(rest) // 2)], key=cols.index)
    names = {c.name.lower() for c in moved}
    ext = f"{table}_details"
    keep = [c for c in cols if c.name.lower() not in names]
    decl = ", ".join(f'"{c.name}" {c.type}' + (" PRIMARY KEY" if c.pk else "") for c in keep)
    ddl = (
        f'CREATE TABLE "{ext}" ("{pk.name}" INTEGER PRIMARY KEY, '
        + ", ".join(f'"{c.name}" {c.type}' for c in moved)
        + f'); INSERT INTO "{ext}" SELECT "{pk.name}", '
        + ", ".join(f'"{c.name}"' for c in moved)
        + f' FROM "{table}"; CREATE TABLE "{table}__new" ({decl}); INSERT INTO "{table}__new" SELECT '
        + ", ".join(f'"{c.name}"' for c in keep)
        + f' FROM "{table}"; DROP TABLE "{table}"; ALTER TABLE "{table}__new" RENAME TO "{table}";'
    )
    inner = (
        "SELECT "
        + ", ".join(f"{'d' if c.name.lower() in names else 'b'}.{c.name}" for c in cols)
        + f" FROM {table} AS b JOIN {ext} AS d ON b.{pk.name} = d.{pk.name}"
    )

    def fix(tree: exp.Expression) -> bool:
        used = {n.name.lower() for n in tree.find_all(exp.Column)} & names or any(
            isinstance(s.parent, exp.Select) for s in tree.find_all(exp.Star)
        )
        if not used:
            return False
        hit = False
        for node in list(tree.find_all(exp.Table)):
            if node.name.lower() == table.lower():
                alias = node.alias or table
                sub = sqlast.parse(f"SELECT * FROM ({inner}) AS {alias}").find(exp.From).this
                node.replace(sub)
                hit = True
        return hit

    moved_text = ", ".join(c.name for c in moved)
    return ddl, fix, f"{table} split: {moved_text} moved to {ext}"


_PLANS: dict[str, Callable[[str, Schema, Sequence[Task], int], Plan | None]] = {
    "rename_column": _plan_rename,
    "split_table": _plan_split,
    "type_to_text": _plan_text,
    "view_replaces_table": _plan_view,
}


def _apply(family: str, tasks: Sequence[Task], folder: Path, seed: int) -> tuple[list[Task], EnvChange]:
    by_db: dict[str, list[Task]] = {}
    for task in tasks:
        if not (task.meta or {}).get("db_path"):
            raise EnvironmentChangeError(f"SQL task {task.task_id} has no database (meta['db_path'])")
        by_db.setdefault(task.env_id, []).append(task)
    plan_of = _PLANS[family]
    new_path: dict[str, Path] = {}
    schemas: dict[str, Schema] = {}
    fixes: dict[str, Callable[[exp.Expression], bool] | None] = {}
    lines: list[str] = []
    for db in sorted(by_db):
        source = str(by_db[db][0].meta["db_path"])
        target = folder / (re.sub(r"[^\w.-]", "_", db) + ".sqlite")
        _copy(source, target)
        plan = plan_of(db, schema_of(target, db), by_db[db], seed)
        if plan is not None:
            ddl, fixes[db], text = plan
            conn = sqlite3.connect(str(target))
            try:
                conn.executescript(ddl)
                conn.commit()
            finally:
                conn.close()
            lines.append(f"{db}: {text}")
        new_path[db], schemas[db] = target, schema_of(target, db)
    changed: list[Task] = []
    rewritten: list[str] = []
    for task in tasks:
        db, fix = task.env_id, fixes.get(task.env_id)
        reference = _rewrite(task.reference, fix) if fix is not None else None
        if reference is not None:
            rewritten.append(task.task_id)
        ref = reference or task.reference
        schema = schemas[db]
        feats = task_features(
            task.prompt, ref, schema, task.family or str((task.features or {}).get("family", ""))
        )
        meta: Mapping[str, Any] = {**task.meta, "db_path": str(new_path[db]), "immutable": False}
        changed.append(replace(task, reference=ref, context=schema.text(), features=feats, meta=meta))
    touched = tuple(line.split(":", 1)[0] for line in lines)
    change = EnvChange(
        family, "; ".join(lines) or "nothing to change", {"seed": seed}, touched, tuple(rewritten)
    )
    return changed, change


CHANGE_FAMILIES: dict[str, ChangeFamily] = {
    name: ChangeFamily(name, kind, text, lambda tasks, folder, seed, _n=name: _apply(_n, tasks, folder, seed))
    for name, kind, text in (
        (
            "rename_column",
            "schema",
            "a column unique in its database is renamed; gold queries use the new name",
        ),
        (
            "split_table",
            "schema",
            "half of a table's columns move to <table>_details; gold queries join it back",
        ),
        ("type_to_text", "data", "a compared numeric column is stored as TEXT; gold queries CAST it back"),
        (
            "view_replaces_table",
            "none",
            "a table becomes <table>_data behind a view of the old name (control)",
        ),
    )
}
