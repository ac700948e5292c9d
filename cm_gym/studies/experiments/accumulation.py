"""`accumulation`: held-out score, memory tokens and regression on earlier tasks as source tasks
accumulate — CounterMem vs ReasoningBank (paper Fig. 2a–c, D.3).

Per task ordering (a seeded permutation of the build tasks), CounterMem's construction is frozen
after 0/25/50/100/200 source tasks (checkpoints count processed tasks, not records) and
ReasoningBank is built on the same prefixes. As in D.3, one trained selector is reused unchanged
at every checkpoint — the selectors of the full store (table1's) — so only the memory changes.
(b) counts memory tokens per task: the tokens of LLM calls that carry memory (revisions with a
record or guidance, memory searches), not drafting. (c) regression on earlier tasks: on the first
`earlier_tasks` source tasks of the ordering (their own memory excluded by retrieval), the score
with the memory at the first checkpoint covering them minus the score with the memory at each
later checkpoint (positive = loss). Bands: one standard deviation across orderings.
"""

from __future__ import annotations

import numpy as np

from cm_gym.studies.experiments.common import Study, episode_runs, per_task_mean, sd
from cm_gym.studies.experiments.reporting import (
    Cell,
    Direction,
    Report,
    Table,
    fmt_est,
    line_plot,
    verdict_all,
    verdict_positive,
)
from cm_gym.studies.experiments.stats import Estimate, paired_two_level, per_task, two_level_ci

NAME = "accumulation"
TITLE = "Fig. 2a–c: accumulating source tasks"
METHODS = ("countermem", "reasoningbank")
LABEL = {"countermem": "CF Memory", "reasoningbank": "ReasoningBank"}


def _order(ids: list[str], seed: int) -> list[str]:
    return [ids[int(i)] for i in np.random.default_rng(1000 + seed).permutation(len(ids))]


