"""Fit a simulator profile's slip rates to one real system's mistakes.

What is matched: the *sub-kind mass per task* of the real failures (`ErrorSample.mass(sub=True)`
divided by the number of tasks: each failure spreads 1 over its sub-kinds), so both the kind
distribution and the failure rate (the memory-free score) are targets at once. Each slip of the
domain's profile model produces one sub-kind (`TARGETS` of the domain's profile module); a fit
round multiplies each slip's rate by (real mass + ε) / (simulated mass + ε) of its sub-kind
(damped, power 0.8; capped at the model's maximum; halved when the real system never shows that
sub-kind), re-simulates, and the round with the lowest
loss ``TV(kinds) + |failure-rate gap| + |local-share gap|`` is kept. The rate fit runs once per
candidate *difficulty* (`DIFFICULTIES`: slips independent of the task, or the hard quarter of the
tasks carrying 60% / 85% of the slip probability, so that mistakes co-occur in one answer as real
ones do — the local share is the share of failures one unit away from the gold). Nothing else
enters the fit — in particular no policy's score, and not the one-edit-repairable share (it is
reported as a check, not fitted).

The fit uses seeds `fit_seeds` of the simulator; the distances it reports (`FitResult.before`,
`.after`) are measured on other seeds (`eval_seeds`), and on other tasks when `eval_tasks` is
given (the bench's ``--holdout`` fits on half of the databases and measures on the rest).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cm_gym.core.types import Task
from cm_gym.llm.profiles import Profile
from cm_gym.studies.analysis.real_errors import ErrorSample, distance, tv_distance
from cm_gym.studies.analysis.real_errors_compare import collectors

logger = logging.getLogger(__name__)

#: recordings kind → (domain, the domain's profile module)
PROFILE_MODULES: Mapping[str, tuple[str, str]] = {
    "spider": ("sql", "cm_gym.domains.sql.errormodel_profiles"),
    "humaneval": ("humaneval", "cm_gym.domains.humaneval.errormodel_profiles"),
    "dafny": ("dafny", "cm_gym.domains.dafny.errormodel_profiles"),
}
DAMPING = 0.8
#: the share of tasks that are *hard* under a fitted difficulty, and the candidate shares of slip
#: probability they carry (None: slips independent of the task, as the default model)
HARD_SHARE = 0.25
DIFFICULTIES: tuple[float | None, ...] = (None, 0.6, 0.85)


@dataclass
class FitResult:
    """A fitted profile, the real sample and the default's and the fit's samples on the
    evaluation seeds / tasks, their distances, and each round's rates and loss."""

    profile: Profile
    real: ErrorSample
    default: ErrorSample
    fitted: ErrorSample
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def before(self) -> Any:
        return distance(self.real, self.default)

    @property
    def after(self) -> Any:
        return distance(self.real, self.fitted)

    def meta(
        self, kind: str, system: str, fit_seeds: Sequence[int], eval_seeds: Sequence[int]
    ) -> dict[str, Any]:
        """What the profile file records besides its parameters (source, distances, how made)."""
        return {
            "fitted_to": {"recordings": kind, "system": system, "tasks": self.real.n_tasks},
            "distance": "TV between kind distributions (each failure spreads 1 over its kinds); "
            "gaps sim - real in points",
            "before": {**self.before.as_dict(), "none_score_real": self.real.none_score,
                       "none_score_sim": self.default.none_score},
            "after": {**self.after.as_dict(), "none_score_real": self.real.none_score,
                      "none_score_sim": self.fitted.none_score},
            "fit_seeds": list(fit_seeds),
            "eval_seeds": list(eval_seeds),
            "generated_by": f"python bench/bench_error_profiles.py --fit --only {kind}:{system}",
        }  # fmt: skip


def _module(kind: str) -> Any:
    if kind not in PROFILE_MODULES:
        raise ValueError(
            f"no profile model for recordings kind {kind!r}; known: {', '.join(PROFILE_MODULES)}"
        )
    return importlib.import_module(PROFILE_MODULES[kind][1])


