"""The SQL domain's persistent work memo (`cm_gym.core.workmemo`): the rule-based edits of a
query, the one-unit change a pair of queries encodes, and a record's contrast applied to a draft.

Also the normal form of a query, whether a reply's query parses, and the SQL world model's
verdicts (`verdict_memo`). All are pure functions of their texts (and the task's column types),
computed with sqlglot / SQLite; the version is the digest of the domains package's source and
sqlglot's version, so a changed edit grammar or parser never reads an old value. The encodings
are JSON (edits and changes: `edits.encode_edits`) and round-trip exactly
(`tests/domains/sql/test_sql_workmemo.py`)."""

from __future__ import annotations

import functools

import sqlglot

from cm_gym.core.workmemo import WorkMemo, memo_key

__all__ = ["memo_key", "sql_work"]


@functools.lru_cache(maxsize=1)
def sql_work() -> WorkMemo:
    """The memo (one per process; its version read once)."""
    from cm_gym.domains.base import Domain, source_digest

    return WorkMemo("sql-work", f"{source_digest(Domain)}-sqlglot{sqlglot.__version__}")