def run(study: Study) -> Report:
    cfg, p, z = study.cfg, study.plan, study.cfg.sizes
    agent = cfg.agents[0]
    groups: dict = {}
    meta: dict = {}
    for b in cfg.benchmarks:
        build = list(p.split(b).build)
        ckpts = [c for c in z.accumulation_checkpoints if c <= len(build)]
        earlier = min(z.earlier_tasks, len(build))
        first_cover = min((c for c in ckpts if c >= earlier), default=None)
        meta[b] = (ckpts, earlier, first_cover)
        full_store = p.store(b, agent)
        selectors = [p.selector(full_store, b, agent, s) for s in cfg.seeds]
        for o in range(z.orderings):
            order = _order(build, o)
            store = p.store(
                b, agent, build_ids=order[: max(ckpts)], checkpoints=ckpts, label=f"store {b} ordering {o}"
            )
            early_ids = order[:earlier]
            for c in ckpts:
                snap = "final" if c == max(ckpts) else str(c)
                groups[(b, o, c, "countermem", "eval")] = [
                    p.countermem_eval(
                        b, agent, store, selector=sel, snapshot=snap, seed=s, label=f"CF {b} o{o} c{c} s{s}"
                    )
                    for s, sel in zip(cfg.seeds, selectors, strict=True)
                ]
                rb = p.mechanism(b, agent, "reasoningbank", build_ids=order[:c])
                groups[(b, o, c, "reasoningbank", "eval")] = [
                    p.mechanism_eval(b, agent, "reasoningbank", built=rb, label=f"RB {b} o{o} c{c}")
                ]
                if first_cover is not None and c >= first_cover:
                    groups[(b, o, c, "countermem", "early")] = [
                        p.countermem_eval(
                            b,
                            agent,
                            store,
                            selector=sel,
                            snapshot=snap,
                            seed=s,
                            task_ids=early_ids,
                            label=f"CF {b} o{o} c{c} earlier s{s}",
                        )
                        for s, sel in zip(cfg.seeds, selectors, strict=True)
                    ]
                    groups[(b, o, c, "reasoningbank", "early")] = [
                        p.mechanism_eval(
                            b,
                            agent,
                            "reasoningbank",
                            built=rb,
                            task_ids=early_ids,
                            label=f"RB {b} o{o} c{c} earlier",
                        )
                    ]
    res = study.run_groups(groups)
    tables, figures, data, dirs = [], [], {}, []
    for b in cfg.benchmarks:
        ckpts, earlier, first_cover = meta[b]
        curves = {m: {"score": [], "tokens": [], "loss": []} for m in METHODS}
        units: dict[tuple[str, int, str], list[dict[str, float]]] = {}  # per ordering, per task
        table = Table(
            f"{b} ({agent}): held-out score, memory tokens per task and loss on the first {earlier} source tasks, "
            f"mean over {z.orderings} orderings (± sd in report.json)",
            [f"{c} tasks" for c in ckpts],
        )
        for m in METHODS:
            score_rows, tok_rows, loss_rows = [], [], []
            for c in ckpts:
                units[(m, c, "score")] = [
                    per_task(episode_runs(res[(b, o, c, m, "eval")]), "score", 100.0)
                    for o in range(z.orderings)
                ]
                units[(m, c, "tokens")] = [
                    per_task(episode_runs(res[(b, o, c, m, "eval")]), "memory_tokens")
                    for o in range(z.orderings)
                ]
                if first_cover is not None and c >= first_cover:
                    units[(m, c, "early")] = [
                        per_task(episode_runs(res[(b, o, c, m, "early")]), "score", 100.0)
                        for o in range(z.orderings)
                    ]
                scores = [study.score(res[(b, o, c, m, "eval")]).value for o in range(z.orderings)]
                toks = [
                    per_task_mean(res[(b, o, c, m, "eval")], "memory_tokens", resamples=0).value
                    for o in range(z.orderings)
                ]
                losses = []
                if first_cover is not None and c >= first_cover:
                    for o in range(z.orderings):
                        ref = study.score(res[(b, o, first_cover, m, "early")]).value
                        now = study.score(res[(b, o, c, m, "early")]).value
                        losses.append((ref or 0.0) - (now or 0.0))
                curves[m]["score"].append((float(np.mean(scores)), sd(scores)))
                curves[m]["tokens"].append((float(np.mean(toks)), sd(toks)))
                curves[m]["loss"].append((float(np.mean(losses)), sd(losses)) if losses else (np.nan, 0.0))
                score_rows.append(Cell(Estimate(float(np.mean(scores)), n=len(scores))))
                tok_rows.append(Cell(Estimate(float(np.mean(toks)), n=len(toks)), fmt="{:.0f}"))
                loss_rows.append(Cell(Estimate(float(np.mean(losses)), n=len(losses)) if losses else None))
            table.rows += [
                (f"{LABEL[m]} · score", score_rows),
                (f"{LABEL[m]} · memory tokens/task", tok_rows),
                (f"{LABEL[m]} · loss on earlier tasks (pp)", loss_rows),
            ]
            data[f"{b}/{m}"] = curves[m]
        tables.append(table)
        for key, ylabel in (
            ("score", "held-out score"),
            ("tokens", "memory tokens per task"),
            ("loss", "score loss on earlier tasks (pp)"),
        ):
            figures.append(
                str(
                    line_plot(
                        study.out_dir / f"accumulation_{b}_{key}.png",
                        f"{b}: {ylabel}",
                        ckpts,
                        {
                            LABEL[m]: ([v for v, _ in curves[m][key]], [s for _, s in curves[m][key]])
                            for m in METHODS
                        },
                        ylabel,
                    )
                )
            )
        dirs += _directions(b, ckpts, first_cover, curves, units, cfg.bootstrap)
    report = Report(
        NAME,
        TITLE,
        Report.lead_paragraph(__doc__),
        cfg.describe(),
        tables,
        dirs,
        figures,
        data=data,
    )
    report.notes.append(
        "The paper gives no numbers for Fig. 2a–c, only directions; the paper column is empty. "
        "Values are means over orderings of per-ordering scores (selector seeds averaged per task)."
    )
    return report


