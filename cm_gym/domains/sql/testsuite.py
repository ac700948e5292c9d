"""Checking a query on several database instances: the task's database and its generated variants
(`cm_gym.domains.sql.instances`), as in Spider's test-suite accuracy.

A query *matches on an instance* when it runs and its result equals the reference query's result
there (the same comparison as on the task's database, `cm_gym.domains.sql.compare`). A variant
*counts* for a task only where the reference result is well-defined on it:

* the reference query runs there (no error, no budget); and
* when its outermost query has a LIMIT, the rows it keeps do not depend on how SQLite breaks ties:
  the sort keys of the last row kept and the first row cut must differ (`boundary_probe`, for a
  simple SELECT), and the reference is run twice more with every output column appended to its
  ORDER BY, ascending and then descending, and both must return its result (a LIMIT without
  ORDER BY is never well-defined on a variant). Without the first test a copied row that ties
  with the youngest singer made ``ORDER BY age LIMIT 1`` keep one of two equal rows and refused
  the right ``WHERE age = (SELECT MIN(age) ...)``.

Where the reference is ill-defined the variant says nothing about the query (skipped and counted).
The task's own database is not re-checked here: its verdict is the world model's usual one.

Used two ways (both off by default): `SQLEvaluator(instances=N)` offers `confirm_contrast` to
admission (a verified contrast is admitted only if a⁺ matches on every counting variant), and
``verdict_on_instances=True`` makes the final verdict itself need every counting variant.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from cm_gym.domains.sql.compare import Result, compare
from cm_gym.domains.sql.instances import InstanceCache

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class InstanceReport:
    """One query on the variants of one task's database."""

    counted: int  # variants where the reference result is well-defined
    skipped: int  # variants where it is not (see the module docstring)
    wrong: int  # counted variants where the query does not match (a failed run counts as wrong)

    @property
    def matches(self) -> bool:
        return self.wrong == 0

    def as_dict(self) -> dict[str, int]:
        return {
            "instances_counted": self.counted,
            "instances_skipped": self.skipped,
            "instances_wrong": self.wrong,
        }


def tie_breaks(sql: str) -> tuple[str, str] | None:
    """The reference with every output column appended to its top-level ORDER BY, ascending and
    descending; None when it has no top-level LIMIT (nothing to break), "" pair when it has a
    LIMIT but no ORDER BY (never well-defined on a variant)."""
    from sqlglot import exp  # sqlglot on first use: importing the evaluator stays light

    from cm_gym.domains.sql import sqlast

    try:
        tree = sqlast.parse(sql)
    except sqlast.SQLParseError:
        return None
    if not isinstance(tree, exp.Query) or tree.args.get("limit") is None:
        return None
    order = tree.args.get("order")
    if order is None:
        return "", ""
    n = len(tree.selects)
    out = []
    for desc in (False, True):
        copy = tree.copy()
        keys = list(copy.args["order"].expressions)
        keys += [exp.Ordered(this=exp.Literal.number(i + 1), desc=desc) for i in range(n)]
        copy.args["order"].set("expressions", keys)
        out.append(sqlast.to_sql(copy))
    return out[0], out[1]


def boundary_probe(sql: str) -> tuple[str, int] | None:
    """(probe, n) for a reference ``SELECT ... ORDER BY keys LIMIT n``: the same query projecting
    only its sort keys, with LIMIT n + 1. When its rows n and n + 1 are equal the reference cut a
    tie (which of the tied rows it keeps is SQLite's choice, not the question's). None when the
    reference is no such simple SELECT (a compound or DISTINCT query, an OFFSET, a computed LIMIT)."""
    from sqlglot import exp

    from cm_gym.domains.sql import sqlast

    try:
        tree = sqlast.parse(sql)
    except sqlast.SQLParseError:
        return None
    limit, order = tree.args.get("limit"), tree.args.get("order")
    if not isinstance(tree, exp.Select) or limit is None or order is None or tree.args.get("distinct"):
        return None
    value = limit.expression
    if tree.args.get("offset") or not (isinstance(value, exp.Literal) and value.this.isdigit()):
        return None
    n = int(value.this)
    copy = tree.copy()
    copy.set("expressions", [o.this.copy() for o in order.expressions])
    copy.args["limit"].set("expression", exp.Literal.number(n + 1))
    return sqlast.to_sql(copy), n


