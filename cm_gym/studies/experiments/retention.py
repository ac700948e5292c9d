"""`retention`: which records to keep at equal capacity — utility vs similarity vs recency vs
random retention (paper Fig. 2d, D.3, Eq. 5).

Each rule builds its own store from the same build tasks under the same record capacity and gets
its own selectors (one per seed); all are evaluated on the same held-out tasks. The capacity must
bind for the rules to differ: unless set (``Sizes.retention_capacity``), it is half the number of
records the unbounded default store admits (B = 200 never binds on the generated benchmarks),
which is stated in the report.
"""

from __future__ import annotations

from cm_gym.studies.experiments import paper
from cm_gym.studies.experiments.common import Study
from cm_gym.studies.experiments.reporting import (
    Cell,
    Direction,
    Report,
    Table,
    bar_plot,
    fmt_est,
    verdict_positive,
)

NAME = "retention"
TITLE = "Fig. 2d: record retention at equal capacity"
RULES = ("utility", "similarity", "recent", "random")
LABEL = {"utility": "Utility", "similarity": "Similarity", "recent": "Recency", "random": "Random"}


def run(study: Study) -> Report:
    cfg, p = study.cfg, study.plan
    agent = cfg.agents[0]
    capacity: dict[str, int] = {}
    for b in cfg.benchmarks:
        if cfg.sizes.retention_capacity:
            capacity[b] = cfg.sizes.retention_capacity
        else:
            (full,) = study.run([p.store(b, agent)])
            capacity[b] = max(2, int(full["records"]) // 2)
    groups = {}
    for b in cfg.benchmarks:
        for rule in RULES:
            store = p.store(
                b, agent, retention=rule, capacity=capacity[b], label=f"store {b} {rule} B={capacity[b]}"
            )
            groups[(b, rule)] = p.cf_memory(b, agent, store=store)
    res = study.run_groups(groups)
    table = Table(f"Held-out score by retention rule at equal capacity ({agent})", [LABEL[r] for r in RULES])
    dirs, data = [], {}
    for b in cfg.benchmarks:
        ests = [study.score(res[(b, r)]) for r in RULES]
        table.rows.append(
            (
                f"{b} (capacity {capacity[b]} records)",
                [Cell(e, paper.RETENTION[r]) for e, r in zip(ests, RULES, strict=True)],
            )
        )
        data[b] = {r: e for r, e in zip(RULES, ests, strict=True)} | {"capacity": capacity[b]}
        for hi, lo in zip(RULES, RULES[1:], strict=False):
            diff = study.paired(res[(b, lo)], res[(b, hi)])
            dirs.append(
                Direction(
                    f"{b}: {LABEL[hi]} retention scores above {LABEL[lo]}",
                    f"{paper.RETENTION[hi]} vs {paper.RETENTION[lo]} ({paper.RETENTION[hi] - paper.RETENTION[lo]:+.1f})",
                    f"{fmt_est(diff)} pp",
                    verdict_positive(diff),
                )
            )
    fig = bar_plot(
        study.out_dir / "retention.png",
        "Score by retention rule",
        [LABEL[r] for r in RULES],
        {b: [data[b][r] for r in RULES] for b in cfg.benchmarks},
        {cfg.benchmarks[0]: [paper.RETENTION[r] for r in RULES]},
        "score",
    )
    report = Report(
        NAME,
        TITLE,
        Report.lead_paragraph(__doc__),
        cfg.describe(),
        [table],
        dirs,
        [str(fig)],
        data=data,
    )
    report.notes.append(
        "Capacity: half the records the unbounded store admits, so every rule has to evict "
        "(the paper's B = 200 is never reached on the generated benchmarks)."
    )
    return report
