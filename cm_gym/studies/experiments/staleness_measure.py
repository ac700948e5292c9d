"""What the `staleness` study measures from its units: re-verification's verdicts against a rebuild
on the changed environment, and the harm records flagged stale cause when kept.

*Against a rebuild*, twice. (1) The store rebuilt: construction from scratch on the changed
environment (same source tasks, seeds and settings) logs every contrast it verified (Δ > ε_adm,
before admission). (2) The decision rebuilt (`decision_truth`): construction's own Module I + II
run again at the record's decision only — its a⁻ checked on the changed environment, up to K
local alternatives of a⁻ proposed by the construction generator and verified — so the answer
does not depend on which path the rest of a rebuild took. For each record, each says:

* "holds" — the rebuild verified the same (a⁻, a⁺) (canonical forms, `Domain.canonical_action`);
* "changed" — it did not, but it verified a contrast with the same contrast key on the record's
  source task: the correction still holds there, written against the changed environment;
* "gone" — neither: the correction does not hold on the changed environment.

Re-verification *detects* a record that no longer holds as stored when it calls it stale or
repairable; the positives are the "changed" and "gone" records. It *retires* correctly when it
calls a "gone" record stale. A rebuild also differs from the old build where construction-time
reuse took another path after an earlier change (the control family, whose changes leave every
record valid, shows how often), so (1) is a lower bound on agreement; (2) has no such drift.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from cm_gym.domains.base import Domain
from cm_gym.memory.record import Record

TRUTHS = ("holds", "changed", "gone")


@dataclass(frozen=True)
class Agreement:
    """Confusion counts (reverify status × rebuild truth) and the two precision/recall pairs."""

    counts: Mapping[str, Mapping[str, int]]
    detect_precision: float | None
    detect_recall: float | None
    retire_precision: float | None
    retire_recall: float | None
    records: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def rebuild_truth(
    domain: Domain, records: Sequence[Record], verified: Iterable[Sequence[str]]
) -> dict[str, str]:
    """record id → "holds" / "changed" / "gone" from the rebuild's verified contrasts
    (``[task id, a⁻, a⁺]`` each)."""
    canon = domain.canonical_action
    pairs, keys = set(), set()
    for task_id, a_minus, a_plus in verified:
        pairs.add((canon(a_minus), canon(a_plus)))
        keys.add((task_id, domain.contrast_key(a_minus, a_plus)))
    out = {}
    for r in records:
        if (canon(r.a_minus), canon(r.a_plus)) in pairs:
            out[r.record_id] = "holds"
        elif (r.source_task_id, r.contrast_key) in keys:
            out[r.record_id] = "changed"
        else:
            out[r.record_id] = "gone"
    return out


def decision_truth(
    domain: Domain, record: Record, task: Any, evaluator: Any, generator: Any, epsilon: float = 0.05
) -> tuple[str, int]:
    """(truth, evaluator calls) of one record by rebuilding its decision on the changed `task`:
    "holds" when construction would verify the same a⁺ from a⁻ again, "changed" when it would
    verify another contrast with the record's key, "gone" when a⁻ no longer fails or nothing of
    its kind improves it."""
    from cm_gym.agent import Cost
    from cm_gym.core.types import Action, AgentState, check_all

    if task is None:
        return "gone", 0
    state = AgentState(task)
    minus = evaluator.check(state, Action(record.a_minus))
    if minus.solved:
        return "gone", 1
    alternatives = generator.generate(state, record.a_minus, minus, Cost())
    outcomes = check_all(evaluator, state, [Action(a.text) for a in alternatives])
    improved = [
        a.text
        for a, o in zip(alternatives, outcomes, strict=True)
        if o.completed and o.score - minus.score > epsilon
    ]
    canon = domain.canonical_action
    if canon(record.a_plus) in {canon(t) for t in improved}:
        return "holds", 1 + len(alternatives)
    if any(domain.contrast_key(record.a_minus, t) == record.contrast_key for t in improved):
        return "changed", 1 + len(alternatives)
    return "gone", 1 + len(alternatives)


def agreement(statuses: Mapping[str, str], truth: Mapping[str, str]) -> Agreement:
    """Compare reverify's statuses (record id → valid / repairable / stale / unverifiable) with
    the rebuild's truth; unverifiable records are left out of both rates."""
    counts = {s: dict.fromkeys(TRUTHS, 0) for s in ("valid", "repairable", "stale", "unverifiable")}
    for rid, status in statuses.items():
        counts[status][truth.get(rid, "gone")] += 1
    flagged = ("repairable", "stale")
    tp = sum(counts[s][t] for s in flagged for t in ("changed", "gone"))
    pred = sum(counts[s][t] for s in flagged for t in TRUTHS)
    pos = sum(counts[s][t] for s in ("valid", *flagged) for t in ("changed", "gone"))
    rtp = counts["stale"]["gone"]
    rpred = sum(counts["stale"].values())
    rpos = sum(counts[s]["gone"] for s in ("valid", *flagged))
    return Agreement(
        counts,
        _ratio(tp, pred),
        _ratio(tp, pos),
        _ratio(rtp, rpred),
        _ratio(rtp, rpos),
        sum(sum(c.values()) for c in counts.values()),
    )


def verdict_statuses(report: Mapping[str, Any]) -> dict[str, str]:
    """record id → status from a reverify report (``<snapshot>.reverify.json``)."""
    return {v["record_id"]: v["status"] for v in report.get("verdicts", ())}


def load_json(path: Any) -> Any:
    return json.loads(open(path, encoding="utf-8").read())


def harm_by_verdict(
    episodes: Iterable[Mapping[str, Any]], statuses: Mapping[str, str]
) -> dict[str, dict[str, int]]:
    """From a run that kept every record (``use_log``: [record id, score, draft score] per use):
    per reverify status, how many uses the records got and how many scored below the draft."""
    out = {s: {"uses": 0, "harmful": 0} for s in ("valid", "repairable", "stale", "unverifiable", "other")}
    for episode in episodes:
        for record_id, score, draft_score in episode.get("use_log", ()):
            row = out[statuses.get(str(record_id), "other")]
            row["uses"] += 1
            row["harmful"] += int(draft_score is not None and float(score) < float(draft_score))
    return out
