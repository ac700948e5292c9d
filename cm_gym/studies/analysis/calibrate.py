"""Calibrate the simulated revision (`RevisionRates`) against the paper's published rates.

The paper reports how often shown records change an action and how often that harms:

* Fig. 4d, per *retrieved* record: matched retrieval 0.29 action changes and 0.03 harmful changes;
  shuffled retrieval 0.21 and 0.17. The paper (App. D.4) calls this "a different normalization"
  of the same events as harmful use: the numerator counts the changes the *shown* record made (at
  most one record is shown per decision; retrieved-but-skipped records change nothing), the
  denominator every retrieved record (k ≤ 3 per decision). So the rate is (changes made by the
  shown record) ÷ (records retrieved) — the `ablations` study's counting (``actions_changed_by_memory``
  / ``retrieved_records``) — not "what each retrieved record would do if shown", which is ≈ k×
  larger;
* Appendix E.3, per *selected* record use: harmful use 4.2% on ordinary and 11.8% on look-alike
  tasks with applicability conditions; 6.1% and 34.2% with the condition removed.

`collect` measures, on a benchmark's T_train tasks, every ingredient these rates need: at each
decision of a memory-free episode, for every retrieved record, its closeness to the draft and, for
each revision branch (apply, over-apply, disturb), the fraction of that branch's candidate
revisions that change the draft and that score below it (checked on forks). Each published rate is
then an exact *linear* function of the five revision rates (`LinearRate`), so the simulator's value
under any rates is computed without re-running anything, and `fit` finds the rates closest to the
targets (least squares, each bin's probabilities in [0, 1] and summing to at most 1).

Definitions the paper leaves open, fixed here: decisions are those of memory-free (always-skip)
episodes; the record shown at a decision — a "selected use", and the numerator of the Fig. 4d
rates — is the top-ranked record (the construction-time reuse policy — the learned selector's
choices cannot enter the calibration without tuning the simulator to it);
"harmful" means the revised action scores below the memory-free draft on a fork; a use is
"look-alike" when the record's source task has the same family as the current task but another
variant (tasks carrying ``meta["variant"]``: the generated SQL benchmark), else "ordinary".
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.base import RevisionRates
from cm_gym.llm.revision import candidates

logger = logging.getLogger(__name__)

RATE_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RevisionRates))
#: Which rate drives which branch in which closeness bin.
_BRANCH_RATE = {
    ("match", "apply"): "apply",
    ("match", "disturb"): "match_disturb",
    ("analogous", "overapply"): "overapply",
    ("analogous", "disturb"): "analogous_disturb",
    ("unrelated", "disturb"): "unrelated_disturb",
}
SETTINGS: Mapping[str, dict[str, Any]] = {
    "matched": {"retrieval": "matched", "use_conditions": True},
    "shuffled": {"retrieval": "shuffled", "use_conditions": True},
    "no_condition": {"retrieval": "matched", "use_conditions": False},
}


@dataclass(frozen=True)
class Target:
    """One published rate: its value, where it is printed, and what its denominator counts."""

    name: str
    value: float
    source: str
    setting: str
    per: str  # denominator: "retrieved" (every retrieved record) or "selected" (the shown top-1)
    subset: str  # "all", "ordinary" or "lookalike"
    measure: str  # "change" or "harm"


PAPER_TARGETS: tuple[Target, ...] = (
    Target("matched: action changes", 0.29, "Fig. 4d", "matched", "retrieved", "all", "change"),
    Target("matched: harmful changes", 0.03, "Fig. 4d", "matched", "retrieved", "all", "harm"),
    Target("shuffled: action changes", 0.21, "Fig. 4d", "shuffled", "retrieved", "all", "change"),
    Target("shuffled: harmful changes", 0.17, "Fig. 4d", "shuffled", "retrieved", "all", "harm"),
    Target("harmful use, ordinary", 0.042, "App. E.3", "matched", "selected", "ordinary", "harm"),
    Target("harmful use, look-alike", 0.118, "App. E.3 / §5.3", "matched", "selected", "lookalike", "harm"),
    Target("harmful use, ordinary, no c", 0.061, "App. E.3", "no_condition", "selected", "ordinary", "harm"),
    Target(
        "harmful use, look-alike, no c", 0.342, "App. E.3", "no_condition", "selected", "lookalike", "harm"
    ),
)
#: Paper figures printed for context only (they depend on the selector or another method).
CONTEXT = (
    "§5.3: ReasoningBank's harmful use on look-alike tasks is 27.6% (CounterMem 11.8%).",
    "App. E.3: net rescued − broken per 120 paired tasks with CF Memory: Math +25, Coding +15, "
    "SQL +31, Formal Verification +6 (17 rescued, 11 broken), SAT +17.",
)


@dataclass(frozen=True)
class Row:
    """One retrieved record at one decision, with what each revision branch would do."""

    setting: str
    slot: int
    closeness: str
    lookalike: bool | None
    change: Mapping[str, float]  # branch → fraction of its candidates that change the draft
    harm: Mapping[str, float]  # branch → fraction of its candidates that score below the draft


def _variant(task: Task) -> Any:
    return task.meta.get("variant", task.features.get("variant"))


def is_lookalike(source: Task | None, task: Task) -> bool | None:
    """Same family, another variant (None when either task carries no variant)."""
    if source is None or _variant(source) is None or _variant(task) is None:
        return None
    return source.family == task.family and _variant(source) != _variant(task)


def _key(outcome: Any) -> tuple[float, float]:
    return (float(outcome.solved), float(outcome.score))


def collect(
    env: Any,
    task_ids: Sequence[str],
    setting: str,
    tasks_by_id: Mapping[str, Task],
    *,
    max_candidates: int = 6,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> list[Row]:
    """Rows for every retrieved record at every decision of memory-free episodes over `task_ids`.
    At most `max_candidates` candidates per branch are checked (a seeded sample: the fractions
    stay unbiased)."""
    base = env.unwrapped
    domain = base.domain
    records = {r.record_id: r for r in base.store.records}
    rng = np.random.default_rng(seed)
    rows: list[Row] = []
    for i, task_id in enumerate(task_ids):
        obs, info = env.reset(seed=i, options={"task_id": task_id})
        task = tasks_by_id[task_id]
        blind = dataclasses.replace(task, reference="")
        done = False
        while not done:
            options = base.counterfactuals()
            draft, draft_key = options[0].text, _key(options[0].outcome)
            checked: dict[str, tuple[float, float]] = {}

            def key_of(text: str, memo: dict[str, tuple[float, float]] = checked) -> tuple[float, float]:
                if text not in memo:
                    memo[text] = _key(base.check_text(text))
                return memo[text]

            for c in options[1:]:
                rec = records[str(c.record_id)]
                cands = candidates(domain, blind, draft, rec.a_minus, rec.a_plus)
                change: dict[str, float] = {}
                harm: dict[str, float] = {}
                for branch in ("apply", "overapply", "disturb"):
                    texts = list(cands.of(branch))
                    if len(texts) > max_candidates:
                        texts = [texts[int(k)] for k in rng.choice(len(texts), max_candidates, replace=False)]
                    if not texts:
                        change[branch] = harm[branch] = 0.0
                        continue
                    change[branch] = float(np.mean([domain.action_changed(draft, t) for t in texts]))
                    harm[branch] = float(np.mean([key_of(t) < draft_key for t in texts]))
                source = tasks_by_id.get(rec.source_task_id)
                rows.append(Row(setting, c.action, cands.closeness, is_lookalike(source, task), change, harm))
            obs, _, terminated, truncated, info = env.step(0)
            done = terminated or truncated
        if progress is not None:
            progress(1)
    return rows


# -- rates as linear functions of the revision rates ---------------------------------------------
@dataclass(frozen=True)
class LinearRate:
    """value(rates) = coefficients · [rates in RATE_NAMES order]; `n` rows in its denominator."""

    coefficients: np.ndarray
    n: int

    def value(self, rates: RevisionRates) -> float | None:
        if self.n == 0:
            return None
        x = np.array([getattr(rates, name) for name in RATE_NAMES])
        return float(self.coefficients @ x)


def linear_rate(rows: Sequence[Row], target: Target) -> LinearRate:
    """The target's rate under any revision rates, from the rows it is measured on.

    The numerator always counts what the *shown* record (slot 1, one per decision) changes or
    harms. The denominator is what the target is "per": the shown records for a selected-use
    rate (App. E.3), every retrieved record for a Fig. 4d rate (the paper's "per retrieved
    memory"; a retrieved record that is not shown adds to the denominator only)."""
    pool = [
        r
        for r in rows
        if r.setting == target.setting
        and (
            target.subset == "all"
            or (target.subset == "lookalike" and r.lookalike is True)
            or (target.subset == "ordinary" and r.lookalike is not True)
        )
    ]
    shown = [r for r in pool if r.slot == 1]
    coef = np.zeros(len(RATE_NAMES))
    if target.subset == "lookalike" and not any(r.lookalike is not None for r in pool):
        return LinearRate(coef, 0)
    for r in shown:
        values = r.change if target.measure == "change" else r.harm
        for (closeness, branch), rate in _BRANCH_RATE.items():
            if r.closeness == closeness:
                coef[RATE_NAMES.index(rate)] += values.get(branch, 0.0)
    n = len(pool) if target.per == "retrieved" else len(shown)
    return LinearRate(coef / n if n else coef, n)


def fit(
    rows: Sequence[Row], targets: Sequence[Target] = PAPER_TARGETS, prior: RevisionRates | None = None
) -> RevisionRates:
    """The revision rates closest (least squares) to the targets measurable on `rows`; a tiny
    pull towards `prior` keeps rates that no target constrains at their prior value."""
    return fit_lines([(linear_rate(rows, t), t.value) for t in targets], prior)


def pooled_rate(row_sets: Sequence[Sequence[Row]], target: Target) -> LinearRate:
    """A target's rate averaged over benchmarks with equal weight (the paper's domain summaries
    weight domains equally), over the benchmarks where it is measurable."""
    parts = [lr for lr in (linear_rate(rows, target) for rows in row_sets) if lr.n > 0]
    if not parts:
        return LinearRate(np.zeros(len(RATE_NAMES)), 0)
    return LinearRate(np.mean([lr.coefficients for lr in parts], axis=0), sum(lr.n for lr in parts))


def fit_lines(lines: Sequence[tuple[LinearRate, float]], prior: RevisionRates | None = None) -> RevisionRates:
    """Least squares of linear rates to their target values (see `fit`)."""
    from scipy.optimize import minimize

    prior = prior or RevisionRates()
    x0 = np.array([getattr(prior, n) for n in RATE_NAMES])
    lines = [(lr, v) for lr, v in lines if lr.n > 0]
    if not lines:
        return prior
    A = np.vstack([lr.coefficients for lr, _ in lines])
    b = np.array([v for _, v in lines])

    def loss(x: np.ndarray) -> float:
        return float(np.sum((A @ x - b) ** 2) + 1e-4 * np.sum((x - x0) ** 2))

    i_apply, i_md = RATE_NAMES.index("apply"), RATE_NAMES.index("match_disturb")
    i_over, i_ad = RATE_NAMES.index("overapply"), RATE_NAMES.index("analogous_disturb")
    constraints = [
        {"type": "ineq", "fun": lambda x: 1.0 - x[i_apply] - x[i_md]},
        {"type": "ineq", "fun": lambda x: 1.0 - x[i_over] - x[i_ad]},
    ]
    res = minimize(loss, x0, method="SLSQP", bounds=[(0.0, 1.0)] * len(x0), constraints=constraints)
    x = np.clip(res.x, 0.0, 1.0)
    values = {n: round(float(v), 3) for n, v in zip(RATE_NAMES, x, strict=True)}
    for a, b_ in (("apply", "match_disturb"), ("overapply", "analogous_disturb")):
        excess = values[a] + values[b_] - 1.0
        if excess > 0:
            values[a] = round(values[a] - excess, 3)
    return RevisionRates(**values)


def compare(
    rows: Sequence[Row], rates: RevisionRates, targets: Sequence[Target] = PAPER_TARGETS
) -> list[dict[str, Any]]:
    """Each target next to the simulator's value under `rates` (None where not measurable)."""
    out = []
    for t in targets:
        lr = linear_rate(rows, t)
        out.append(
            {
                "target": t.name,
                "paper": t.value,
                "simulator": lr.value(rates),
                "n": lr.n,
                "source": t.source,
                "per": "retrieved record (changes by the shown top-1)"
                if t.per == "retrieved"
                else "selected use (top-1)",
            }
        )
    return out


def closeness_shares(rows: Sequence[Row]) -> dict[str, dict[str, float]]:
    """Share of each closeness bin among the rows of each setting."""
    out: dict[str, dict[str, float]] = {}
    for setting in SETTINGS:
        sub = [r for r in rows if r.setting == setting]
        if sub:
            out[setting] = {
                c: sum(r.closeness == c for r in sub) / len(sub) for c in ("match", "analogous", "unrelated")
            }
    return out
