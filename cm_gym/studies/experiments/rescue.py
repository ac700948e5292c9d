"""`rescue`: rescued vs broken tasks over paired runs, and what removing the applicability condition
does on ordinary vs look-alike tasks (paper Fig. 8, E.3).

(a) Each method is paired with its own no-memory run on the same held-out tasks: a task is
*rescued* when it fails without memory and is solved with it, *broken* in the opposite case (a
task flipping differently across selector seeds counts by its seed-average). The paper's counts
are over 120 paired tasks per domain; ours are over our held-out tasks and are also shown scaled
to 120. (b) The condition c is removed at both sites — the retrieval filter and the rendered record
(`use_conditions=False`) — with the store and the selectors unchanged; harmful use is per selected
record use, on look-alike targets (`targets.py`, against the full store) and on the other
(ordinary) held-out tasks.
"""

from __future__ import annotations

from cm_gym.memory.snapshot import FrozenStore
from cm_gym.studies.experiments import paper
from cm_gym.studies.experiments.common import Study, episode_runs
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
from cm_gym.studies.experiments.stats import Estimate, per_task
from cm_gym.studies.experiments.table1 import domain_of
from cm_gym.studies.experiments.targets import classify

NAME = "rescue"
TITLE = "Fig. 8 / E.3: rescued and broken tasks; removing the applicability condition"


def _flips(base: dict[str, float], treated: dict[str, float]) -> tuple[float, float]:
    """Expected rescued and broken counts (solve rates averaged over seeds per task)."""
    common = sorted(set(base) & set(treated))
    rescued = sum((1 - base[t]) * treated[t] for t in common)
    broken = sum(base[t] * (1 - treated[t]) for t in common)
    return float(rescued), float(broken)