class _ReferenceRun(Protocol):
    @property
    def result(self) -> Result | None: ...

    @property
    def ordered(self) -> bool: ...


class QueryRunner(Protocol):
    """What an `InstanceChecker` needs of its evaluator (`evaluator.SQLEvaluator`, which holds the
    checker, so this module does not import it): a query's run and a reference's (cached) run."""

    def run(self, path: str, sql: str) -> tuple[Result | None, str, str]: ...

    def reference(self, path: str, sql: str) -> _ReferenceRun: ...


class InstanceChecker:
    """Runs queries on the variants of a task's database through `evaluator`'s sandbox."""

    def __init__(self, evaluator: QueryRunner, cache: InstanceCache) -> None:
        self.evaluator, self.cache = evaluator, cache
        self._defined: dict[tuple[str, str], tuple[Result, bool] | None] = {}

    def reference_on(self, variant: str, reference: str) -> tuple[Result, bool] | None:
        """(result, ordered) of the reference on `variant`, or None where it is ill-defined."""
        key = (variant, reference)
        if key not in self._defined:
            self._defined[key] = self._well_defined(variant, reference)
        return self._defined[key]

    def _well_defined(self, variant: str, reference: str) -> tuple[Result, bool] | None:
        ref = self.evaluator.reference(variant, reference)
        if ref.result is None:
            return None
        probe = boundary_probe(reference)
        if probe is not None:
            rows, status, _ = self.evaluator.run(variant, probe[0])
            n = probe[1]
            if (
                rows is not None
                and status == "ok"
                and len(rows.rows) > n >= 1
                and rows.rows[n - 1] == rows.rows[n]
            ):
                return None  # the LIMIT cuts through tied sort keys
        breaks = tie_breaks(reference)
        if breaks is not None:
            if not breaks[0]:
                return None
            for sql in breaks:
                result, status, _ = self.evaluator.run(variant, sql)
                if result is None or status != "ok" or result.rows != ref.result.rows:
                    return None
        return ref.result, ref.ordered

    def check(self, db_path: str, reference: str, sql: str) -> InstanceReport:
        """Whether `sql` matches the reference on every variant of `db_path` where it is defined."""
        counted = skipped = wrong = 0
        for variant in self.cache.variants(db_path):
            expected = self.reference_on(variant, reference)
            if expected is None:
                skipped += 1
                continue
            counted += 1
            result, status, _ = self.evaluator.run(variant, sql)
            if (
                result is None
                or status != "ok"
                or not compare(result, expected[0], ordered=expected[1]).correct
            ):
                wrong += 1
        return InstanceReport(counted, skipped, wrong)

    def confirm(self, db_path: str, reference: str, a_minus: str, a_plus: str) -> dict[str, Any]:
        """The admission test of a verified contrast: confirmed iff a⁺ matches the reference on
        every counting variant. a⁻ already failed on the task's database (that is why it was
        expanded) and is *not* required to fail on every variant too: the variants are random, and
        one that does not separate a⁻ from the reference would refuse a true repair for nothing.
        So a⁺ never does worse than a⁻ on any instance and does better on the original; how
        many variants a⁻ fails on is reported (``minus_wrong``) but decides nothing."""
        plus = self.check(db_path, reference, a_plus)
        minus = self.check(db_path, reference, a_minus)
        return {"confirmed": plus.matches, **plus.as_dict(), "minus_wrong": minus.wrong}
