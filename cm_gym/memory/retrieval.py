"""Retrieval (paper Eq. 7–8, SPEC §3): eligible records first, then rank by cos + λ_reuse·u.

Eligibility is decided *before* ranking: a record is eligible for task x iff its source task is not
x and its condition holds for x (the condition part is skipped when ``use_conditions=False`` — the
one switch of the condition ablation, which also drops the condition from rendered records via
`record_view(..., show_condition=False)`). Ranking is r = cos(φ(s), φ(q)) + λ·u, top k, ties broken by
record id, where φ(s) embeds the decision's question and memory-free draft
(`Domain.retrieval_text`), not the environment context: ranking on a schema would rank records by
the database they came from. Everything is NumPy over column arrays (`RecordIndex`); the domain
pre-filter is a contiguous slice, condition results are cached per (condition, task), and on large
stores only the contiguous runs of rows whose condition holds are scored.

On a large frozen store that carries an ANN index (`cm_gym.memory.ann`, the optional extra
``cm-gym[ann]``), matched retrieval keeps the same order of operations: the eligible rows are
decided first (condition spans minus this task's own rows, as a bitmap), the index searches only
those rows for `CANDIDATES` candidates ranked by cos + λ·u, and the candidates are re-ranked
exactly. When at most ``exact_max_rows`` rows are eligible (or the index finds fewer than k), the
exact scan above is used, so small stores and selective conditions give exact results.

Every mode offers only *fresh* records (`cm_gym.memory.freshness`): never a retired one, and,
given ``env_versions``, never one verified against another version of its environment than the
current one. A store with nothing to exclude is searched exactly as without the filter.

Ablation modes: ``"matched"`` (the method), ``"random"`` (k random records: no state matching and
no condition filter), ``"shuffled"`` (the records matched to a *different* situation: a seeded
random other stored situation is used as the query; no condition filter, since the conditions
belong to that other match), ``"none"`` (nothing). Every mode still excludes the task's own
records (SPEC §7).
"""

from __future__ import annotations

import logging
import zlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from cm_gym.agent import RecordView
from cm_gym.core.types import TRUNCATION, Task, truncate
from cm_gym.domains.base import Domain, PredicateFn
from cm_gym.domains.conditions import Condition, parse_condition_or_none
from cm_gym.memory import ann as ann_mod
from cm_gym.memory.embedding import Embedder
from cm_gym.memory.freshness import EnvVersions, FreshView, needs_filter
from cm_gym.memory.index import RecordIndex, RecordSource
from cm_gym.memory.record import Record, evidence_text

logger = logging.getLogger(__name__)

MODES = ("matched", "random", "shuffled", "none")
_GATHER_FRACTION = 0.25  # below this eligible fraction, gather rows instead of scoring the slice
_CHUNK = 16384
_SPAN_MIN_ROWS = 4096  # from this many rows on, score only the runs whose condition holds
_BITMAP_CACHE = 16  # eligibility bitmaps kept per retriever (one per recent task)
_logged: set[str] = set()


def _log_once(key: str, level: int, msg: str, *args: object) -> None:
    if key not in _logged:
        _logged.add(key)
        logger.log(level, msg, *args)


@dataclass(frozen=True)
class Retrieved:
    """One retrieved record: `relevance` = cos(state, q), `rank_score` = the score it was ranked by."""

    record: Record
    relevance: float
    rank_score: float


def _local_render(fields: Mapping[str, str], show_condition: bool) -> str:
    lines = [
        f"Situation: {fields['situation']}",
        f"Failed action: {fields['a_minus']}",
        f"Verified improvement: {fields['a_plus']}",
        f"Evidence: {fields['evidence']}",
    ]
    if show_condition:
        lines.append(f"Applies when: {fields['condition'] or 'always (no condition)'}")
    return "\n".join(lines)


def render_record_text(record: Record, show_condition: bool = True) -> str:
    """The record as prompt text via `cm_gym.llm.prompts.render_record` (RECORD_RENDER /
    RECORD_RENDER_NO_CONDITION); a local formatter with the same fields if that is unavailable."""
    try:
        from cm_gym.llm.prompts import render_record
    except ImportError:
        fields = {
            "situation": record.situation,
            "a_minus": record.a_minus,
            "a_plus": record.a_plus,
            "evidence": evidence_text(record.evidence),
            "condition": record.condition,
        }
        return truncate(_local_render(fields, show_condition), TRUNCATION["record"])
    fields_obj = {
        "situation": record.situation,
        "a_minus": record.a_minus,
        "a_plus": record.a_plus,
        "evidence": dict(record.evidence),
        "condition": record.condition,
    }
    return truncate(render_record(fields_obj, show_condition=show_condition), TRUNCATION["record"])


