"""The memory record m = (q, a⁻, a⁺, e, c, u) of paper Eq. 3, plus its bookkeeping (SPEC §2).

A record's id is a content hash of (domain, a⁻, a⁺, condition), so the same verified contrast under
the same applicability condition is never stored twice, whatever task it came from.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

#: Keys every record's evidence carries (the two check results from the same state); records built
#: since graded evidence also carry "graded_minus" / "graded_plus" (`Outcome.graded_score`).
EVIDENCE_KEYS = ("score_minus", "score_plus", "feedback_minus", "feedback_plus")

#: Where a record's a⁻ / a⁺ text came from: "real" (a real system's output verbatim: a recorded
#: published answer or a real model's draft), "real-revision" (a real model's revision or edit of
#: a draft), "simulated" (the simulated LLM's text: its revision of a real draft, its local
#: alternatives), "edit" (the domain's rule-based edit grammar; no LLM), "unknown" (not recorded:
#: stores built before provenance existed, or a backend that does not mark its replies).
PROVENANCES = ("real", "real-revision", "simulated", "edit", "unknown")
#: Provenances of real model text (what a store built on real drafts admits as a⁻ by default).
REAL_PROVENANCES = ("real", "real-revision")

_WS = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _WS.sub(" ", text).strip()


def compute_record_id(domain: str, a_minus: str, a_plus: str, condition: str) -> str:
    """Content hash of a contrast: sha256 over (domain, a⁻, a⁺, canonical condition), whitespace
    runs collapsed so that layout differences do not make a duplicate look new. 16 hex digits."""
    payload = json.dumps([domain, _norm(a_minus), _norm(a_plus), _norm(condition)], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Record:
    """One verified correction.

    `situation` is q (what retrieval embeds), `a_minus`/`a_plus` the failed and improved actions,
    `evidence` their check results from the same state (`EVIDENCE_KEYS`), `condition` the canonical
    condition text ("" = always applicable), `u` the reuse utility (Eq. 6, starts at 0). `delta` is
    the raw Δ = U(o') − U(o) and `admission_score` the S_adm it was admitted with.

    Freshness (`cm_gym.memory.freshness`, ``cm-gym memory reverify``): `env_version` is the content
    version of the source environment the contrast was last verified against ("" = unknown, a
    record written before versions existed); `status` is "active" or "retired" (never offered by
    retrieval), with `status_reason` saying why; `replaces` names the record a repaired record
    was derived from.

    Provenance (`PROVENANCES`): `a_minus_provenance` / `a_plus_provenance` say whether a⁻ and a⁺
    are real outputs, real-model revisions, simulated text or rule-based edits ("unknown" in
    stores built before it was recorded). The content hash does not include them.

    Transfer (issue 32 item 5): `transform` is the executable, site-free edit of a generic
    contrast (`Domain.transform_of`: for SQL the edit kind and its parameters as JSON), which
    ``revise="transform"`` applies to another draft with no LLM; "" for a contrast bound to its
    source and in stores built before transforms were stored. Not part of the content hash.
    """

    record_id: str
    domain: str
    source_task_id: str
    env_id: str
    situation: str
    a_minus: str
    a_plus: str
    evidence: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    condition: str = ""
    contrast_key: str = ""
    delta: float = 0.0
    admission_score: float = 0.0
    u: float = 0.0
    uses: int = 0
    helpful: int = 0
    harmful: int = 0
    neutral: int = 0
    created_order: int = 0
    env_version: str = ""
    status: str = "active"
    status_reason: str = ""
    replaces: str = ""
    a_minus_provenance: str = "unknown"
    a_plus_provenance: str = "unknown"
    transform: str = ""

    @classmethod
    def create(
        cls,
        *,
        domain: str,
        source_task_id: str,
        env_id: str,
        situation: str,
        a_minus: str,
        a_plus: str,
        evidence: Mapping[str, Any],
        condition: str,
        contrast_key: str,
        delta: float,
        admission_score: float = 0.0,
        created_order: int = 0,
        env_version: str = "",
        replaces: str = "",
        a_minus_provenance: str = "unknown",
        a_plus_provenance: str = "unknown",
        transform: str = "",
    ) -> Record:
        """A fresh record (u = 0, never used) whose id is the content hash."""
        return cls(
            record_id=compute_record_id(domain, a_minus, a_plus, condition),
            domain=domain,
            source_task_id=source_task_id,
            env_id=env_id,
            situation=situation,
            a_minus=a_minus,
            a_plus=a_plus,
            evidence=dict(evidence),
            condition=condition,
            contrast_key=contrast_key,
            delta=float(delta),
            admission_score=float(admission_score),
            created_order=int(created_order),
            env_version=env_version,
            replaces=replaces,
            a_minus_provenance=a_minus_provenance,
            a_plus_provenance=a_plus_provenance,
            transform=transform,
        )

    @property
    def provenance(self) -> str:
        """The mark ``cm-gym memory show`` prints: ``"a⁻ <provenance>, a⁺ <provenance>"``."""
        return f"a⁻ {self.a_minus_provenance}, a⁺ {self.a_plus_provenance}"

    @property
    def active(self) -> bool:
        """Whether retrieval may offer this record (it was not retired)."""
        return self.status != "retired"

    # -- derived features (selector slots, SPEC §4) --------------------------------------------
    @property
    def helpful_fraction(self) -> float:
        """Fraction of construction-time uses labelled helpful (0 when never used)."""
        return self.helpful / self.uses if self.uses else 0.0

    @property
    def improvement(self) -> float:
        """Estimated improvement from the evidence: the graded gain graded_plus − graded_minus
        where the world model grades (result-set overlap for SQL, fraction of tests or
        constraints), else score_plus − score_minus, else Δ. Unlike the binary Δ it says how much
        of the result the edit changed on its source task."""
        ev = self.evidence
        for plus, minus in (("graded_plus", "graded_minus"), ("score_plus", "score_minus")):
            try:
                return float(ev[plus]) - float(ev[minus])
            except (KeyError, TypeError, ValueError):
                continue
        return self.delta

    def with_reuse(self, label: int, rho: float) -> Record:
        """Eq. 6: u ← (1 − ρ)·u + ρ·y, with the use and label counters advanced."""
        if label not in (-1, 0, 1):
            raise ValueError(f"reuse label must be -1, 0 or +1, got {label!r}")
        return replace(
            self,
            u=(1.0 - rho) * self.u + rho * label,
            uses=self.uses + 1,
            helpful=self.helpful + (label == 1),
            harmful=self.harmful + (label == -1),
            neutral=self.neutral + (label == 0),
        )

    # -- serialisation ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of every field (used by `cm-gym memory export`)."""
        out = asdict(self)
        out["evidence"] = dict(self.evidence)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        """Inverse of `to_dict` (unknown keys are ignored)."""
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})


def evidence_text(evidence: Mapping[str, Any]) -> str:
    """The evidence e as one line for prompts: both scores and (short) feedback."""
    ev = evidence
    parts = [
        f"original score {float(ev.get('score_minus', 0.0)):.2f}",
        f"edited score {float(ev.get('score_plus', 0.0)):.2f}",
    ]
    for key, label in (("feedback_minus", "original"), ("feedback_plus", "edited")):
        text = _norm(str(ev.get(key, "") or ""))
        if text:
            parts.append(f"{label} feedback: {text[:200]}")
    return "; ".join(parts)
