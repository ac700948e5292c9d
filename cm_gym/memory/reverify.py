"""Re-verification of a frozen store on a changed environment (``cm-gym memory reverify``).

Each record's contrast is re-run through the world model on the changed environment, from a fresh
copy of its source task's state: a⁻ and a⁺ are checked as construction checked them (paper Eq. 2;
the world models score an action against the task and its environment, not against earlier
attempts, so the record's original decision state and a fresh one give the same outcome). Then:

* **valid** — a⁺ still improves on a⁻ by more than ε_adm: the record is kept, stamped with the
  changed environment's content version (`Domain.environment_version`);
* **repairable** — it does not, but one local edit of a⁺, proposed by the same Module-I search
  (`AlternativeGenerator`: LLM edits first, then the domain's adaptation edits for the changed
  environment, `Domain.adaptation_edits`, then its edit operators, up to K), restores an
  improvement over a⁻. Where the same edit also applies to a⁻ (`Domain.apply_contrast` of a⁺ →
  a⁺′ onto a⁻) and the contrast survives it, the repaired record is (a⁻′, a⁺′), so it keeps
  *one* correction; else (a⁻, a⁺′). It is distilled again (DISTIL_RECORD, on the changed source
  task) into a new record that names the old one (`Record.replaces`); the old one is retired with
  the reason "repaired by <id>";
* **stale** — neither: the record is retired (`Record.status` = "retired") with the reason kept;
* **unverifiable** — its source task is not in the changed environment: kept as it was (its
  version is then the old one, and retrieval's version filter decides, `memory.freshness`).

A frozen snapshot is never changed: the result is a NEW snapshot (every record of the source, in
its order, with its u and statistics, plus the repaired records) with a sidecar
``<snapshot>.reverify.json`` holding every verdict and the cost. Writing it is atomic (the
snapshot lands by rename, `RecordStore.freeze`); a failure leaves no partial output.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from cm_gym.agent import Cost
from cm_gym.core import boundedjson
from cm_gym.core.types import TRUNCATION, Action, AgentState, Evaluator, Outcome, Task, check_all, truncate
from cm_gym.domains.base import Domain
from cm_gym.llm.base import LLM
from cm_gym.memory.alternatives import AlternativeGenerator
from cm_gym.memory.construction import ProgressFn
from cm_gym.memory.distill import Distiller
from cm_gym.memory.embedding import Embedder
from cm_gym.memory.errors import StoreError
from cm_gym.memory.provenance import provenance_of
from cm_gym.memory.record import Record, evidence_text
from cm_gym.memory.store import RecordStore
from cm_gym.memory.view import StoreView

logger = logging.getLogger(__name__)

STATUSES = ("valid", "repairable", "stale", "unverifiable")
REPORT_FORMAT = "cm_gym.memory.reverify/1"
#: a reverify report (counts and verdicts per record) read back
MAX_REPORT_BYTES = 64 * 1024 * 1024


def report_path(snapshot: str | Path) -> Path:
    """Where the verdicts of a reverified snapshot live: ``<snapshot>.reverify.json``."""
    p = Path(snapshot)
    return p.with_name(p.name + ".reverify.json")


@dataclass(frozen=True)
class Verdict:
    """What re-verification found for one record (scores on the changed environment)."""

    record_id: str
    status: str
    reason: str
    score_minus: float | None = None
    score_plus: float | None = None
    repaired_id: str | None = None
    repaired_a_minus: str | None = None
    repaired_a_plus: str | None = None


@dataclass
class ReverifySummary:
    """Verdicts, their counts and the cost of one re-verification."""

    verdicts: list[Verdict] = field(default_factory=list)
    evaluator_calls: int = 0
    llm_calls: int = 0
    tokens: int = 0
    seconds: float = 0.0
    records_in: int = 0
    records_out: int = 0
    environment: str = ""

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(v.status == s for v in self.verdicts) for s in STATUSES}

    def format(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in self.counts.items())
        return (
            f"{self.records_in} records re-verified on {self.environment}: {counts}; "
            f"{self.evaluator_calls} evaluator calls, {self.llm_calls} LLM calls, {self.tokens} tokens, "
            f"{self.seconds:.1f} s"
        )

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "verdicts"}
        out["counts"] = self.counts
        out["verdicts"] = [asdict(v) for v in self.verdicts]
        return out


@dataclass(frozen=True)
class ReverifyConfig:
    """K alternatives for a repair, ε_adm, whether to look for repairs at all, the agent kind whose
    prompts the Module-I search uses, and whether the generator may ask the LLM."""

    K: int = 4
    epsilon_adm: float = 0.05
    repair: bool = True
    agent_kind: str = "react"
    use_llm_alternatives: bool = True


class Reverifier:
    """Checks one record's contrast on its changed source task and looks for a one-edit repair."""

    def __init__(
        self, domain: Domain, evaluator: Evaluator, llm: LLM, config: ReverifyConfig | None = None
    ) -> None:
        self.domain, self.evaluator, self.cfg = domain, evaluator, config or ReverifyConfig()
        self.generator = AlternativeGenerator(
            llm, domain, self.cfg.K, use_llm=self.cfg.use_llm_alternatives, adapt=True
        )
        self.distiller = Distiller(llm, domain)
        self.cost = Cost()

    def _check(self, state: AgentState, actions: Sequence[str]) -> list[Outcome]:
        self.cost.evaluator_calls += len(actions)
        return check_all(self.evaluator, state, [Action(a) for a in actions])

    def _improves(self, minus: Outcome, plus: Outcome) -> bool:
        return plus.completed and plus.score - minus.score > self.cfg.epsilon_adm

    def verify(self, record: Record, task: Task | None, order: int) -> tuple[Verdict, Record | None]:
        """(verdict, the repaired record or None) for `record` on its changed source `task`."""
        if task is None:
            return Verdict(
                record.record_id, "unverifiable", "its source task is not in the changed environment"
            ), None
        state = AgentState(task)
        minus, plus = self._check(state, [record.a_minus, record.a_plus])
        scores = {"score_minus": float(minus.score), "score_plus": float(plus.score)}
        if self._improves(minus, plus):
            return Verdict(record.record_id, "valid", "a+ still improves on a-", **scores), None
        why = f"a+ no longer improves: score {minus.score:.2f} -> {plus.score:.2f}" + (
            f" ({plus.status}: {truncate(plus.reason or plus.feedback, 120)})" if not plus.completed else ""
        )
        if not self.cfg.repair or self.cfg.K <= 0:
            return Verdict(record.record_id, "stale", why, **scores), None
        repaired = self._repair(state, record, minus, plus, order)
        if repaired is None:
            return Verdict(
                record.record_id, "stale", why + "; no local edit of a+ restores it", **scores
            ), None
        verdict = Verdict(
            record.record_id,
            "repairable",
            why + f"; repaired by {repaired.record_id}",
            repaired_id=repaired.record_id,
            repaired_a_minus=repaired.a_minus,
            repaired_a_plus=repaired.a_plus,
            **scores,
        )
        return verdict, repaired

    def _repair(
        self, state: AgentState, record: Record, minus: Outcome, plus: Outcome, order: int
    ) -> Record | None:
        alternatives = self.generator.generate(
            state, record.a_plus, plus, self.cost, agent_kind=self.cfg.agent_kind
        )
        alternatives = [a for a in alternatives if a.text.strip() != record.a_minus.strip()]
        if not alternatives:
            return None
        outcomes = self._check(state, [a.text for a in alternatives])
        best = max(
            ((a, o) for a, o in zip(alternatives, outcomes, strict=True) if self._improves(minus, o)),
            key=lambda pair: pair[1].score,
            default=None,
        )
        if best is None:
            return None
        alt, o_plus = best
        a_plus = alt.text
        a_minus, o_minus = record.a_minus, minus
        # provenance: an LLM's edit of a⁺ is marked by its reply, a rule-based one is an edit;
        # a⁻ keeps its mark unless the contrast was carried onto it (a rule-based edit then)
        plus_mark = "edit" if alt.source == "rule" else provenance_of(alt.mark, revision=True)
        minus_mark = record.a_minus_provenance
        blind = replace(state.task, reference="")
        moved = self.domain.apply_contrast(blind, record.a_minus, record.a_plus, a_plus)
        if moved is not None and moved.strip() not in (record.a_minus.strip(), a_plus.strip()):
            (o_moved,) = self._check(state, [moved])
            if o_moved.completed and self._improves(o_moved, o_plus):
                a_minus, o_minus = moved, o_moved  # the same edit carried to a-: one contrast again
                minus_mark = "edit"
        evidence = {
            "score_minus": float(o_minus.score),
            "score_plus": float(o_plus.score),
            "graded_minus": float(o_minus.graded_score),
            "graded_plus": float(o_plus.graded_score),
            "feedback_minus": truncate(o_minus.feedback, TRUNCATION["feedback"]),
            "feedback_plus": truncate(o_plus.feedback, TRUNCATION["feedback"]),
        }
        situation, condition = self.distiller.distil(
            state, a_minus, a_plus, evidence_text(evidence), self.cost, agent_kind=self.cfg.agent_kind
        )
        return Record.create(
            domain=self.domain.name,
            source_task_id=record.source_task_id,
            env_id=state.task.env_id,
            situation=situation,
            a_minus=a_minus,
            a_plus=a_plus,
            evidence=evidence,
            condition=condition.text,
            contrast_key=self.domain.contrast_key(a_minus, a_plus),
            delta=float(o_plus.score - o_minus.score),
            admission_score=record.admission_score,
            created_order=order,
            env_version=self.domain.environment_version(state.task),
            replaces=record.record_id,
            a_minus_provenance=minus_mark,
            a_plus_provenance=plus_mark,
            transform=self.domain.transform_of(state.task, a_minus, a_plus),
        )


