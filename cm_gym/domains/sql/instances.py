"""Generated instances of a SQLite database: the same schema, other rows (Spider's test-suite idea).

One database instance cannot tell a right query from a lucky one: ``x <> 'Timmothy'`` and
``x = 'Timmothy'`` can return the same rows on it, and so can two join keys whose values happen to
coincide. A *variant* keeps the schema (every table, index and view, from ``sqlite_master``) and
rewrites the rows, so that queries that differ in meaning are likely to differ in result:

* **rows sampled / deleted** — each row that no foreign key points to is dropped with probability
  `p_delete` (at least one row of a non-empty table stays; a table longer than `max_rows` is
  sampled down to it);
* **rows duplicated** — each kept row is copied with probability `p_duplicate` (DISTINCT,
  COUNT(DISTINCT) and join multiplicities show); a copy gets a fresh value in a single integer
  key column, and tables whose key cannot be renewed (text keys, composite keys) get no copies;
* **values perturbed within the column's domain** — a cell is replaced with probability `p_value`
  by another value of the same column (numbers also by a neighbour, v ± 1), so boundaries,
  ties and coincidences of the original change; a foreign-key column draws from the referenced
  column's values, so a join still finds a partner;
* **NULL inserted where allowed** — with probability `p_null` in columns that are not NOT NULL,
  not a key, not referenced by a foreign key, and already hold a NULL in the original: NULL is
  then part of the column's observed domain. (Spider's schemas rarely declare NOT NULL; NULLs in
  a column that never holds one made the gold and right-but-differently-written queries disagree
  on a case the question never considered — ``ORDER BY age LIMIT 1`` puts a NULL age first,
  ``age = (SELECT MIN(age) ...)`` skips it — and refused such repairs for nothing.)

Keys and referential integrity are kept: primary-key, unique and referenced columns are never
perturbed, and after the deletions a child row whose foreign key pointed to a deleted parent row
is deleted too (repeated to a fixed point), so a query that is right on every database honouring
the schema stays right here. Nothing depends on the database being Spider's: the schema is read
from SQLite itself. Variants are deterministic by (database content, seed, index, `VERSION`) and
built once into a cache folder (``$CM_GYM_CACHE/sql-instances`` by default), never next to the
data; a variant is written to a temporary file and renamed, so a reader never sees half of one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cm_gym.core.paths import cache_dir
from cm_gym.domains.sql.schema import SQLDataError, connect_ro

logger = logging.getLogger(__name__)

#: bump when the generator changes: cached variants of another version are not reused
VERSION = 2


@dataclass(frozen=True)
class VariantRates:
    """How strongly a variant rewrites the rows (see the module docstring)."""

    p_delete: float = 0.2
    p_duplicate: float = 0.15
    p_value: float = 0.15
    p_null: float = 0.05
    max_rows: int = 5000


@dataclass
class _Table:
    name: str
    columns: list[str]
    notnull: list[bool]
    numeric: list[bool]
    keys: set[int]  # primary-key / unique columns: never perturbed
    int_key: int | None  # the one integer key column a copy can renew, if any
    renewable: bool  # whether rows may be copied at all
    fks: list[tuple[int, str, str]]  # (column index, parent table, parent column)
    rows: list[list[Any]]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _unique_columns(conn: sqlite3.Connection, table: str) -> list[list[str]]:
    out = []
    for row in conn.execute(f"PRAGMA index_list({_quote(table)})"):
        if row[2]:  # unique
            out.append([r[2] for r in conn.execute(f"PRAGMA index_info({_quote(row[1])})")])
    return out


def _read(conn: sqlite3.Connection, name: str, max_rows: int, rng: random.Random) -> _Table:
    info = list(conn.execute(f"PRAGMA table_info({_quote(name)})"))
    columns = [r[1] for r in info]
    lower = [c.lower() for c in columns]
    pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
    uniques = _unique_columns(conn, name) + ([pk] if pk else [])
    keys = {lower.index(c.lower()) for group in uniques for c in group if c.lower() in lower}
    numeric = [
        any(k in (r[2] or "").lower() for k in ("int", "real", "floa", "doub", "num", "dec")) for r in info
    ]
    fks = []
    for r in conn.execute(f"PRAGMA foreign_key_list({_quote(name)})"):
        if r[3] and r[3].lower() in lower and r[4]:
            fks.append((lower.index(r[3].lower()), r[2], r[4]))
    single = [g for g in uniques if len(g) == 1]
    int_key = None
    if len(uniques) == len(single) and len({g[0].lower() for g in single}) == 1 and single:
        idx = lower.index(single[0][0].lower()) if single[0][0].lower() in lower else -1
        if idx >= 0 and numeric[idx] and idx not in {f[0] for f in fks}:
            int_key = idx
    rows = [list(r) for r in conn.execute(f"SELECT * FROM {_quote(name)}")]
    if len(rows) > max_rows:
        rows = [rows[i] for i in sorted(rng.sample(range(len(rows)), max_rows))]
    return _Table(name, columns, [bool(r[3]) for r in info], numeric, keys, int_key, not uniques or int_key is not None,
                  fks, rows)  # fmt: skip


def _neighbour(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    step = rng.choice((-1, 1))
    return value + step if isinstance(value, int) else round(value + step * max(1.0, abs(value) * 0.1), 6)


def _perturb(tables: dict[str, _Table], rates: VariantRates, rng: random.Random) -> None:
    """Delete, copy and perturb rows in place (keys and references kept; see the module doc)."""
    referenced = {(p.lower(), c.lower()) for t in tables.values() for _, p, c in t.fks}
    originals = {n: [list(r) for r in t.rows] for n, t in tables.items()}
    used: dict[tuple[str, str], set[Any]] = {}  # (parent table, column) -> values children point to
    for t in tables.values():
        for i, parent, col in t.fks:
            used.setdefault((parent.lower(), col.lower()), set()).update(
                r[i] for r in t.rows if r[i] is not None
            )
    for name, t in tables.items():
        lower = [c.lower() for c in t.columns]
        pinned = [lower.index(c) for (p, c) in used if p == name and c in lower]
        if t.rows:  # a row some child points to stays: integrity without emptying small tables
            kept = [r for r in t.rows
                    if any(r[i] in used[(name, t.columns[i].lower())] for i in pinned) or rng.random() >= rates.p_delete]  # fmt: skip
            t.rows = kept or [t.rows[rng.randrange(len(t.rows))]]
    _cascade(tables, originals)
    for t in tables.values():
        domains = [
            [r[i] for r in originals[t.name.lower()] if r[i] is not None] for i in range(len(t.columns))
        ]
        fk_of = {i: (p.lower(), c) for i, p, c in t.fks}
        nullable = [
            not t.notnull[i] and any(r[i] is None for r in originals[t.name.lower()])
            for i in range(len(t.columns))
        ]
        for row in t.rows:
            for i, col in enumerate(t.columns):
                if i in t.keys or (t.name.lower(), col.lower()) in referenced:
                    continue
                if i in fk_of:
                    if rng.random() < rates.p_value:
                        parent = tables.get(fk_of[i][0])
                        values = _column(parent, fk_of[i][1]) if parent else []
                        if values:
                            row[i] = rng.choice(values)
                    continue
                u = rng.random()
                if u < rates.p_null and nullable[i]:
                    row[i] = None
                elif u < rates.p_null + rates.p_value and domains[i]:
                    row[i] = rng.choice(domains[i]) if rng.random() < 0.5 else _neighbour(row[i], rng)
        if t.renewable and t.rows:
            copies = []
            top = (
                max((r[t.int_key] for r in t.rows if isinstance(r[t.int_key], int)), default=0)
                if t.int_key is not None
                else 0
            )
            for row in t.rows:
                if rng.random() < rates.p_duplicate:
                    copy = list(row)
                    if t.int_key is not None:
                        top += 1
                        copy[t.int_key] = top
                    copies.append(copy)
            t.rows.extend(copies)


def _column(table: _Table, column: str, rows: list[list[Any]] | None = None) -> list[Any]:
    """The non-NULL values of one column (of `rows`, by default the table's current rows)."""
    lower = [c.lower() for c in table.columns]
    if column.lower() not in lower:
        return []
    i = lower.index(column.lower())
    return [r[i] for r in (table.rows if rows is None else rows) if r[i] is not None]


def _cascade(tables: dict[str, _Table], originals: dict[str, list[list[Any]]]) -> None:
    """Delete child rows whose foreign key lost the parent row it had (to a fixed point)."""
    for _ in range(len(tables) + 1):
        changed = False
        for t in tables.values():
            for i, parent, col in t.fks:
                p = tables.get(parent.lower())
                if p is None:
                    continue
                had = set(_column(p, col, originals[parent.lower()]))
                has = set(_column(p, col))
                keep = [r for r in t.rows if r[i] is None or r[i] not in had or r[i] in has]
                if len(keep) < len(t.rows):
                    t.rows, changed = keep, True
        if not changed:
            return


def build_variant(
    source: str | Path, target: str | Path, seed: int, rates: VariantRates | None = None
) -> Path:
    """Write one variant of `source` to `target` (see the module docstring); returns `target`."""
    rates = rates or VariantRates()
    rng = random.Random(f"cm_gym-sql-variant:{seed}")
    src = connect_ro(source)
    try:
        entries = list(src.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
            "ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 WHEN 'view' THEN 2 ELSE 3 END, rowid"
        ))  # fmt: skip
        tables = {n.lower(): _read(src, n, rates.max_rows, rng) for kind, n, _ in entries if kind == "table"}
    finally:
        src.close()
    _perturb(tables, rates, rng)
    target = Path(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    dst = sqlite3.connect(tmp)
    try:
        for kind, _name, sql in entries:
            if kind in ("table", "index", "view"):
                dst.execute(sql)
        for t in tables.values():
            if t.rows:
                marks = ", ".join("?" * len(t.columns))
                dst.executemany(f"INSERT OR IGNORE INTO {_quote(t.name)} VALUES ({marks})", t.rows)
        dst.commit()
    finally:
        dst.close()
    os.replace(tmp, target)
    return target


def content_hash(path: str | Path) -> str:
    """SHA-256 of the database file (a variant's cache key: the same content, the same variants)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:20]


class InstanceCache:
    """The variants of each database, built once per (content, seed, index) into `directory`."""

    def __init__(self, n: int, seed: int = 0, directory: str | Path | None = None,
                 rates: VariantRates | None = None) -> None:  # fmt: skip
        if n < 0:
            raise ValueError(f"the number of database variants must be >= 0, got {n}")
        self.n, self.seed, self.rates = int(n), int(seed), rates or VariantRates()
        self._directory = Path(directory) if directory is not None else None
        self._paths: dict[str, list[str]] = {}

    @property
    def directory(self) -> Path:
        if self._directory is None:
            self._directory = cache_dir("sql-instances")
        self._directory.mkdir(parents=True, exist_ok=True)
        return self._directory

    def variants(self, db_path: str) -> Sequence[str]:
        """The paths of the `n` variants of `db_path` (built on first use). A variant that cannot
        be built (a schema SQLite cannot re-create, an unwritable cache) is logged and left out:
        the database is then checked on fewer instances, as ``instances_counted`` shows."""
        paths = self._paths.get(db_path)
        if paths is None:
            digest = content_hash(db_path)
            knobs = hashlib.sha256(repr(self.rates).encode()).hexdigest()[:8]
            folder = self.directory / f"{digest}-v{VERSION}-{knobs}"
            folder.mkdir(parents=True, exist_ok=True)
            paths = []
            for i in range(self.n):
                path = folder / f"seed{self.seed}-{i}.sqlite"
                if not path.is_file():
                    try:
                        build_variant(db_path, path, self.seed * 1000 + i, self.rates)
                    except (sqlite3.Error, OSError, SQLDataError) as err:  # a schema SQLite cannot copy
                        logger.warning(
                            "no variant %d of %s (%s): it is checked on fewer instances", i, db_path, err
                        )
                        continue
                    logger.info("built database variant %s of %s", path, db_path)
                paths.append(str(path))
            self._paths[db_path] = paths
        return paths
