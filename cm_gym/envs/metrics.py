"""SPEC §8 metrics, each rate with its own denominator (paper Section 4.4, Appendix D.4, D.6).

Per episode (one task), `EpisodeCounters` accumulates the env's step infos. Per run, `summarize`
turns a list of episode dicts into:

- score 0–100: 100 × mean final-attempt score U (= solve rate for binary benchmarks);
- total tokens in millions (task-run tokens: drafts, revisions, reflections);
- evaluator calls per *solved task* and failed attempts per *solved task*;
- retrieval coverage per *retrieval opportunity* (decisions at which retrieval was attempted;
  a hit = at least one eligible record returned);
- harmful use per *selected record use* (decisions where a record was used, not skipped;
  harmful = reuse label −1, the construction-time criterion of Appendix B.3);
- optionally (env ``score_drafts=True``), worse-than-draft per *selected use that changed the
  draft*: the revised action scored below what the memory-free draft would have scored.

- decision score 0–100: 100 × mean U of every executed action (per *decision*; it rewards a
  policy that solves at the first decision, where the per-task score only sees the last one).
- first-decision score 0–100: 100 × mean U of each task's *first* executed action (per task; for
  the memory-free policy, the share of tasks its first draft solves). Beside the budget score it
  says how much of a score the later decisions add (on recorded drafts: the same system asked
  again, or a cascade of stronger systems).

An episode in which a world model's wall-clock hang guard stopped a check (step info
``outcome_status == "infrastructure"``: the machine, not the action; `cm_gym.evaluators.budgets`)
says nothing about the policy: `summarize`, `per_task` and `paired` leave it out of every metric
and `summarize` counts it (``n_infrastructure``; ``n_tasks`` counts the episodes scored).

`paired` counts rescued / broken tasks between a no-memory and a memory run over the same tasks.
`paired_bootstrap` / `paired_comparisons` give the paired bootstrap CI of a score difference over
tasks, each policy's seeds averaged per task first (SPEC §8): it treats the seeds as fixed.
`two_level_paired_bootstrap` / `two_level_comparisons` resample the seeds as well (a two-level,
hierarchical bootstrap: seeds with replacement, then tasks with replacement), so a difference that
rests on one lucky selector seed gets the wide interval it deserves; reports show both.
The denominators are never mixed: every rate is reported as ``{value, numerator, denominator, per}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from cm_gym.envs.bootstrap import percentile_ci, percentile_interval, two_level_bootstrap_means


@dataclass
class EpisodeCounters:
    """Counters of one episode, fed with the env's step infos (cumulative keys are overwritten,
    per-decision keys are added). `as_dict()` is what goes into ``info["episode_metrics"]``."""

    task_id: str = ""
    decisions: int = 0
    solved: bool = False
    score: float = 0.0
    evaluator_calls: int = 0
    failures: int = 0
    tokens: int = 0
    retrieval_opportunities: int = 0
    retrieval_with_records: int = 0
    selected_uses: int = 0
    helpful_uses: int = 0
    harmful_uses: int = 0
    actions_changed_by_memory: int = 0
    draft_checked_uses: int = 0
    uses_worse_than_draft: int = 0
    uses_better_than_draft: int = 0
    invalid_actions: int = 0
    decision_score_sum: float = 0.0
    first_score: float = 0.0  # U of the first executed action (the first decision)
    first_solved: bool = False
    episode_return: float = 0.0
    record_ids: list[str] = field(default_factory=list)
    infrastructure: int = 0  # decisions whose check the hang guard stopped (the episode is not scored)
    budget_kinds: list[str] = field(default_factory=list)  # the budget units its verdicts were charged in

    def update(self, info: Mapping[str, Any], reward: float = 0.0) -> None:
        """Add one decision's step info (see `MemorySelectionEnv` for the keys)."""
        self.task_id = str(info.get("task_id", self.task_id))
        self.decisions += 1
        self.solved = bool(info.get("solved", False))
        self.score = float(info.get("score", 0.0))
        if self.decisions == 1:
            self.first_score, self.first_solved = self.score, self.solved
        self.decision_score_sum += self.score
        self.evaluator_calls = int(info.get("evaluator_calls", self.evaluator_calls))
        self.failures = int(info.get("failures", self.failures))
        self.tokens = int(info.get("tokens", self.tokens))
        if info.get("retrieval_attempted", True):
            self.retrieval_opportunities += 1
            self.retrieval_with_records += int(bool(info.get("retrieved", False)))
        record_id = info.get("record_id")
        if record_id is not None:
            self.selected_uses += 1
            self.record_ids.append(str(record_id))
            label = int(info.get("reuse_label", 0) or 0)
            self.helpful_uses += int(label > 0)
            self.harmful_uses += int(label < 0)
            self.actions_changed_by_memory += int(bool(info.get("changed_by_memory", False)))
            draft_score = info.get("draft_score")
            if draft_score is not None:
                self.draft_checked_uses += 1
                self.uses_worse_than_draft += int(float(info.get("score", 0.0)) < float(draft_score))
                self.uses_better_than_draft += int(float(info.get("score", 0.0)) > float(draft_score))
        self.invalid_actions += int(bool(info.get("invalid_action", False)))
        self.infrastructure += int(info.get("outcome_status") == "infrastructure")
        kind = str(info.get("budget_kind") or "")
        if kind and kind not in self.budget_kinds:
            self.budget_kinds.append(kind)
        self.episode_return += float(reward)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Rate:
    """A ratio that keeps its numerator, denominator and what the denominator counts."""

    numerator: float
    denominator: float
    per: str

    @property
    def value(self) -> float | None:
        """numerator / denominator, or None when the denominator is zero (never a fake 0)."""
        return self.numerator / self.denominator if self.denominator else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "numerator": self.numerator,
            "denominator": self.denominator,
            "per": self.per,
        }


