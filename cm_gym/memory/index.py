"""Column arrays over a store's records, for NumPy retrieval (`cm_gym.memory.retrieval`).

A `RecordIndex` holds, per record row: the source-task code, the condition code (each distinct
condition text is parsed once), u, and the rank of the record id (for deterministic tie-breaking).
Rows are sorted by (domain, condition), so the domain pre-filter is a contiguous slice and the
records whose condition holds form a few contiguous runs: both are scored without copying rows. It is rebuilt when the set of records changes and only its u column is refreshed
after a reuse update.
"""

from __future__ import annotations

import functools
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from cm_gym.core import workmemo
from cm_gym.core.types import Task, task_text
from cm_gym.core.workmemo import WorkMemo
from cm_gym.domains.conditions import Condition
from cm_gym.memory.record import Record


class RecordSource(Protocol):
    """What retrieval reads: a `RecordStore`, a `FrozenStore`, or any object with these
    attributes (e.g. a synthetic source in a benchmark). A source may also offer
    ``index_columns() -> dict`` (record_ids, source_task_ids, domains, conditions, u) so that an
    index over millions of rows can be built without materialising every `Record`."""

    domain: str
    embedder_id: str
    revision: int
    layout_revision: int

    @property
    def records(self) -> Sequence[Record]: ...

    @property
    def embeddings(self) -> np.ndarray: ...


def source_columns(source: RecordSource) -> dict[str, Any]:
    """The index columns of a source (from `index_columns()` when it has one)."""
    fn = getattr(source, "index_columns", None)
    if callable(fn):
        return dict(fn())
    records = source.records
    return {
        "record_ids": [r.record_id for r in records],
        "source_task_ids": [r.source_task_id for r in records],
        "domains": [r.domain for r in records],
        "conditions": [r.condition for r in records],
        "u": np.fromiter((r.u for r in records), dtype=np.float32, count=len(records)),
    }


def layout_digest(record_ids: Sequence[str], u: np.ndarray) -> str:
    """sha256 naming records (ids) and their u values in index-row order: an ANN index built for
    one layout is never used for another."""
    h = hashlib.sha256()
    for s in range(0, len(record_ids), 65536):
        h.update("\n".join(record_ids[s : s + 65536]).encode("utf-8"))
        h.update(b"\n")
    h.update(np.ascontiguousarray(u, dtype="<f4").tobytes())
    return h.hexdigest()


def _codes(values: Sequence[str]) -> tuple[np.ndarray, list[str], dict[str, int]]:
    uniques: dict[str, int] = {}
    codes = np.fromiter(
        (uniques.setdefault(v, len(uniques)) for v in values), dtype=np.int32, count=len(values)
    )
    return codes, list(uniques), uniques


def _sort_keys(cols: dict[str, Any]) -> tuple[np.ndarray, list[str], np.ndarray, list[str], np.ndarray]:
    dom_codes, dom_names, _ = _codes(cols["domains"])
    cond_codes, cond_texts, _ = _codes(cols["conditions"])
    return dom_codes, dom_names, cond_codes, cond_texts, np.lexsort((cond_codes, dom_codes))


def index_order(cols: dict[str, Any]) -> np.ndarray:
    """Row order of a `RecordIndex` over these columns: positions sorted by (domain code,
    condition code), codes numbered by first appearance (stable, so deterministic)."""
    return _sort_keys(cols)[-1]