def _directions(
    b: str,
    ckpts: list[int],
    first_cover: int | None,
    curves: dict,
    units: dict[tuple[str, int, str], list[dict[str, float]]],
    resamples: int = 2000,
) -> list[Direction]:
    """The four Fig. 2 directions, each decided by two-level bootstrap CIs (orderings, then
    tasks) of paired differences between checkpoints — never by the curves' point values."""

    def diff(m: str, c0: int, c1: int, key: str = "score") -> Estimate:  # value at c1 − value at c0
        return paired_two_level(units[(m, c0, key)], units[(m, c1, key)], resamples)

    first, last = ckpts[0], ckpts[-1]
    cm = [v for v, _ in curves["countermem"]["score"]]
    rb = [v for v, _ in curves["reasoningbank"]["score"]]
    rise = diff("countermem", first, last)
    steps = [diff("countermem", c0, c1) for c0, c1 in zip(ckpts, ckpts[1:], strict=False)]
    rising = verdict_positive(rise)
    if rising != "not measured" and any(e.hi is not None and e.hi < 0 for e in steps):
        rising = "not reproduced"  # a significant drop between two checkpoints
    out = [
        Direction(
            f"{b}: CounterMem's held-out score keeps rising with more source tasks",
            "rises across 0→200 (no numbers given)",
            " → ".join(f"{v:.1f}" for v in cm) + f"; last − first {fmt_est(rise)} pp",
            rising,
        )
    ]
    inner = list(range(1, len(ckpts) - 1))
    if inner:
        peak = ckpts[max(inner, key=lambda i: rb[i])]
        up, down = diff("reasoningbank", first, peak), diff("reasoningbank", last, peak)
        shape = verdict_all([verdict_positive(up), verdict_positive(down)])
        ours = f"peak at {peak}: peak − first {fmt_est(up)}, peak − last {fmt_est(down)} pp"
    else:
        shape, ours = "not measured", "fewer than three checkpoints"
    out.append(
        Direction(
            f"{b}: ReasoningBank's held-out score first rises, then falls",
            "rises then falls (no numbers given)",
            " → ".join(f"{v:.1f}" for v in rb) + f"; {ours}",
            shape,
        )
    )
    toks = {m: diff(m, first, last, "tokens") for m in curves}
    out.append(
        Direction(
            f"{b}: memory (retrieval and context) tokens per task rise for both",
            "rise for both (no numbers given)",
            "; ".join(f"{LABEL[m]}: last − first {fmt_est(e, '{:+.0f}')}" for m, e in toks.items()),
            verdict_all([verdict_positive(e) for e in toks.values()]),
        )
    )
    later = [c for c in ckpts if first_cover is not None and c > first_cover]
    if later:
        less = {c: _less_loss(units, first_cover, c, resamples) for c in later}  # type: ignore[arg-type]
        out.append(
            Direction(
                f"{b}: CounterMem loses less on earlier tasks than ReasoningBank at every later checkpoint",
                "less loss at each nonzero checkpoint (no numbers given)",
                "; ".join(f"at {c}: RB loss − CF loss {fmt_est(e)} pp" for c, e in less.items()),
                verdict_all([verdict_positive(e) for e in less.values()]),
            )
        )
    return out


def _less_loss(units: dict, ref: int, c: int, resamples: int) -> Estimate:
    """(RB's loss − CF's loss) on the earlier tasks at checkpoint `c`, per ordering and task:
    loss = score at the first covering checkpoint `ref` − score at `c`."""
    per_ordering = []
    for rb0, rb1, cm0, cm1 in zip(
        *(units[(m, k, "early")] for m in ("reasoningbank", "countermem") for k in (ref, c)), strict=True
    ):
        common = set(rb0) & set(rb1) & set(cm0) & set(cm1)
        per_ordering.append({t: (rb0[t] - rb1[t]) - (cm0[t] - cm1[t]) for t in common})
    return two_level_ci(per_ordering, resamples)