def record_view(record: Record, show_condition: bool = True) -> RecordView:
    """What the agent may see of a record (rendered with or without its condition clause)."""
    return RecordView(
        record.record_id,
        render_record_text(record, show_condition),
        record.a_minus,
        record.a_plus,
        record.transform,
    )


def query_text(task: Task, state_text: str) -> str:
    """The task prompt plus the state text: the observation's state embedding E(s_t), and the
    retrieval query when no draft is given (the decision query is `Domain.retrieval_text`)."""
    if not state_text:
        return task.prompt
    return state_text if task.prompt in state_text else f"{task.prompt}\n{state_text}"


def _matvec(emb: np.ndarray, lo: int, hi: int, q: np.ndarray) -> np.ndarray:
    """emb[lo:hi] @ q in float32 (float16 matrices are converted in chunks)."""
    if emb.dtype == np.float32:
        return emb[lo:hi] @ q
    scores = np.empty(hi - lo, dtype=np.float32)
    for s in range(lo, hi, _CHUNK):
        e = min(hi, s + _CHUNK)
        scores[s - lo : e - lo] = emb[s:e].astype(np.float32) @ q
    return scores


class Retriever:
    """Retrieves ≤ k eligible records for a task and state from a store (or snapshot)."""

    def __init__(
        self,
        store: RecordSource,
        domain: Domain | str | Mapping[str, PredicateFn] | None = None,
        *,
        k: int = 3,
        lambda_reuse: float = 0.2,
        use_conditions: bool = True,
        mode: str = "matched",
        seed: int = 0,
        embedder: Embedder | None = None,
        exact_max_rows: int = ann_mod.EXACT_MAX_ROWS,
        env_versions: EnvVersions | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"retrieval mode must be one of {MODES}, got {mode!r}")
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        if needs_filter(store, env_versions):  # retired or out-of-date records are never offered
            store = FreshView(store, env_versions)
        self.store, self.k, self.lambda_reuse = store, int(k), float(lambda_reuse)
        self.use_conditions, self.mode, self.seed = bool(use_conditions), mode, int(seed)
        self.domain: Domain | None = self._domain(domain)
        self.predicates = self.domain.condition_predicates() if self.domain else self._predicates(domain)
        self.embedder = embedder or Embedder.from_id(store.embedder_id)
        self.embedder.check_compatible(store.embedder_id, getattr(store, "dim", None) or self.embedder.dim)
        self._parsed: dict[str, Condition] = {}
        self._index: RecordIndex | None = None
        self.exact_max_rows = int(exact_max_rows)
        self._ann: ann_mod.AnnIndex | None = None
        self._bitmaps: OrderedDict[tuple[str, bool], np.ndarray] = OrderedDict()

    @staticmethod
    def _domain(domain: Domain | str | Mapping[str, PredicateFn] | None) -> Domain | None:
        if isinstance(domain, str):
            from cm_gym.domains.registry import get_domain

            return get_domain(domain)
        return domain if isinstance(domain, Domain) else None

    @staticmethod
    def _predicates(domain: Domain | str | Mapping[str, PredicateFn] | None) -> Mapping[str, PredicateFn]:
        return domain if isinstance(domain, Mapping) else {}

    def parse(self, text: str) -> Condition:
        """The record condition, parsed once per distinct text (unparseable → none, logged)."""
        cond = self._parsed.get(text)
        if cond is None:
            cond = parse_condition_or_none(text, self.predicates)
            self._parsed[text] = cond
        return cond

    @property
    def index(self) -> RecordIndex:
        """The column index, rebuilt when the store's records change (u refreshed on reuse)."""
        idx, src = self._index, self.store
        if idx is None or idx.layout_revision != src.layout_revision:
            idx = self._index = RecordIndex.build(src, self.parse)
            self._bitmaps.clear()
            self._ann = self._attach_ann(idx)
        elif idx.revision != src.revision:
            idx.refresh_u(src)
            self._ann = None  # the index ranks with the u values it was built with
        return idx

    @property
    def ann(self) -> ann_mod.AnnIndex | None:
        """The ANN index in use (None: every query is scored exactly)."""
        _ = self.index
        return self._ann

    def _attach_ann(self, idx: RecordIndex) -> ann_mod.AnnIndex | None:
        """The source's ANN index, if it has one built for exactly these rows."""
        n = len(idx.rows)
        found = getattr(self.store, "ann_index", None)
        if found is None:
            if n >= ann_mod.ANN_MIN_RECORDS:
                _log_once(
                    f"exact:{getattr(self.store, 'path', id(self.store))}",
                    logging.INFO,
                    "retrieval scans all %d records exactly: the store has no ANN index "
                    "(pip install 'cm-gym[ann]' and freeze the snapshot again)",
                    n,
                )
            return None
        if found.n != n or found.digest != idx.digest():
            logger.warning(
                "the store's ANN index was built for other records or u values; retrieval scans exactly"
            )
            return None
        if idx.source_lookup:
            idx.source_rows(0)  # group rows by source task now, not in the first query
        return found

    def query_embedding(self, task: Task, state_text: str, draft: str | None = None) -> np.ndarray:
        """φ(s): the domain's `retrieval_text` (question + draft) when a draft is given and the
        retriever knows its domain, else the prompt plus the state text."""
        return self.embedder.embed_one(self.embedded_text(task, state_text, draft))

    def embedded_text(self, task: Task, state_text: str, draft: str | None = None) -> str:
        """The text `query_embedding` embeds (so a caller can embed it together with others)."""
        if draft is not None and self.domain is not None:
            return self.domain.retrieval_text(task, draft, state_text)
        return query_text(task, state_text)

    # -- retrieval ----------------------------------------------------------------------------
    def retrieve(
        self,
        task: Task,
        state_text: str = "",
        *,
        query: np.ndarray | None = None,
        draft: str | None = None,
    ) -> list[Retrieved]:
        """≤ k records for this decision, best first (see the module docstring for the modes).
        `query` is a precomputed φ(s); otherwise it is embedded from the draft (see
        `query_embedding`)."""
        if self.mode == "none" or self.k == 0:
            return []
        idx = self.index
        lo, hi = idx.domain_ranges.get(task.domain, (0, 0))
        if hi <= lo:
            return []
        q = (
            self.query_embedding(task, state_text, draft)
            if query is None
            else np.asarray(query, dtype=np.float32)
        )
        if self.mode == "matched" and self.use_conditions and hi - lo >= _SPAN_MIN_ROWS:
            return self._matched_spans(idx, task, q, lo)
        if self.mode == "matched" and self._ann is not None and hi - lo > self.exact_max_rows:
            spans = idx.eligible_spans(task, task.domain) if self.use_conditions else [(lo, hi)]
            got = self._ann_retrieve(idx, task, q, lo, spans)
            if got is not None:
                return got
        eligible = self._other_task_mask(idx, task, lo, hi)
        if self.mode == "matched":
            if self.use_conditions:
                eligible &= idx.holds_mask(task, lo, hi)
            cand = np.flatnonzero(eligible)
            if cand.size == 0:
                return []
            cos = self._cos(idx, q, lo, hi, cand)
            rank = cos + self.lambda_reuse * idx.u[lo + cand]
            return self._materialise(idx, lo, *self._select(idx, lo, cand, cos, rank))
        cand = np.flatnonzero(eligible)
        if cand.size == 0:
            return []
        rng = np.random.default_rng(
            [self.seed, zlib.crc32(task.task_id.encode()), zlib.crc32(state_text.encode("utf-8", "replace"))]
        )
        if self.mode == "random":
            pick = np.sort(rng.choice(cand, size=min(self.k, cand.size), replace=False))
            cos = self._cos(idx, q, lo, hi, pick)
            rank = cos + self.lambda_reuse * idx.u[lo + pick]
            return self._materialise(idx, lo, *self._select(idx, lo, pick, cos, rank))
        # shuffled: the records matched to a random *other* stored situation; relevance stays the
        # true similarity to this state, so the selector is not told the records were re-assigned
        pseudo = np.asarray(idx.embeddings[lo + int(rng.choice(cand))], dtype=np.float32)
        pseudo_cos = self._cos(idx, pseudo, lo, hi, cand)
        chosen, _, rank = self._select(
            idx, lo, cand, pseudo_cos, pseudo_cos + self.lambda_reuse * idx.u[lo + cand]
        )
        true_cos = np.asarray(idx.embeddings[lo + chosen], dtype=np.float32) @ q
        return self._materialise(idx, lo, chosen, true_cos, rank)

    def _matched_spans(self, idx: RecordIndex, task: Task, q: np.ndarray, lo: int) -> list[Retrieved]:
        """Matched retrieval on a large store: score only the contiguous runs of rows whose
        condition holds (no row copies), then drop this task's own records."""
        spans = idx.eligible_spans(task, task.domain)
        if not spans:
            return []
        got = self._ann_retrieve(idx, task, q, lo, spans)
        if got is not None:
            return got
        pos = np.concatenate([np.arange(s, e) for s, e in spans])
        cos = np.concatenate([_matvec(idx.embeddings, s, e, q) for s, e in spans])
        code = idx.source_lookup.get(task.task_id, -1)
        if code >= 0:
            keep = idx.source_codes[pos] != code
            pos, cos = pos[keep], cos[keep]
        if pos.size == 0:
            return []
        rank = cos + self.lambda_reuse * idx.u[pos]
        return self._materialise(idx, lo, *self._select(idx, lo, pos - lo, cos, rank))

    def _ann_retrieve(
        self, idx: RecordIndex, task: Task, q: np.ndarray, lo: int, spans: list[tuple[int, int]]
    ) -> list[Retrieved] | None:
        """Filtered ANN search over the eligible rows (`spans` minus this task's own rows), then
        exact re-ranking of the candidates. None (: scan exactly) without an index, when at most
        `exact_max_rows` rows are eligible, or when the search found fewer than k."""
        ann = self._ann
        eligible = sum(e - s for s, e in spans)
        if ann is None or eligible <= self.exact_max_rows:
            return None
        key = (task.task_id, self.use_conditions)
        bits = self._bitmaps.get(key)
        code = idx.source_lookup.get(task.task_id, -1)
        everything = spans == [(0, ann.n)] and code < 0
        if bits is None and not everything:
            bits = ann_mod.spans_bitmap(ann.n, spans)
            if code >= 0:
                ann_mod.clear_rows(bits, idx.source_rows(code))
            self._bitmaps[key] = bits
            if len(self._bitmaps) > _BITMAP_CACHE:
                self._bitmaps.popitem(last=False)
        elif bits is not None:
            self._bitmaps.move_to_end(key)
        want = max(ann_mod.CANDIDATES, 4 * self.k)
        cand = ann.search(q, self.lambda_reuse, want, None if everything else bits, eligible / ann.n)
        if bits is not None and cand.size:  # never trust a filter blindly: drop any row outside it
            cand = cand[(bits[cand >> 3] >> (cand & 7)) & 1 == 1]
        if cand.size < min(self.k, eligible):
            return None
        cand = np.sort(cand)
        cos = np.asarray(idx.embeddings[cand], dtype=np.float32) @ q
        rank = cos + self.lambda_reuse * idx.u[cand]
        return self._materialise(idx, lo, *self._select(idx, lo, cand - lo, cos, rank))

    @staticmethod
    def _other_task_mask(idx: RecordIndex, task: Task, lo: int, hi: int) -> np.ndarray:
        code = idx.source_lookup.get(task.task_id, -1)
        if code < 0:
            return np.ones(hi - lo, dtype=bool)
        return idx.source_codes[lo:hi] != code

    @staticmethod
    def _cos(idx: RecordIndex, q: np.ndarray, lo: int, hi: int, cand: np.ndarray) -> np.ndarray:
        """cos(q, E[lo + cand]) as float32 (rows are unit-norm): scores the whole slice, or gathers
        the candidate rows when few are eligible; float16 matrices are scored in float32 chunks."""
        emb = idx.embeddings
        if cand.size < _GATHER_FRACTION * (hi - lo):
            return np.asarray(emb[lo + cand], dtype=np.float32) @ q
        scores = _matvec(emb, lo, hi, q)
        return scores[cand] if cand.size < hi - lo else scores

    def _select(
        self, idx: RecordIndex, lo: int, cand: np.ndarray, cos: np.ndarray, rank: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top k of `cand` by rank desc, ties by record id asc (exact, also at the cut-off)."""
        k = self.k
        if cand.size > k:
            kth = np.partition(rank, cand.size - k)[cand.size - k]
            keep = rank >= kth
            cand, cos, rank = cand[keep], cos[keep], rank[keep]
        order = np.lexsort((idx.id_rank[lo + cand], -rank))[:k]
        return cand[order], cos[order], rank[order]

    def _materialise(
        self, idx: RecordIndex, lo: int, chosen: np.ndarray, cos: np.ndarray, rank: np.ndarray
    ) -> list[Retrieved]:
        records = self.store.records
        return [
            Retrieved(records[int(idx.rows[lo + c])], float(s), float(r))
            for c, s, r in zip(chosen, cos, rank, strict=True)
        ]