RATE_METRICS = (
    "evaluator_calls_per_solved",
    "failures_per_solved",
    "retrieval_coverage",
    "harmful_use",
    "helpful_use",
    "worse_than_draft",
)
SCALAR_METRICS = (
    "score",
    "first_decision_score",
    "decision_score",
    "solve_rate",
    "total_tokens_m",
    "mean_return",
    "n_tasks",
    "n_solved",
    "n_infrastructure",
)


def scored(episodes: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The episodes the metrics count: those no hang guard interrupted (see the module doc)."""
    return [e for e in episodes if not int(e.get("infrastructure", 0) or 0)]


def summarize(episodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """SPEC §8 metrics of one run from its episode dicts (`EpisodeCounters.as_dict()`)."""
    kept = scored(episodes)
    n_infrastructure = len(episodes) - len(kept)
    episodes = kept
    n = len(episodes)
    solved = sum(bool(e["solved"]) for e in episodes)
    calls = sum(int(e["evaluator_calls"]) for e in episodes)
    failures = sum(int(e["failures"]) for e in episodes)
    tokens = sum(int(e["tokens"]) for e in episodes)
    opportunities = sum(int(e["retrieval_opportunities"]) for e in episodes)
    hits = sum(int(e["retrieval_with_records"]) for e in episodes)
    uses = sum(int(e["selected_uses"]) for e in episodes)
    harmful = sum(int(e["harmful_uses"]) for e in episodes)
    helpful = sum(int(e["helpful_uses"]) for e in episodes)
    decisions = sum(int(e["decisions"]) for e in episodes)
    return {
        "n_tasks": n,
        "n_solved": solved,
        "score": 100.0 * sum(float(e["score"]) for e in episodes) / n if n else None,
        "decision_score": (
            100.0 * sum(float(e.get("decision_score_sum", 0.0)) for e in episodes) / decisions
            if decisions
            else None
        ),
        "decisions": decisions,
        "first_decision_score": _first_decision_score(episodes),
        "n_first_solved": sum(bool(e.get("first_solved", False)) for e in episodes),
        "solve_rate": 100.0 * solved / n if n else None,
        "total_tokens_m": tokens / 1e6,
        "mean_return": sum(float(e.get("episode_return", 0.0)) for e in episodes) / n if n else None,
        "evaluator_calls_per_solved": Rate(calls, solved, "solved task").as_dict(),
        "failures_per_solved": Rate(failures, solved, "solved task").as_dict(),
        "retrieval_coverage": Rate(hits, opportunities, "retrieval opportunity").as_dict(),
        "harmful_use": Rate(harmful, uses, "selected record use").as_dict(),
        "helpful_use": Rate(helpful, uses, "selected record use").as_dict(),
        "worse_than_draft": Rate(
            sum(int(e.get("uses_worse_than_draft", 0)) for e in episodes),
            sum(int(e.get("draft_checked_uses", 0)) for e in episodes),
            "selected use that changed the draft (draft checked; env score_drafts=True)",
        ).as_dict(),
        "selected_uses": uses,
        "invalid_actions": sum(int(e.get("invalid_actions", 0)) for e in episodes),
        "n_infrastructure": n_infrastructure,
        "budget_kinds": sorted({k for e in episodes for k in e.get("budget_kinds", ())}),
    }


def _first_decision_score(episodes: Sequence[Mapping[str, Any]]) -> float | None:
    """100 × mean U of the first decision per task; None when no episode reports it (episode
    dicts written before the metric existed) or there are none."""
    firsts = [float(e["first_score"]) for e in episodes if "first_score" in e and int(e.get("decisions", 0))]
    if not episodes or len(firsts) != len(episodes):
        return None
    return 100.0 * sum(firsts) / len(firsts)


def paired(
    without_memory: Sequence[Mapping[str, Any]], with_memory: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Rescued (fails without, solved with) and broken (solved without, fails with) tasks over the
    task ids present in both runs (Appendix E.3); `net` = rescued − broken."""
    base = {str(e["task_id"]): bool(e["solved"]) for e in scored(without_memory)}
    treated = {str(e["task_id"]): bool(e["solved"]) for e in scored(with_memory)}
    common = sorted(set(base) & set(treated))
    rescued = [t for t in common if treated[t] and not base[t]]
    broken = [t for t in common if base[t] and not treated[t]]
    return {
        "n_pairs": len(common),
        "rescued": len(rescued),
        "broken": len(broken),
        "net": len(rescued) - len(broken),
        "rescued_ids": rescued,
        "broken_ids": broken,
    }


def _mean_std(values: Sequence[float]) -> dict[str, Any]:
    clean = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not clean:
        return {"mean": None, "std": None, "n": 0}
    mean = sum(clean) / len(clean)
    var = sum((v - mean) ** 2 for v in clean) / (len(clean) - 1) if len(clean) > 1 else 0.0
    return {"mean": mean, "std": math.sqrt(var), "n": len(clean)}


def aggregate_seeds(per_seed: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean ± sample std (ddof = 1) across seeds of each `summarize` metric. Rates are averaged
    per seed (their per-seed value), and the pooled numerator/denominator is kept as well."""
    out: dict[str, Any] = {}
    for key in SCALAR_METRICS:
        out[key] = {**_mean_std([s.get(key) for s in per_seed]), "per_seed": [s.get(key) for s in per_seed]}
    for key in RATE_METRICS:
        rates = [s[key] for s in per_seed if key in s]
        num = sum(r["numerator"] for r in rates)
        den = sum(r["denominator"] for r in rates)
        out[key] = {
            **_mean_std([r["value"] for r in rates]),
            "per_seed": [r["value"] for r in rates],
            "pooled": Rate(num, den, rates[0]["per"] if rates else "").as_dict(),
        }
    return out


def per_task(per_seed: Sequence[Sequence[Mapping[str, Any]]], key: str = "score") -> dict[str, float]:
    """Each task's value of `key` (×100 for scores), averaged over the seeds that ran it."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for episodes in per_seed:
        for e in scored(episodes):
            task = str(e["task_id"])
            sums[task] = sums.get(task, 0.0) + 100.0 * float(e[key])
            counts[task] = counts.get(task, 0) + 1
    return {t: sums[t] / counts[t] for t in sums}


def paired_bootstrap(
    treated: Mapping[str, float],
    baseline: Mapping[str, float],
    *,
    n_boot: int = 5000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Mean difference treated − baseline over the tasks both ran, with a percentile bootstrap CI
    that resamples tasks (so the pairing is kept)."""
    import numpy as np

    common = sorted(set(treated) & set(baseline))
    if not common:
        return {"diff": None, "lo": None, "hi": None, "n_tasks": 0, "level": level}
    d = np.array([treated[t] - baseline[t] for t in common], dtype=float)
    lo, hi = percentile_ci(d, n_boot, seed, level)
    return {
        "diff": float(d.mean()),
        "lo": lo,
        "hi": hi,
        "n_tasks": len(common),
        "n_boot": n_boot,
        "level": level,
    }


def paired_comparisons(
    episodes_of: Mapping[str, Mapping[int, Sequence[Mapping[str, Any]]]],
    baselines: Sequence[str] = ("random", "top1"),
    key: str = "score",
) -> dict[str, dict[str, dict[str, Any]]]:
    """For every policy, the paired bootstrap CI of its per-task `key` (seeds averaged per task)
    against each baseline that was run (a baseline is not compared with itself)."""
    tasks = {name: per_task(list(runs.values()), key) for name, runs in episodes_of.items()}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in episodes_of:
        out[name] = {
            f"vs_{base}": paired_bootstrap(tasks[name], tasks[base])
            for base in baselines
            if base in tasks and base != name
        }
    return out


def per_task_by_seed(
    per_seed: Mapping[int, Sequence[Mapping[str, Any]]], key: str = "score"
) -> dict[int, dict[str, float]]:
    """Each seed's per-task `key` (×100 for scores): ``{seed: {task_id: value}}``."""
    scale = 100.0 if key == "score" else 1.0
    return {
        int(seed): {str(e["task_id"]): scale * float(e[key]) for e in episodes}
        for seed, episodes in per_seed.items()
    }


def two_level_paired_bootstrap(
    treated: Mapping[int, Mapping[str, float]],
    baseline: Mapping[int, Mapping[str, float]],
    *,
    n_boot: int = 5000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Mean difference treated − baseline with a two-level percentile bootstrap CI: seeds and tasks
    resampled (`two_level_bootstrap_means`). Inputs are ``{seed: {task: value}}``; the seeds both
    ran are paired by seed, over the tasks every one of them ran (when they share no seed, the
    baseline's seed mean per task is subtracted from each treated seed)."""
    import numpy as np

    seeds = sorted(set(treated) & set(baseline))
    if seeds:
        rows = [(treated[s], baseline[s]) for s in seeds]
    else:
        base_tasks = set.intersection(*(set(v) for v in baseline.values())) if baseline else set()
        base_mean = {t: float(np.mean([baseline[s][t] for s in baseline])) for t in base_tasks}
        rows = [(treated[s], base_mean) for s in sorted(treated)]
    tasks = sorted(set.intersection(*(set(a) & set(b) for a, b in rows))) if rows else []
    empty = {"diff": None, "lo": None, "hi": None, "n_tasks": 0, "n_seeds": len(rows), "level": level}
    if not tasks:
        return empty
    diff = np.array([[a[t] - b[t] for t in tasks] for a, b in rows], dtype=float)
    means = two_level_bootstrap_means(diff, n_boot, seed)
    return percentile_interval(float(diff.mean()), means, level, n_tasks=len(tasks), n_seeds=len(rows),
                          n_boot=n_boot, resampled="seeds and tasks")  # fmt: skip


def two_level_comparisons(
    scores_of: Mapping[str, Mapping[int, Mapping[str, float]]],
    baselines: Sequence[str] = ("random", "top1"),
) -> dict[str, dict[str, dict[str, Any]]]:
    """For every policy, `two_level_paired_bootstrap` of its ``{seed: {task: score}}`` against
    each baseline that was run (a baseline is not compared with itself)."""
    return {
        name: {
            f"vs_{base}": two_level_paired_bootstrap(scores, scores_of[base])
            for base in baselines
            if base in scores_of and base != name
        }
        for name, scores in scores_of.items()
    }


def pool_summaries(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One `summarize` dict for the union of the episodes behind `parts` (disjoint task sets, e.g.
    one run per split seed), computed exactly from the parts: counts summed, per-task means
    weighted by tasks, per-decision means by decisions, rates by their numerators and denominators."""
    n = sum(int(p["n_tasks"]) for p in parts)
    decisions = sum(int(p.get("decisions") or 0) for p in parts)

    def weighted(key: str, weight: str) -> float | None:
        pairs = [(p.get(key), float(p.get(weight) or 0)) for p in parts]
        total = sum(w for v, w in pairs if v is not None)
        return sum(float(v) * w for v, w in pairs if v is not None) / total if total else None

    out: dict[str, Any] = {
        "n_tasks": n,
        "n_solved": sum(int(p["n_solved"]) for p in parts),
        "score": weighted("score", "n_tasks"),
        "first_decision_score": weighted("first_decision_score", "n_tasks"),
        "decision_score": weighted("decision_score", "decisions"),
        "decisions": decisions,
        "total_tokens_m": sum(float(p.get("total_tokens_m") or 0.0) for p in parts),
        "mean_return": weighted("mean_return", "n_tasks"),
        "selected_uses": sum(int(p.get("selected_uses") or 0) for p in parts),
        "invalid_actions": sum(int(p.get("invalid_actions") or 0) for p in parts),
    }
    out["solve_rate"] = 100.0 * out["n_solved"] / n if n else None
    for key in RATE_METRICS:
        rates = [p[key] for p in parts if key in p]
        if rates:
            out[key] = Rate(
                sum(r["numerator"] for r in rates), sum(r["denominator"] for r in rates), rates[0]["per"]
            ).as_dict()
    return out


def seed_averaged(scores: Mapping[int, Mapping[str, float]]) -> dict[str, float]:
    """``{seed: {task: value}}`` → each task's value averaged over the seeds that ran it."""
    sums: dict[str, list[float]] = {}
    for per_task_values in scores.values():
        for task, value in per_task_values.items():
            sums.setdefault(task, []).append(float(value))
    return {t: sum(v) / len(v) for t, v in sums.items()}
