"""Database schemas: read-only opening, validation, and the compact schema text put in
`Task.context` (tables, typed columns, primary and foreign keys; at most 3000 characters)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cm_gym.core.types import TRUNCATION, CmGymError, truncate


class SQLDataError(CmGymError):
    """A database or task file of the SQL domain is missing, corrupt or malformed (the message
    names the file)."""


def ro_uri(path: Path | str, *, immutable: bool = True) -> str:
    """SQLite URI that opens `path` read-only (and immutable: no locks, no side files)."""
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    return uri + "&immutable=1" if immutable else uri


def connect_ro(path: Path | str, *, immutable: bool = True) -> sqlite3.Connection:
    """Open an existing database read-only; SQLDataError when it is missing or not SQLite."""
    p = Path(path)
    if not p.is_file():
        raise SQLDataError(f"database file not found: {p}")
    try:
        conn = sqlite3.connect(ro_uri(p, immutable=immutable), uri=True, check_same_thread=False)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as err:
        raise SQLDataError(f"{p}: not a readable SQLite database ({err})") from err
    return conn


def type_class(declared: str) -> str:
    """Coarse column type: "number", "text", "time" or "other" (Spider's vocabulary)."""
    t = (declared or "").lower()
    if any(k in t for k in ("date", "time", "year")):
        return "time"
    if any(k in t for k in ("int", "real", "floa", "doub", "num", "dec", "number", "bool")):
        return "number"
    if any(k in t for k in ("char", "text", "clob", "string")) or not t:
        return "text"
    return "other"


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    pk: bool = False


@dataclass(frozen=True)
class Schema:
    """Tables → columns, plus foreign keys (table, column, ref_table, ref_column)."""

    db_id: str
    tables: Mapping[str, tuple[Column, ...]]
    foreign_keys: tuple[tuple[str, str, str, str], ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def column_types(self) -> dict[str, str]:
        """{"table.column" (lower-case): coarse type} for every column."""
        return {
            f"{t.lower()}.{c.name.lower()}": type_class(c.type)
            for t, cols in self.tables.items()
            for c in cols
        }

    def text(self, limit: int = TRUNCATION["context"]) -> str:
        """Compact schema text for `Task.context` (types dropped first when it is too long)."""
        for with_types in (True, False):
            lines = [f"Database: {self.db_id}", "Tables:"]
            for table, cols in self.tables.items():
                parts = []
                for c in cols:
                    item = f"{c.name} {c.type.upper() or 'TEXT'}" if with_types else c.name
                    parts.append(item + (" PK" if c.pk else ""))
                lines.append(f"  {table}({', '.join(parts)})")
            if self.foreign_keys:
                fks = "; ".join(f"{t}.{c} -> {rt}.{rc}" for t, c, rt, rc in self.foreign_keys)
                lines.append(f"Foreign keys: {fks}")
            text = "\n".join(lines)
            if len(text) <= limit:
                return text
        return truncate(text, limit)


def introspect(path: Path | str, db_id: str, *, immutable: bool = True, views: bool = False) -> Schema:
    """Read the schema of a SQLite file (read-only); with `views`, views are listed like tables
    (an agent queries them alike)."""
    conn = connect_ro(path, immutable=immutable)
    kinds = "('table', 'view')" if views else "('table')"
    try:
        names = [
            r[0]
            for r in conn.execute(
                f"SELECT name FROM sqlite_master WHERE type IN {kinds} AND name NOT LIKE 'sqlite_%' "
                "ORDER BY rowid"
            )
        ]
        tables: dict[str, tuple[Column, ...]] = {}
        fks: list[tuple[str, str, str, str]] = []
        for name in names:
            quoted = name.replace('"', '""')
            info = conn.execute(f'PRAGMA table_info("{quoted}")').fetchall()
            tables[name] = tuple(Column(r[1], r[2] or "", bool(r[5])) for r in info)
            for r in conn.execute(f'PRAGMA foreign_key_list("{quoted}")').fetchall():
                fks.append((name, r[3], r[2], r[4] or ""))
    except sqlite3.DatabaseError as err:
        raise SQLDataError(f"{path}: cannot read the schema ({err})") from err
    finally:
        conn.close()
    return Schema(db_id, tables, tuple(fks))


_SPIDER_TYPES = {"number": "NUMBER", "text": "TEXT", "time": "TIME", "boolean": "BOOLEAN"}


def from_spider_tables(entry: Mapping[str, Any], source: Path) -> Schema:
    """A schema from one `tables.json` entry (original table and column names)."""
    try:
        db_id = str(entry["db_id"])
        table_names: Sequence[str] = entry["table_names_original"]
        columns: Sequence[Sequence[Any]] = entry["column_names_original"]
        types: Sequence[str] = entry["column_types"]
        pks = set(_flatten(entry.get("primary_keys", [])))
        tables: dict[str, list[Column]] = {t: [] for t in table_names}
        for idx, (t_idx, col) in enumerate(columns):
            if t_idx < 0:
                continue
            ctype = _SPIDER_TYPES.get(str(types[idx]), str(types[idx]).upper())
            tables[table_names[t_idx]].append(Column(str(col), ctype, idx in pks))
        fks = []
        for a, b in entry.get("foreign_keys", []):
            ta, ca = columns[a]
            tb, cb = columns[b]
            fks.append((table_names[ta], str(ca), table_names[tb], str(cb)))
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise SQLDataError(f"{source}: malformed tables.json entry ({err!r})") from err
    return Schema(db_id, {t: tuple(c) for t, c in tables.items()}, tuple(dict.fromkeys(fks)))


def _flatten(items: Sequence[Any]) -> list[int]:
    out: list[int] = []
    for item in items:
        out.extend(_flatten(item) if isinstance(item, list) else [int(item)])
    return out
