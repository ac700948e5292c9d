"""The text values of one column of a database (for edits that take a value's spelling from the
data, `edits_local.value_case_edits`): read-only, distinct, capped, cached per database file."""

from __future__ import annotations

import functools
import logging
import sqlite3

from cm_gym.domains.sql.schema import SQLDataError, connect_ro

logger = logging.getLogger(__name__)

#: at most this many distinct values are read per column (a cap for large tables)
MAX_VALUES = 2000


@functools.lru_cache(maxsize=4096)
def column_values(path: str, table: str, column: str) -> tuple[str, ...]:
    """Distinct text values of ``table.column`` in the database at `path` (empty on any error:
    an edit that cannot read the data proposes nothing)."""
    quote = lambda name: '"' + name.replace('"', '""') + '"'  # noqa: E731
    try:
        conn = connect_ro(path)
    except SQLDataError as err:
        logger.debug("no column values from %s: %s", path, err)
        return ()
    try:
        rows = conn.execute(
            f"SELECT DISTINCT {quote(column)} FROM {quote(table)} WHERE typeof({quote(column)}) = 'text' LIMIT ?",
            (MAX_VALUES,),
        ).fetchall()
    except sqlite3.DatabaseError as err:
        logger.debug("no values of %s.%s in %s: %s", table, column, path, err)
        return ()
    finally:
        conn.close()
    return tuple(r[0] for r in rows)
