"""Admission (paper Eq. 2 and Eq. 4, SPEC §3): which verified contrasts enter the store.

A candidate first needs a completed check and a raw gain Δ = U(o′) − U(o) > ε_adm (0.05). A record
with the same content hash already stored is a duplicate. Otherwise

    S_adm = 1.0·Δ̃ + 0.5·ũ − 0.7·R − 1.0·I,   admitted iff S_adm > τ_adm (0.1)

with these definitions (the paper leaves them to the implementation):

* Δ̃ = clip(Δ, 0, 1). U is in [0, 1], so Δ is already on a unit scale; clipping only guards
  against a world model that leaks scores outside it.
* ũ = the reuse prior of the advice: the mean u of stored records with the same contrast key that
  have been used at least once, clipped to [−1, 1] (0 when there are none). A new record has not
  been reused itself (its u starts at 0), so the term asks whether *this kind* of correction helped
  or harmed when it was reused during construction.
* R = repeated advice: Σ over stored records m′ with the same contrast key of r(m, m′), where
  r = 1.0 when the canonical conditions are identical and otherwise
  overlap(c, c′) · max(0, cos(φ(q), φ(q′))): the same edit is only repeated advice where both
  records would be offered (overlapping conditions) for similar situations. R counts equivalent
  copies already stored, so with Δ̃ = 1 a second copy of the same key + condition is still admitted
  (S = 0.3) and a third is not (S = −0.4), while the same edit under a disjoint condition (another
  schema, another wording) is not redundant at all.
* I = conflicting advice: max over stored records whose contrast key is this record's *inverse* key
  (`Domain.inverse_contrast_key`, the opposite edit) of the overlap of the two conditions
  (`condition_overlap`: 1.0 when identical or either is empty, else the Jaccard index of their
  predicate sets). "Use >= under 'at least'" does not conflict with "use > under 'strictly'"
  (disjoint conditions) but does conflict with an unconditional "use >".

Rejection reasons: ``not_improved`` (check incomplete or Δ ≤ ε), ``duplicate``, ``conflict`` (S ≤ τ
but it would pass without the I term), ``below_tau`` (otherwise), and ``refused_on_instances``: an
evaluator that can check a contrast on several instances of its environment (the SQL world model
with ``instances=N``: generated variants of the task's database) found that a⁺ is right only on
the original — an accidental repair (`instance_confirmation`; off unless the evaluator offers it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cm_gym.core.types import AgentState
from cm_gym.domains.conditions import condition_overlap
from cm_gym.memory.record import Record
from cm_gym.memory.view import StoreView

REJECT_REASONS = (
    "not_improved",
    "duplicate",
    "below_tau",
    "conflict",
    "retention",
    "condition_false_on_source",
    "condition_vacuous",
    "refused_on_instances",
)


@dataclass(frozen=True)
class AdmissionWeights:
    """(λ_Δ, λ_u, λ_r, λ_I) of Eq. 4; paper defaults (1.0, 0.5, 0.7, 1.0)."""

    delta: float = 1.0
    u: float = 0.5
    redundancy: float = 0.7
    conflict: float = 1.0


@dataclass(frozen=True)
class AdmissionResult:
    """The decision and every term that went into it (for logs and tests)."""

    admitted: bool
    reason: str  # "admitted" or one of REJECT_REASONS
    score: float = 0.0
    delta_norm: float = 0.0
    u_prior: float = 0.0
    redundancy: float = 0.0
    conflict: float = 0.0


def normalised_delta(delta: float) -> float:
    """Δ̃ = clip(Δ, 0, 1)."""
    return float(min(1.0, max(0.0, delta)))


def normalised_u(u: float) -> float:
    """ũ = clip(u, −1, 1) (Eq. 6 keeps u in [−1, 1] already)."""
    return float(min(1.0, max(-1.0, u)))


def pair_redundancy(
    record: Record, embedding: np.ndarray, other: Record, other_embedding: np.ndarray
) -> float:
    """r(m, m′) for two records with the same contrast key (see the module docstring)."""
    if record.condition == other.condition:
        return 1.0
    overlap = condition_overlap(record.condition, other.condition)
    if overlap == 0.0:
        return 0.0
    return overlap * float(max(0.0, float(np.dot(embedding, other_embedding))))


def redundancy(record: Record, embedding: np.ndarray, store: StoreView) -> float:
    """R(m, M): Σ r(m, m′) over stored same-key records other than m itself."""
    return float(
        sum(
            pair_redundancy(record, embedding, other, store.embedding_of(other.record_id))
            for other in store.by_key(record.contrast_key)
            if other.record_id != record.record_id
        )
    )


def conflict(record: Record, inverse_key: str, store: StoreView) -> float:
    """I(m, M): max condition overlap with stored records holding the opposite advice."""
    if not inverse_key or inverse_key == record.contrast_key:
        return 0.0
    return max(
        (condition_overlap(record.condition, o.condition) for o in store.by_key(inverse_key)), default=0.0
    )


def reuse_prior(record: Record, store: StoreView) -> float:
    """ũ at admission: mean u of used same-key records (0 when none)."""
    used = [o.u for o in store.by_key(record.contrast_key) if o.uses > 0]
    return normalised_u(sum(used) / len(used)) if used else 0.0


def decide_admission(
    record: Record,
    embedding: np.ndarray,
    store: StoreView,
    *,
    inverse_key: str,
    completed: bool = True,
    epsilon: float = 0.05,
    tau: float = 0.1,
    weights: AdmissionWeights | None = None,
) -> AdmissionResult:
    """Apply ε_adm, the duplicate check and Eq. 4 to a candidate record."""
    w = weights or AdmissionWeights()
    if not completed or record.delta <= epsilon:
        return AdmissionResult(False, "not_improved")
    if record.record_id in store:
        return AdmissionResult(False, "duplicate")
    d = normalised_delta(record.delta)
    u = reuse_prior(record, store)
    r = redundancy(record, embedding, store)
    i = conflict(record, inverse_key, store)
    score = w.delta * d + w.u * u - w.redundancy * r - w.conflict * i
    if score > tau:
        reason = "admitted"
    elif i > 0 and score + w.conflict * i > tau:
        reason = "conflict"
    else:
        reason = "below_tau"
    return AdmissionResult(reason == "admitted", reason, score, d, u, r, i)


def instance_confirmation(
    evaluator: Any, state: AgentState, a_minus: str, a_plus: str
) -> Mapping[str, Any] | None:
    """Ask the world model whether a verified contrast also holds on other instances of the task's
    environment: ``evaluator.confirm_contrast(state, a⁻, a⁺)``, looked up through wrappers that
    keep the wrapped evaluator as ``inner`` (timing, memoising). None when no evaluator in the chain
    offers it or it declines (the default: admission as in the paper); otherwise a mapping whose
    ``"confirmed"`` decides (False = ``refused_on_instances``)."""
    for _ in range(8):  # wrappers are shallow; a cycle must not hang a build
        if evaluator is None:
            return None
        confirm = getattr(evaluator, "confirm_contrast", None)
        if callable(confirm):
            return confirm(state, a_minus, a_plus)
        evaluator = getattr(evaluator, "inner", None)
    return None
