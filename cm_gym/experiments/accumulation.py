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

from cm_gym.experiments.common import Study, per_task_mean, sd
from cm_gym.experiments.reporting import Cell, Direction, Report, Table, line_plot
from cm_gym.experiments.stats import Estimate

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
        table = Table(
            f"{b} ({agent}): held-out score, memory tokens per task and loss on the first {earlier} source tasks, "
            f"mean over {z.orderings} orderings (± sd in report.json)",
            [f"{c} tasks" for c in ckpts],
        )
        for m in METHODS:
            score_rows, tok_rows, loss_rows = [], [], []
            for c in ckpts:
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
        dirs += _directions(b, ckpts, curves)
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


def _directions(b: str, ckpts: list[int], curves: dict) -> list[Direction]:
    cm = [v for v, _ in curves["countermem"]["score"]]
    rb = [v for v, _ in curves["reasoningbank"]["score"]]
    cm_sd = max([s for _, s in curves["countermem"]["score"]] + [0.0])
    rises = cm[-1] - cm[0]
    peak = int(np.argmax(rb))
    rb_rise_fall = 0 < peak < len(rb) - 1 and rb[peak] > rb[0] and rb[peak] > rb[-1]
    out = [
        Direction(
            f"{b}: CounterMem's held-out score keeps rising with more source tasks",
            "rises across 0→200 (no numbers given)",
            " → ".join(f"{v:.1f}" for v in cm),
            "reproduced"
            if rises > cm_sd and all(x <= y + cm_sd for x, y in zip(cm, cm[1:], strict=False))
            else ("not reproduced" if rises < -cm_sd else "inconclusive"),
        ),
        Direction(
            f"{b}: ReasoningBank's held-out score first rises, then falls",
            "rises then falls (no numbers given)",
            " → ".join(f"{v:.1f}" for v in rb),
            "reproduced" if rb_rise_fall else "not reproduced",
        ),
    ]
    toks = {m: [v for v, _ in curves[m]["tokens"]] for m in curves}
    out.append(
        Direction(
            f"{b}: memory (retrieval and context) tokens per task rise for both",
            "rise for both (no numbers given)",
            "; ".join(f"{LABEL[m]}: " + " → ".join(f"{v:.0f}" for v in toks[m]) for m in toks),
            "reproduced" if all(t[-1] > t[0] for t in toks.values()) else "not reproduced",
        )
    )
    losses = {m: [v for v, _ in curves[m]["loss"]] for m in curves}
    later = [i for i, v in enumerate(losses["countermem"]) if not np.isnan(v)][1:]
    if later:
        cm_l, rb_l = [losses["countermem"][i] for i in later], [losses["reasoningbank"][i] for i in later]
        verdict = (
            "reproduced"
            if all(c < r for c, r in zip(cm_l, rb_l, strict=True))
            else "not reproduced"
            if any(c > r for c, r in zip(cm_l, rb_l, strict=True))
            else "inconclusive"
        )
        out.append(
            Direction(
                f"{b}: CounterMem loses less on earlier tasks than ReasoningBank at every later checkpoint",
                "less loss at each nonzero checkpoint (no numbers given)",
                "; ".join(f"{LABEL[m]}: " + ", ".join(f"{losses[m][i]:+.1f}" for i in later) for m in losses),
                verdict,
            )
        )
    return out