def run(study: Study) -> Report:
    cfg, p = study.cfg, study.plan
    agent = cfg.agents[0]
    groups = {}
    for b in cfg.benchmarks:
        store = p.store(b, agent)
        groups[(b, "none")] = [p.mechanism_eval(b, agent, "none")]
        groups[(b, "reasoningbank")] = [p.mechanism_eval(b, agent, "reasoningbank")]
        groups[(b, "countermem")] = p.cf_memory(b, agent, store=store)
        groups[(b, "no_condition")] = p.cf_memory(b, agent, store=store, use_conditions=False)
        groups[(b, "store")] = [store]
    res = study.run_groups(groups)
    ta = Table(
        f"(a) rescued / broken / net over {{n}} paired held-out tasks ({agent}); net per 120 in the last column",
        ["Rescued", "Broken", "Net", f"Net per {paper.RESCUE_PAIRS}"],
    )
    tb = Table(
        "(b) harmful use per selected record use (%), with / without the condition c",
        ["Ordinary, with c", "Ordinary, without c", "Look-alike, with c", "Look-alike, without c"],
    )
    dirs, data, nets = [], {}, {}
    for b in cfg.benchmarks:
        dom = domain_of(b)
        solved = {
            m: per_task(episode_runs(res[(b, m)]), "solved") for m in ("none", "reasoningbank", "countermem")
        }
        for m in ("reasoningbank", "countermem"):
            resc, brk = _flips(solved["none"], solved[m])
            n = len(set(solved["none"]) & set(solved[m]))
            net = resc - brk
            nets[(b, m)] = Estimate(net * paper.RESCUE_PAIRS / n if n else None, n=n)
            pnet = paper.RESCUE_NET.get(m, {}).get(dom)
            ta.rows.append(
                (
                    f"{b} ({dom}) · {'CF Memory' if m == 'countermem' else 'ReasoningBank'} (n={n})",
                    [
                        Cell(Estimate(resc), None),
                        Cell(Estimate(brk), None),
                        Cell(Estimate(net), None),
                        Cell(nets[(b, m)], pnet),
                    ],
                )
            )
            data[f"{b}/{m}"] = {"rescued": resc, "broken": brk, "net": net, "n": n}
        dirs.append(net_direction(study, res, b, dom, nets))
        tasks, split = p.tasks(b), p.split(b)
        records = FrozenStore.open(res[(b, "store")][0].path("snapshot")).records
        look = classify(
            records,
            [tasks[i] for i in split.build],
            [tasks[i] for i in split.eval],
            {tasks[i].env_id for i in split.build},
        ).by_condition["look_alike"]
        ordinary = [i for i in split.eval if i not in set(look)]
        cells, ests = [], {}
        for name, ids in (("ordinary", ordinary), ("look_alike", look)):
            for m, pi in (("countermem", 0), ("no_condition", 1)):
                e = (
                    study.rate(res[(b, m)], "uses_worse_than_draft", "selected_uses", ids, 100.0)
                    if ids
                    else Estimate(None)
                )
                ests[(name, m)] = e
                cells.append(Cell(e, paper.CONDITION_REMOVAL[name][pi]))
        tb.rows.append((f"{b} (look-alike n={len(look)}, ordinary n={len(ordinary)})", cells))
        data[f"{b}/condition_removal"] = {f"{k[0]}/{k[1]}": v for k, v in ests.items()}
        if look:
            rise_look = study.paired_rate(
                res[(b, "countermem")],
                res[(b, "no_condition")],
                "uses_worse_than_draft",
                "selected_uses",
                look,
                100.0,
            )
            dirs.append(
                Direction(
                    f"{b}: removing c raises harmful use on look-alike tasks",
                    "11.8% → 34.2% (ordinary 4.2% → 6.1%)",
                    f"without − with c {fmt_est(rise_look)} pp (ordinary: {fmt_est(ests[('ordinary', 'no_condition')])} vs {fmt_est(ests[('ordinary', 'countermem')])})",
                    verdict_positive(rise_look),
                )
            )
    ta.title = ta.title.replace("{n}", "/".join(str(data[f"{b}/countermem"]["n"]) for b in cfg.benchmarks))
    fig = bar_plot(
        study.out_dir / "rescue_net.png",
        f"Net rescued per {paper.RESCUE_PAIRS} paired tasks",
        list(cfg.benchmarks),
        {
            "ReasoningBank": [nets[(b, "reasoningbank")] for b in cfg.benchmarks],
            "CF Memory": [nets[(b, "countermem")] for b in cfg.benchmarks],
        },
        {
            "ReasoningBank": [paper.RESCUE_NET["reasoningbank"].get(domain_of(b)) for b in cfg.benchmarks],
            "CF Memory": [paper.RESCUE_NET["countermem"].get(domain_of(b)) for b in cfg.benchmarks],
        },
        "net tasks",
    )
    report = Report(
        NAME,
        TITLE,
        Report.lead_paragraph(__doc__),
        cfg.describe(),
        [ta, tb],
        dirs,
        [str(fig)],
        data=data,
    )
    report.notes.append(
        "Rescued/broken are expected counts: with several selector seeds a task's solve indicator is "
        "averaged over seeds first. Harmful use = the executed action scored below "
        "the memory-free draft (SPEC §3, amended)."
    )
    return report


def net_direction(study: Study, res: dict, b: str, dom: str, nets: dict) -> Direction:
    """Fig. 8a's direction, decided by paired CIs of the solve rate: CF − None (the net per task)
    and CF − ReasoningBank, both above 0 — never by the nets' point values."""
    diff = study.paired(res[(b, "reasoningbank")], res[(b, "countermem")], key="solved")
    net_cf = study.paired(res[(b, "none")], res[(b, "countermem")], key="solved")
    shown = " ".join(
        f"{name} net {v:+.1f}," if (v := nets[(b, m)].value) is not None else f"{name} net —,"
        for name, m in (("CF", "countermem"), ("RB", "reasoningbank"))
    )
    return Direction(
        f"{b}: CF Memory's net (rescued − broken) is positive and above ReasoningBank's",
        f"CF {paper.RESCUE_NET['countermem'].get(dom, '—')} vs RB {paper.RESCUE_NET['reasoningbank'].get(dom, '—')} per 120 ({dom})",
        f"{shown.rstrip(',')} per 120; CF − None solve rate {fmt_est(net_cf, '{:+.3f}')}; "
        f"CF − RB solve rate {fmt_est(diff, '{:+.3f}')}",
        verdict_all([verdict_positive(net_cf), verdict_positive(diff)]),
    )
