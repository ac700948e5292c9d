"""`SQLDomain`: the Text-to-SQL plugin (world model, edit grammar, conditions, error model).

Heavy modules (sqlglot-based edits, contrasts, the error model) are imported on first use so
that ``import cm_gym`` stays fast.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from cm_gym.core import boundedjson
from cm_gym.core.types import Task
from cm_gym.domains.base import Distillation, Domain, Edit, ErrorModel, PredicateFn
from cm_gym.domains.reply import ReplyFormat
from cm_gym.domains.sql.conditions import PREDICATES
from cm_gym.domains.sql.evaluator import SQLEvaluator
from cm_gym.domains.sql.reply import find_query

_APPLY_MEMO_SIZE = 20_000


class SQLDomain(Domain):
    """Text-to-SQL on SQLite: actions are single SELECT queries, scored by execution accuracy."""

    name = "sql"
    action_kind = "SQLite query"
    action_format = (
        "Return only the SQL query (one SELECT statement for SQLite), in one ```sql fenced code block."
    )
    reply_format = ReplyFormat(("sql", "sqlite", "sqlite3", "postgresql", "mysql"), find_query, "SQL query")

    def make_evaluator(self, **kwargs: Any) -> SQLEvaluator:
        """`SQLEvaluator(step_budget=100_000_000, row_cap=10000, partial_credit=False, digits=10)`."""
        return SQLEvaluator(**kwargs)

    def recording_key(self, task: Task) -> str | None:
        """A Spider question's key among published predictions: its database and its question
        (the format of `cm_gym.llm.recordings.spider_key`)."""
        return f"{task.env_id}\x1f{task.prompt}"

    def edit_operators(self, task: Task, action: str) -> list[Edit]:
        """The base edit grammar (`edits.py`); a task with ``meta["sql_edit_grammar"] =
        "extended"`` also gets the local edits real drafts need (`edits_local.py`: projected
        column, join type, LIKE, value casing from the task's database, COUNT(*)). The default
        benchmarks and the simulated LLM see the base grammar only."""
        column_types = (task.features or {}).get("column_types")
        if (task.meta or {}).get("sql_edit_grammar") != "extended":
            return self._base_edit_operators(action, column_types)
        from cm_gym.domains.sql.edits_local import extended_edits
        from cm_gym.domains.sql.values import column_values

        path = (task.meta or {}).get("db_path") or ""
        lookup = (lambda table, column: column_values(path, table, column)) if path else None
        return [Edit(e.text, e.unit, e.description) for e in extended_edits(action, column_types, lookup)]

    @staticmethod
    def _base_edit_operators(action: str, column_types: Mapping[str, str] | None) -> list[Edit]:
        """The base grammar's edits, each carrying its edit kind and contrast key from the
        structured change that made it (`contrast.change_kind`, `Change.key`): the values
        `edit_kind` / `contrast_key` re-derive from (action, edit) by re-parsing both queries
        (the same on every reachable simulator draft of SQL and SpiderSQL;
        tests/domains/sql/test_carried_edit_kinds.py)."""
        from cm_gym.domains.sql.contrast import change_kind
        from cm_gym.domains.sql.edits import raw_edits

        return [
            Edit(e.text, e.unit, e.description, change_kind(e.change), e.change.key)
            for e in raw_edits(action, column_types)
        ]

    def edits_from_task_alone(self, task: Task) -> bool:
        """False for the extended grammar: its value-casing edits read the task's database."""
        return (task.meta or {}).get("sql_edit_grammar") != "extended"

    def decision_units(self, action: str) -> list[str]:
        """One line per clause / key of the pretty-printed query."""
        from cm_gym.domains.sql import sqlast

        try:
            return [line.strip() for line in sqlast.pretty(action).splitlines() if line.strip()]
        except sqlast.SQLParseError:
            return super().decision_units(action)

    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        return PREDICATES

    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        from cm_gym.domains.sql.distil import distil

        return distil(task, a_minus, a_plus)

    def contrast_key(self, a_minus: str, a_plus: str) -> str:
        """E.g. "cmp:GT->GTE", "distinct:add", "order:ASC->DESC", "limit:+1", "agg:SUM->AVG",
        "join_key", "null:IS->IS NOT", "where:drop"; the token diff when not one AST edit."""
        from cm_gym.domains.sql import sqlast
        from cm_gym.domains.sql.contrast import contrast_key

        key = contrast_key(a_minus, a_plus)
        if key is None:  # compare the normal forms so formatting never shows up as a change
            key = super().contrast_key(sqlast.try_normalize(a_minus), sqlast.try_normalize(a_plus))
        return key

    def edit_kind(self, a_minus: str, a_plus: str) -> str:
        """ "cmp:include-boundary", "cmp:exclude-boundary", "agg", "distinct:add", "order:DESC",
        "join_key", "where:drop", ... (the token-level default when not one AST edit)."""
        from cm_gym.domains.sql.contrast import edit_kind

        return edit_kind(a_minus, a_plus) or super().edit_kind(a_minus, a_plus)

    def error_model(self) -> ErrorModel:
        from cm_gym.domains.sql.errormodel import error_model

        return error_model()

    def apply_contrast(self, task: Task, draft: str, a_minus: str, a_plus: str) -> str | None:
        """Apply the record's one-unit change to the draft (same column first); None when the
        pattern does not occur. Contrasts that are not one AST edit fall back to token runs.

        Memoised on (draft, a⁻, a⁺, the task's column types in order), all it depends on: one
        simulated revision asks it up to three times (closeness, the apply branch, analogous
        edits), each a parse and a render of the draft."""
        column_types = (task.features or {}).get("column_types")
        key = (draft, a_minus, a_plus, tuple(column_types.items()) if column_types else ())
        memo: OrderedDict[tuple[Any, ...], str | None] = self.__dict__.setdefault(
            "_apply_memo", OrderedDict()
        )
        if key in memo:
            memo.move_to_end(key)
            return memo[key]
        from cm_gym.domains.sql import workmemo  # and through the persistent work memo

        out = memo[key] = workmemo.sql_work().cached(
            workmemo.memo_key("apply", draft, a_minus, a_plus, json.dumps(key[3])),
            lambda: self._apply_contrast(task, draft, a_minus, a_plus, column_types),
            json.dumps,
            _text_or_none,
        )
        if len(memo) > _APPLY_MEMO_SIZE:
            memo.popitem(last=False)
        return out

    def _apply_contrast(
        self, task: Task, draft: str, a_minus: str, a_plus: str, column_types: Mapping[str, str] | None
    ) -> str | None:
        from cm_gym.domains.sql import contrast, sqlast

        if contrast.infer_contrast(a_minus, a_plus) is None:
            out = super().apply_contrast(task, draft, a_minus, a_plus)
            return sqlast.try_normalize(out) if out is not None else None
        return contrast.apply_contrast(draft, a_minus, a_plus, column_types)

    def transform_of(self, task: Task, a_minus: str, a_plus: str) -> str:
        """The site-free transform of a generic contrast (`transfer.transform_of`) as JSON, e.g.
        ``{"frm": "DISTINCT", "kind": "count", "to": "STAR"}``; "" when it is database-bound."""
        from cm_gym.domains.sql import transfer

        return transfer.dumps(transfer.transform_of(a_minus, a_plus))

    def apply_transform(self, task: Task, draft: str, transform: str) -> str | None:
        """Apply a stored transform at the draft's first fitting site (`transfer.apply_transform`)."""
        from cm_gym.domains.sql import transfer

        spec = transfer.loads(transform)
        return transfer.apply_transform(draft, spec) if spec is not None else None

    def canonical_action(self, text: str) -> str:
        """The sqlglot normal form (formatting and keyword case never make two queries differ)."""
        from cm_gym.domains.sql import sqlast

        return sqlast.try_normalize(" ".join(text.split()))

    def parse_action(self, text: str) -> str:
        """The SQL of the reply (`reply_format`: a ```sql block, any block, or a SELECT / WITH
        statement in the prose), without trailing semicolons."""
        return super().parse_action(text).strip().rstrip(";").strip()


def _text_or_none(data: bytes | str) -> str | None:
    """A memoised `apply_contrast` result (JSON: a string or null); anything else is refused."""
    value = boundedjson.loads(data, max_bytes=1 << 20, what="a stored application")
    if value is not None and not isinstance(value, str):
        raise ValueError("not a query or null")
    return value