def reverify_store(
    source: StoreView,
    out: str | Path,
    tasks: Sequence[Task],
    domain: Domain,
    evaluator: Evaluator,
    llm: LLM,
    config: ReverifyConfig | None = None,
    *,
    environment: str = "",
    overwrite: bool = False,
    progress: ProgressFn | None = None,
    meta: Mapping[str, str] | None = None,
) -> ReverifySummary:
    """Re-verify every record of `source` on the changed `tasks` and write the result as a NEW
    frozen snapshot at `out` (plus ``<out>.reverify.json``); `source` is only read."""
    out = Path(out)
    if out.exists() and not overwrite:
        raise StoreError(f"{out} exists; pass overwrite=True (or choose another path)")
    if source.path.resolve() == out.resolve():
        raise StoreError("reverify writes a new snapshot: the output cannot be the source store")
    if source.domain != domain.name:
        raise StoreError(f"{source.path} holds {source.domain!r} records, not {domain.name!r}")
    by_id = {t.task_id: t for t in tasks}
    checker = Reverifier(domain, evaluator, llm, config)
    summary = ReverifySummary(records_in=len(source), environment=environment)
    started = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp,
        RecordStore(
            Path(tmp) / "work.sqlite",
            domain=source.domain,
            benchmark=source.benchmark or None,
            capacity=source.capacity,
            embedder=Embedder.from_id(source.embedder_id),
        ) as store,
    ):
        for key, value in {
            **{k: v for k, v in source.meta.items() if k == "build_settings"},
            **(meta or {}),
        }.items():
            store.set_meta(key, value)
        store.set_meta("reverified_from", str(getattr(source, "manifest", {}).get("sha256", source.path)))
        store.set_meta("reverified_on", environment)
        order = max((r.created_order for r in source.records), default=-1) + 1
        records = source.records
        source_ids = {r.record_id for r in records}
        for i, record in enumerate(records, start=1):
            task = by_id.get(record.source_task_id)
            verdict, repaired = checker.verify(record, task, order)
            summary.verdicts.append(verdict)
            kept = record
            if verdict.status == "valid":
                kept = replace(record, env_version=domain.environment_version(task))  # type: ignore[arg-type]
            elif verdict.status in ("stale", "repairable"):
                kept = replace(record, status="retired", status_reason=verdict.reason)
            store.add(kept, embedding=source.embedding_of(record.record_id))
            if repaired is not None:
                if repaired.record_id in source_ids or repaired.record_id in store:  # already there
                    logger.info("repair of %s equals stored record %s", record.record_id, repaired.record_id)
                else:
                    store.add(repaired)
                    order += 1
            if progress is not None:
                progress(i, len(records))
        summary.records_out = len(store)
        summary.evaluator_calls = checker.cost.evaluator_calls
        summary.llm_calls, summary.tokens = checker.cost.llm_calls, checker.cost.tokens
        summary.seconds = time.perf_counter() - started
        store.set_meta("reverify", json.dumps({"counts": summary.counts, "environment": environment}))
        store.freeze(out, overwrite=overwrite)
    side = report_path(out)
    payload = {"format": REPORT_FORMAT, "source": str(source.path), "snapshot": str(out), **summary.to_dict()}
    tmp_side = side.with_name(f".{side.name}.{os.getpid()}.tmp")
    tmp_side.write_text(json.dumps(payload, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp_side, side)
    logger.info("%s", summary.format())
    return summary


def read_report(snapshot: str | Path) -> dict[str, Any]:
    """The verdicts written next to a reverified snapshot (StoreError when missing or malformed)."""
    path = report_path(snapshot)
    try:
        data = boundedjson.load_file(path, max_bytes=MAX_REPORT_BYTES)
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path} is not a readable reverify report: {exc}") from None
    if data.get("format") != REPORT_FORMAT:
        raise StoreError(f"{path} is not a cm_gym reverify report")
    return data