@dataclass
class RecordIndex:
    """Column arrays of one layout revision of a source, rows sorted by (domain, condition)."""

    rows: np.ndarray  # index row -> position in source.records
    embeddings: np.ndarray  # (n, dim), rows in index order (a view when already sorted)
    domain_ranges: dict[str, tuple[int, int]]
    cond_starts: dict[str, np.ndarray]  # per domain: row where condition code c starts, c = 0..C
    source_codes: np.ndarray
    source_lookup: dict[str, int]
    cond_codes: np.ndarray
    conditions: list[Condition]
    u: np.ndarray
    id_rank: np.ndarray
    layout_revision: int
    revision: int
    record_ids: Sequence[str] = ()  # in source order (index row i is record_ids[rows[i]])
    holds_cache: OrderedDict[str, np.ndarray] = field(default_factory=OrderedDict)
    _conditions_key: str | None = field(default=None, repr=False)  # "" = not memoisable
    _by_source: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, source: RecordSource, parse: Callable[[str], Condition]) -> RecordIndex:
        """Build from a source; `parse` turns a condition text into a bound `Condition`."""
        cols = source_columns(source)
        n = len(cols["record_ids"])
        dom_codes, dom_names, cond_codes, cond_texts, order = _sort_keys(cols)
        sorted_already = bool(np.all(order == np.arange(n)))
        emb = source.embeddings if sorted_already else source.embeddings[order]
        sorted_dom, sorted_cond = dom_codes[order], cond_codes[order]
        ranges: dict[str, tuple[int, int]] = {}
        starts: dict[str, np.ndarray] = {}
        for code, name in enumerate(dom_names):
            lo, hi = (int(x) for x in np.searchsorted(sorted_dom, [code, code + 1]))
            ranges[name] = (lo, hi)
            starts[name] = lo + np.searchsorted(sorted_cond[lo:hi], np.arange(len(cond_texts) + 1))
        src_codes, _, src_lookup = _codes(cols["source_task_ids"])
        ids = np.asarray(cols["record_ids"], dtype=object)
        id_rank = np.empty(n, dtype=np.int64)
        id_rank[np.argsort(ids[order].astype(str), kind="stable")] = np.arange(n)
        return cls(
            rows=order,
            embeddings=emb,
            domain_ranges=ranges,
            cond_starts=starts,
            source_codes=src_codes[order],
            source_lookup=src_lookup,
            cond_codes=sorted_cond,
            conditions=[parse(t) for t in cond_texts],
            u=np.asarray(cols["u"], dtype=np.float32)[order],
            id_rank=id_rank,
            layout_revision=source.layout_revision,
            revision=source.revision,
            record_ids=cols["record_ids"],
        )

    def digest(self) -> str:
        """`layout_digest` of this index's rows (what an ANN index must have been built for)."""
        ids = self.record_ids
        return layout_digest([ids[int(i)] for i in self.rows], self.u)

    def source_rows(self, code: int) -> np.ndarray:
        """Index rows whose source-task code is `code` (grouped once, on first use)."""
        if self._by_source is None:
            order = np.argsort(self.source_codes, kind="stable")
            bounds = np.searchsorted(self.source_codes[order], np.arange(len(self.source_lookup) + 1))
            self._by_source = (order, bounds)
        order, bounds = self._by_source
        return order[bounds[code] : bounds[code + 1]]

    def refresh_u(self, source: RecordSource) -> None:
        """After reuse updates (same records, new u values)."""
        self.u = np.asarray(source_columns(source)["u"], dtype=np.float32)[self.rows]
        self.revision = source.revision

    def holds_vector(self, task: Task, cache_size: int = 8192) -> np.ndarray:
        """Per distinct condition: does it hold for `task`? (evaluated once per task, cached in
        this process and, for conditions of cm_gym's own predicates, in the work memo)."""
        holds = self.holds_cache.get(task.task_id)
        if holds is None:
            holds = _holds_through_memo(self, task)
            self.holds_cache[task.task_id] = holds
            if len(self.holds_cache) > cache_size:
                self.holds_cache.popitem(last=False)
        return holds

    def holds_mask(self, task: Task, lo: int, hi: int) -> np.ndarray:
        """Boolean mask over rows [lo, hi): the record's condition holds for `task`."""
        return self.holds_vector(task)[self.cond_codes[lo:hi]]

    def eligible_spans(self, task: Task, domain: str) -> list[tuple[int, int]]:
        """Contiguous row spans of `domain` whose condition holds for `task` (rows are sorted by
        condition, so each holding condition is one run; adjacent runs are merged)."""
        starts = self.cond_starts[domain]
        spans: list[tuple[int, int]] = []
        for c in np.flatnonzero(self.holds_vector(task)):
            s, e = int(starts[c]), int(starts[c + 1])
            if e <= s:
                continue
            if spans and spans[-1][1] == s:
                spans[-1] = (spans[-1][0], e)
            else:
                spans.append((s, e))
        return spans


# -- the work memo of condition verdicts (`cm_gym.core.workmemo`) ------------------------------
#: where a predicate must be defined for its verdicts to be kept across processes: the version of
#: the memo is the digest of this package's source, so a plugin's predicate (elsewhere) is not
_OWN_PREDICATES = "cm_gym.domains."
_HOLDS_MEMO: list[WorkMemo] = []


def _is_own(fn: Any) -> bool:
    """Whether a predicate is a function of cm_gym's domains package (seen through the argument-
    free `functools.partial` that `domains.base.described` wraps it in)."""
    if isinstance(fn, functools.partial):
        if fn.args or fn.keywords:
            return False
        fn = fn.func
    return str(getattr(fn, "__module__", "") or "").startswith(_OWN_PREDICATES)


def _evaluate(conditions: Sequence[Condition], task: Task) -> np.ndarray:
    return np.fromiter((c.holds(task) for c in conditions), dtype=bool, count=len(conditions))


def _holds_through_memo(index: RecordIndex, task: Task) -> np.ndarray:
    """`_evaluate`, kept in the work memo by (the conditions' texts, the task's content) when
    every predicate is cm_gym's own: a predicate is a pure function of the task (SPEC §3), and
    a fresh process evaluates the same conditions on the same tasks again."""
    if index._conditions_key is None:
        own = all(_is_own(fn) for c in index.conditions for fn in c.fns)
        texts = "\n".join(c.text for c in index.conditions)
        index._conditions_key = hashlib.sha256(texts.encode()).hexdigest() if own else ""
    if not index._conditions_key or not workmemo.enabled():
        return _evaluate(index.conditions, task)
    if not _HOLDS_MEMO:
        from cm_gym.domains.base import Domain, source_digest

        _HOLDS_MEMO.append(WorkMemo("conditions", source_digest(Domain)))
    n = len(index.conditions)

    def decode(data: bytes | str) -> np.ndarray:
        if not isinstance(data, bytes) or len(data) != n or set(data) - {0, 1}:
            raise ValueError("not this index's condition verdicts")
        return np.frombuffer(data, dtype=np.uint8).astype(bool)

    return _HOLDS_MEMO[0].cached(
        workmemo.memo_key("holds", index._conditions_key, task_text(task)),
        lambda: _evaluate(index.conditions, task),
        lambda holds: holds.astype(np.uint8).tobytes(),
        decode,
    )
