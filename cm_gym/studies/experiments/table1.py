"""`table1`: every memory mechanism × {ReAct, Reflexion} × the benchmarks — score and tokens
(paper Table 1, §5.1). Our benchmarks are placed in the paper's domain columns by their domain
(several benchmarks of one domain are averaged, as the paper averages a domain's benchmarks); the
paper column is gpt-oss-120b's group."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cm_gym.domains.registry import get_benchmark
from cm_gym.studies.experiments import paper
from cm_gym.studies.experiments.common import Study, total_tokens_m
from cm_gym.studies.experiments.config import PAPER_DOMAIN
from cm_gym.studies.experiments.reporting import (
    Cell,
    Direction,
    Report,
    Table,
    bar_plot,
    fmt_est,
    verdict_all,
    verdict_positive,
)
from cm_gym.studies.experiments.runner import UnitResult
from cm_gym.studies.experiments.stats import Estimate

NAME = "table1"
TITLE = "Table 1: memory mechanisms across agents"
MECHANISMS = ("none", "best_of_n", "expel", "generative_agents", "voyager", "memgpt", "countermem")
LABELS = {
    "none": "None",
    "best_of_n": "Best-of-N (compute control)",
    "expel": "ExpeL",
    "generative_agents": "Generative Agents",
    "voyager": "Voyager",
    "memgpt": "MemGPT",
    "countermem": "CF Memory",
}


def domain_of(benchmark: str) -> str:
    name = get_benchmark(benchmark).domain_name
    return PAPER_DOMAIN.get(name, name)


def plan_runs(study: Study) -> dict[tuple[str, str, str], list]:
    """(benchmark, agent, mechanism) → evaluation units (one per seed for CF Memory)."""
    p = study.plan
    groups = {}
    for b in study.cfg.benchmarks:
        for a in study.cfg.agents:
            for m in MECHANISMS:
                groups[(b, a, m)] = p.cf_memory(b, a) if m == "countermem" else [p.mechanism_eval(b, a, m)]
    return groups


def _domain_estimate(study: Study, runs: dict, agent: str, mech: str, benches: Sequence[str]) -> Estimate:
    """The domain's score: the mean of its benchmarks' scores (CI: the mean of the per-benchmark
    CI bounds, a conservative combination for independent benchmarks)."""
    ests = [study.score(runs[(b, agent, mech)]) for b in benches]
    vals = [e for e in ests if e.value is not None]
    if not vals:
        return Estimate(None)
    return Estimate(
        float(np.mean([e.value for e in vals])),
        float(np.mean([e.lo for e in vals])),
        float(np.mean([e.hi for e in vals])),
        sum(e.n for e in vals),
    )


def _mean_gain(study: Study, runs: dict, agent: str, base: str, treated: str, key: str = "score") -> Estimate:
    """Paired gain of `treated` over `base` (score in pp, or another per-task counter), averaged
    over benchmarks with equal weight."""
    ests = [
        study.paired(runs[(b, agent, base)], runs[(b, agent, treated)], key=key) for b in study.cfg.benchmarks
    ]
    ests = [e for e in ests if e.value is not None]
    if not ests:
        return Estimate(None)
    return Estimate(
        float(np.mean([e.value for e in ests])),
        float(np.mean([e.lo for e in ests])),
        float(np.mean([e.hi for e in ests])),
        sum(e.n for e in ests),
    )


def run(study: Study) -> Report:
    cfg = study.cfg
    runs: dict[tuple[str, str, str], list[UnitResult]] = study.run_groups(plan_runs(study))
    domains: dict[str, list[str]] = {}
    for b in cfg.benchmarks:
        domains.setdefault(domain_of(b), []).append(b)
    cols = list(domains)
    table = Table(
        "Score (0–100) per domain and total task-run tokens (M); paper: gpt-oss-120b",
        [*cols, "Mean", "Tokens (M)"],
    )
    data: dict = {}
    for a in cfg.agents:
        pg = paper.TABLE1["gpt-oss-120b"].get(a, {})
        for m in MECHANISMS:
            pv = pg.get(m)
            cells = []
            for d in cols:
                est = _domain_estimate(study, runs, a, m, domains[d])
                i = paper.TABLE1_DOMAINS.index(d) if d in paper.TABLE1_DOMAINS else None
                cells.append(Cell(est, pv[i] if pv and i is not None else None))
                data[f"{a}/{m}/{d}"] = est
            vals = [c.ours.value for c in cells if c.ours is not None and c.ours.value is not None]
            mean = Estimate(float(np.mean(vals))) if vals else Estimate(None)
            paper_mean = float(np.mean(pv[:4])) if pv else None
            tokens = sum(total_tokens_m(runs[(b, a, m)]) for b in cfg.benchmarks)
            cells += [Cell(mean, paper_mean), Cell(Estimate(tokens), pv[4] if pv else None, "{:.3f}")]
            data[f"{a}/{m}/tokens_m"] = tokens
            table.rows.append((f"{a} · {LABELS[m]}", cells))
    table.note = (
        "Mean = the mean of our domain columns (the paper's: its four domains). Tokens: all task-run "
        "tokens summed over our benchmarks (not comparable in size with the paper's, which ran "
        "different benchmarks with a real LLM). Construction tokens are reported in report.json."
    )
    build = Table(
        "Construction cost on T_build, summed over our benchmarks (not in the paper's table): "
        "tokens (M), LLM calls, evaluator calls",
        ["Tokens (M)", "LLM calls", "Evaluator calls"],
        note="Task-run tokens (above) exclude construction, as in the paper; offline selector training "
        "is not costed.",
    )
    for a in cfg.agents:
        for m in MECHANISMS:
            costs = [runs[(b, a, m)][0].get("build_cost") or {} for b in cfg.benchmarks]
            totals = [
                sum(float(c.get(k) or 0) for c in costs) for k in ("tokens", "llm_calls", "evaluator_calls")
            ]
            build.rows.append(
                (
                    f"{a} · {LABELS[m]}",
                    [
                        Cell(Estimate(totals[0] / 1e6), fmt="{:.3f}"),
                        Cell(Estimate(totals[1]), fmt="{:.0f}"),
                        Cell(Estimate(totals[2]), fmt="{:.0f}"),
                    ],
                )
            )
            data[f"{a}/{m}/construction"] = totals
    report = Report(NAME, TITLE, Report.lead_paragraph(__doc__), cfg.describe(), [table, build], data=data)
    report.directions = directions(study, runs)
    fig = bar_plot(
        study.out_dir / "table1_scores.png",
        "Score by mechanism (mean over our domains)",
        [LABELS[m].split(" (")[0] for m in MECHANISMS],
        {a: [_mean_over(study, runs, a, m) for m in MECHANISMS] for a in cfg.agents},
        {
            a: [float(np.mean(paper.TABLE1["gpt-oss-120b"][a][m][:4])) for m in MECHANISMS]
            for a in cfg.agents
            if a in paper.TABLE1["gpt-oss-120b"]
        },
        "score",
    )
    report.figures.append(str(fig))
    return report


def _mean_over(study: Study, runs: dict, agent: str, mech: str) -> Estimate:
    ests = [study.score(runs[(b, agent, mech)]) for b in study.cfg.benchmarks]
    vals = [e.value for e in ests if e.value is not None]
    return Estimate(float(np.mean(vals))) if vals else Estimate(None)


def directions(study: Study, runs: dict) -> list[Direction]:
    cfg = study.cfg
    out = []
    gains = {a: _mean_gain(study, runs, a, "none", "countermem") for a in cfg.agents}
    out.append(
        Direction(
            "CF Memory scores above None in every agent group (mean over domains)",
            f"+{paper.CF_GAIN_RANGE[0]} to +{paper.CF_GAIN_RANGE[1]} pp",
            "; ".join(f"{a}: {fmt_est(g)} pp" for a, g in gains.items()),
            verdict_all([verdict_positive(g) for g in gains.values()]),
        )
    )
    bon_gap = {a: _mean_gain(study, runs, a, "best_of_n", "countermem") for a in cfg.agents}
    tok = {
        a: (
            sum(total_tokens_m(runs[(b, a, "best_of_n")]) for b in cfg.benchmarks),
            sum(total_tokens_m(runs[(b, a, "countermem")]) for b in cfg.benchmarks),
        )
        for a in cfg.agents
    }
    more = {a: _mean_gain(study, runs, a, "countermem", "best_of_n", key="tokens") for a in cfg.agents}
    out.append(
        Direction(
            "Best-of-N spends more task-run tokens than CF Memory and scores lower",
            f"{paper.BEST_OF_N_TOKENS[0]}–{paper.BEST_OF_N_TOKENS[1]} M vs {paper.CF_TOKENS[0]}–{paper.CF_TOKENS[1]} M; lower in every group",
            "; ".join(
                f"{a}: tokens {tok[a][0]:.3f} vs {tok[a][1]:.3f} M (BoN − CF per task {fmt_est(more[a], '{:+.0f}')}), "
                f"CF − BoN {fmt_est(bon_gap[a])} pp"
                for a in cfg.agents
            ),
            verdict_all([verdict_positive(e) for e in (*more.values(), *bon_gap.values())]),
        )
    )
    best = {}
    for a in cfg.agents:
        best[a] = verdict_all(
            [
                verdict_positive(_mean_gain(study, runs, a, m, "countermem"))
                for m in MECHANISMS
                if m != "countermem"
            ]
        )
    out.append(
        Direction(
            "CF Memory has the highest mean score of all mechanisms in every group",
            "highest four-domain mean in all four groups",
            "; ".join(f"{a}: {best[a]} against every other row (paired)" for a in cfg.agents),
            verdict_all(list(best.values())),
        )
    )
    saved = {a: _mean_gain(study, runs, a, "countermem", "none", key="tokens") for a in cfg.agents}
    ratio = {
        a: sum(total_tokens_m(runs[(b, a, "countermem")]) for b in cfg.benchmarks)
        / max(1e-12, sum(total_tokens_m(runs[(b, a, "none")]) for b in cfg.benchmarks))
        for a in cfg.agents
    }
    out.append(
        Direction(
            "CF Memory uses fewer task-run tokens than None",
            "7.7–42.0% fewer",
            "; ".join(
                f"{a}: {100 * (ratio[a] - 1):+.1f}% tokens vs None (None − CF per task {fmt_est(saved[a], '{:+.0f}')})"
                for a in cfg.agents
            ),
            verdict_all([verdict_positive(e) for e in saved.values()]),
        )
    )
    return out