def make_profile(
    kind: str, name: str, rates: Mapping[str, float], difficulty: float | None = None
) -> Profile:
    """A profile of `kind`'s domain with these slip rates (rounded to 4 places, zeros dropped)
    and, when `difficulty` is given, the hard `HARD_SHARE` of tasks carrying that share of the
    slip probability (`cm_gym.llm.profiles.with_difficulty`)."""
    domain, module = PROFILE_MODULES[kind]
    clean = {k: round(float(v), 4) for k, v in rates.items() if round(float(v), 4) > 0}
    params: dict[str, Any] = {"rates": clean}
    if difficulty is not None:
        params["difficulty"] = {"share": HARD_SHARE, "mass": difficulty}
    return Profile(name, domain, f"{module}:profile_error_model", params)


def _loss(real: ErrorSample, sim: ErrorSample) -> float:
    gap = abs((sim.none_score or 0.0) - (real.none_score or 0.0)) / 100.0
    local = abs((sim.local_share or 0.0) - (real.local_share or 0.0))
    return tv_distance(real.distribution(), sim.distribution()) + gap + local


def fit_profile(
    kind: str,
    system: str,
    *,
    rounds: int = 6,
    difficulties: Sequence[float | None] = DIFFICULTIES,
    fit_seeds: Sequence[int] = (0,),
    eval_seeds: Sequence[int] = (1, 2),
    fit_tasks: Sequence[Task] | None = None,
    eval_tasks: Sequence[Task] | None = None,
    repair: bool = True,
    **options: Any,
) -> FitResult:
    """Fit the rates of `kind`'s profile model to `system`'s published answers (module doc);
    `options` go to the domain's collectors (e.g. a shared evaluator)."""
    col, mod = collectors(kind), _module(kind)
    fit_tasks = list(fit_tasks) if fit_tasks is not None else col["tasks"](None)
    eval_tasks = list(eval_tasks) if eval_tasks is not None else fit_tasks
    real_fit = col["real"](system, fit_tasks, repair=False, **options)
    target = {k: v / max(1, real_fit.n_tasks) for k, v in real_fit.mass(sub=True).items()}
    eps = 0.5 / max(1, real_fit.n_tasks)
    best: tuple[float, dict[str, float], float | None] | None = None
    history: list[dict[str, Any]] = []
    for difficulty in difficulties:
        rates = dict(mod.initial_rates())
        for rnd in range(rounds + 1):
            profile = make_profile(kind, system, rates, difficulty)
            sim = col["simulated"](profile, fit_tasks, seeds=fit_seeds, repair=False, **options)
            loss = _loss(real_fit, sim)
            history.append({"difficulty": difficulty, "round": rnd, "loss": round(loss, 4),
                            "none_score": sim.none_score, "local_share": sim.local_share,
                            "rates": {k: round(v, 4) for k, v in rates.items()}})  # fmt: skip
            logger.info("fit %s:%s difficulty %s round %d: loss %.4f (None %.1f vs real %.1f)", kind, system,
                        difficulty, rnd, loss, sim.none_score or 0.0, real_fit.none_score or 0.0)  # fmt: skip
            if best is None or loss < best[0]:
                best = (loss, dict(rates), difficulty)
            if rnd == rounds:
                break
            cur = {k: v / max(1, sim.n_tasks) for k, v in sim.mass(sub=True).items()}
            for op, sub in mod.TARGETS.items():
                if target.get(sub, 0.0) == 0.0:  # a kind the real system never shows: no slip for it
                    rates[op] *= 0.5
                    continue
                factor = (target.get(sub, 0.0) + eps) / (cur.get(sub, 0.0) + eps)
                rates[op] = min(mod.MAX_P, rates[op] * factor**DAMPING)
    assert best is not None
    profile = make_profile(kind, system, {k: v for k, v in best[1].items() if v >= 0.002}, best[2])
    real = col["real"](system, eval_tasks, repair=repair, **options)
    default = col["simulated"](None, eval_tasks, seeds=eval_seeds, repair=repair, **options)
    fitted = col["simulated"](profile, eval_tasks, seeds=eval_seeds, repair=repair, **options)
    return FitResult(profile, real, default, fitted, history)
