"""`staleness`: environments that change under a frozen store — does re-verification find the
records whose correction no longer holds, does retiring them remove the harm they cause, and what
does it cost next to rebuilding the store (paper App. A, "detecting or retiring stale records").

For every change family of each benchmark's domain (`Domain.change_families`), the store built on
the original environment meets held-out tasks on the changed one, read through five stores under
the same fixed memory-use rule (top-1, so every retrieved record gets used and harm is visible):
*kept* (the old store, version filter off: stale records offered), *version filter* (the old
store; retrieval drops every record whose environment's content version changed), *retired* (`cm-gym
memory reverify --no-repair`: stale records retired), *repaired* (reverify with the one-edit
repair search) and *rebuilt* (construction from scratch on the changed environment), plus no
memory. Harmful use is per selected use (the executed action scored below the memory-free draft,
checked on a fork); score is 0–100; differences are paired bootstrap CIs over tasks.
Re-verification is compared with the rebuild record by record (`staleness_measure`).
"""

from __future__ import annotations

from typing import Any

from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.memory.snapshot import FrozenStore
from cm_gym.studies.experiments.common import Study, ratio_ci
from cm_gym.studies.experiments.reporting import Cell, Direction, Report, Table, fmt_est, verdict_positive
from cm_gym.studies.experiments.runner import Unit, UnitResult
from cm_gym.studies.experiments.staleness_measure import (
    agreement,
    harm_by_verdict,
    load_json,
    rebuild_truth,
    verdict_statuses,
)
from cm_gym.studies.experiments.stats import Estimate

NAME = "staleness"
TITLE = "Stale records: re-verification, retirement and repair after the environment changes"
CONDITIONS = ("none", "kept", "versions", "retired", "repaired", "rebuilt")
LABEL = {
    "none": "no memory",
    "kept": "stale kept",
    "versions": "version filter",
    "retired": "stale retired",
    "repaired": "retired + repaired",
    "rebuilt": "rebuilt store",
}


def families(benchmark: str, wanted: Any = None) -> list[str]:
    """The change families to run on `benchmark` (all of its domain's, or the configured ones)."""
    names = list(get_domain(get_benchmark(benchmark).domain_name).change_families())
    return [n for n in names if not wanted or n in wanted]


def plan(study: Study, b: str, fam: str) -> dict[str, Unit]:
    """Every unit of one (benchmark, family) cell."""
    p, cfg = study.plan, study.cfg
    agent = cfg.agents[0]
    base = p.base(b, agent)
    env = Unit("changed_env", {**base, "family": fam, "change_seed": 0}, label=f"change {b}/{fam}")
    store = p.store(b, agent)
    rebuilt = Unit(
        "store",
        {**store.params, "log_verified": True},
        {"env": env},
        label=f"rebuild {b}/{fam}",
        runtime=p.runtime,
    )
    units: dict[str, Unit] = {"env": env, "store": store, "rebuilt_store": rebuilt}
    units["decisions"] = Unit(
        "decision_rebuild", {**base, "family": fam, "K": 4}, {"store": store, "env": env},
        label=f"rebuild decisions {b}/{fam}", runtime=p.runtime,
    )  # fmt: skip
    units["drift"] = Unit(
        "decision_rebuild", {**base, "K": 4}, {"store": store},
        label=f"rebuild decisions {b} (unchanged)", runtime=p.runtime,
    )  # fmt: skip
    for name, repair in (("retired", False), ("repaired", True)):
        units[f"{name}_store"] = Unit(
            "reverify",
            {**base, "family": fam, "repair": repair, "K": 4},
            {"store": store, "env": env},
            label=f"reverify {b}/{fam}" + (" (repairs)" if repair else ""),
            runtime=p.runtime,
        )
    ids = list(p.split(b).eval)
    ev = {"mechanism": "countermem", "task_ids": ids, "retrieval": "matched", "use_conditions": True}
    ev.update(snapshot="final", seed=0, policy="top1", log_uses=True)
    for cond, source, check in (
        ("kept", store, False),
        ("versions", store, True),
        ("retired", units["retired_store"], True),
        ("repaired", units["repaired_store"], True),
        ("rebuilt", rebuilt, True),
    ):
        units[cond] = Unit(
            "evaluate",
            {**base, **ev, "check_env_versions": check},
            {"store": source, "env": env},
            label=f"eval {b}/{fam} {cond}",
        )
    units["none"] = Unit(
        "evaluate",
        {**base, "mechanism": "none", "mparams": {}, "task_ids": ids},
        {"env": env},
        label=f"eval {b}/{fam} none",
    )
    return units


def run(study: Study) -> Report:
    cfg = study.cfg
    wanted = cfg.extra.get("families")
    cells = {(b, f): plan(study, b, f) for b in cfg.benchmarks for f in families(b, wanted)}
    envs = dict(zip(cells, study.run([c["env"] for c in cells.values()]), strict=True))
    skipped = [f"{b} · {f}" for (b, f), e in envs.items() if not e["touched_envs"]]
    cells = {key: units for key, units in cells.items() if envs[key]["touched_envs"]}  # changed something
    res = study.run_groups({key: list(units.values()) for key, units in cells.items()})
    res_by = {key: dict(zip(cells[key], res[key], strict=True)) for key in cells}
    detect = Table("Re-verification against a rebuild on the changed environment (store rebuilt | decisions rebuilt)", [
        "records", "valid", "repairable", "stale", "rebuild: no longer holds", "detect P %", "detect R %",
        "decisions: no longer hold", "detect P %", "detect R %", "retire P %", "retire R %",
        "drift (unchanged env)", "no drift: no longer hold", "detect P %", "detect R %"])  # fmt: skip
    score = Table(
        "Score (0–100) on held-out tasks of the changed environment", [LABEL[c] for c in CONDITIONS]
    )
    harm = Table("Harmful use (% of selected uses)", [LABEL[c] for c in CONDITIONS[1:]])
    diffs = Table("Paired differences (pp, 95% CI)", [
        "harm: kept − retired", "harm: kept − repaired", "score: retired − kept", "score: repaired − kept",
        "score: rebuilt − repaired"])  # fmt: skip
    exposed = Table("Tasks where the kept store used a record reverify flags (stale or repairable)", [
        "tasks", "flagged uses", "flagged uses: harmful %", "harmful uses/task: kept − retired",
        "harmful uses/task: kept − repaired", "score: retired − kept", "score: repaired − kept"])  # fmt: skip
    by_verdict = Table("Stale records kept: uses and harmful uses (% of uses) by reverify's verdict", [
        "valid: uses", "valid: harmful %", "repairable: uses", "repairable: harmful %", "stale: uses", "stale: harmful %"])  # fmt: skip
    cost = Table("Cost: re-verification vs rebuilding", [
        "reverify calls", "rebuild calls", "reverify tokens", "rebuild tokens", "reverify s", "rebuild s"])  # fmt: skip
    dirs, data = [], {}
    for (b, fam), r in res_by.items():
        row = f"{b} · {fam}"
        d = _cell(study, b, fam, r)
        data[row] = _plain(d)
        a, z = d["agreement"], d["decision_agreement"]
        c = a["counts"]
        n = {s: sum(c[s].values()) for s in ("valid", "repairable", "stale")}
        detect.rows.append((f"{row} ({d['change']})", [
            *(_num(v) for v in (a["records"], n["valid"], n["repairable"], n["stale"], _positives(a))),
            _pct(a["detect_precision"]), _pct(a["detect_recall"]), _num(_positives(z)),
            *(_pct(z[k]) for k in ("detect_precision", "detect_recall", "retire_precision", "retire_recall")),
            _num(len(d["drift"])), _num(_positives(d["drift_agreement"])),
            *(_pct(d["drift_agreement"][k]) for k in ("detect_precision", "detect_recall"))]))  # fmt: skip
        score.rows.append((row, [Cell(d["score"][c]) for c in CONDITIONS]))
        harm.rows.append((row, [Cell(d["harm"][c]) for c in CONDITIONS[1:]]))
        diffs.rows.append((row, [Cell(d["diff"][k]) for k in DIFFS]))
        x = d["exposed"]
        exposed.rows.append((row, [_num(x["tasks"]), _num(x["uses"]), Cell(x["harmful"]),
                                   *(Cell(x[k], None, "{:.2f}" if k.startswith("harm") else "{:.1f}") for k in EXPOSED_DIFFS)]))  # fmt: skip
        cost.rows.append((row, [_num(v) for v in d["cost"].values()]))
        hv = d["harm_by_verdict"]
        by_verdict.rows.append((row, [c for s in ("valid", "repairable", "stale") for c in (
            _num(hv[s]["uses"]), _pct(hv[s]["harmful"] / hv[s]["uses"] if hv[s]["uses"] else None))]))  # fmt: skip
        for key, what in (
            ("harm_kept_retired", "retiring"),
            ("harm_kept_repaired", "retiring and repairing"),
        ):
            est = x[key]
            dirs.append(Direction(
                f"{row}: on tasks that used a flagged record, {what} lowers harmful uses (kept − after > 0)",
                "— (beyond the paper)", fmt_est(est), verdict_positive(est)))  # fmt: skip
    report = Report(
        NAME,
        TITLE,
        Report.lead_paragraph(__doc__),
        cfg.describe(),
        [detect, score, harm, diffs, by_verdict, exposed, cost],
        dirs,
        [],
        data=data,
    )
    report.notes += [
        "Detect: reverify calls a record stale or repairable; positives are records the reference no longer verifies "
        "as stored. Retire: reverify calls it stale; positives are records whose kind of correction the reference "
        "found nowhere on its source decision. Two references (cm_gym/studies/experiments/staleness_measure.py): the rebuilt "
        "store (it also drifts where construction-time reuse took another path — the control family's positives "
        "measure that drift) and each record's decision rebuilt by construction's own Module I + II. The decision "
        "rebuild also runs on the unchanged environment: records it does not reproduce there are its own drift "
        "(e.g. another draw of the alternatives), and the last columns leave them out.",
        "Memory-use rule: top-1 (fixed) in every condition, so harm is not hidden by a selector trained on the old store.",
        "Families that changed nothing on these benchmarks (a change of another benchmark's tasks) were left out: "
        + (", ".join(skipped) or "none")
        + ".",
    ]
    return report


DIFFS = (
    "harm_kept_retired",
    "harm_kept_repaired",
    "score_retired_kept",
    "score_repaired_kept",
    "score_rebuilt_repaired",
)
EXPOSED_DIFFS = ("harm_kept_retired", "harm_kept_repaired", "score_retired_kept", "score_repaired_kept")


def _diffs(study: Study, runs: dict[str, list[UnitResult]], ids: list[str] | None) -> dict[str, Estimate]:
    harm = ("uses_worse_than_draft", "selected_uses", ids, 100.0)
    return {
        "harm_kept_retired": study.paired_rate(runs["retired"], runs["kept"], *harm),
        "harm_kept_repaired": study.paired_rate(runs["repaired"], runs["kept"], *harm),
        "score_retired_kept": study.paired(runs["kept"], runs["retired"], ids),
        "score_repaired_kept": study.paired(runs["kept"], runs["repaired"], ids),
        "score_rebuilt_repaired": study.paired(runs["repaired"], runs["rebuilt"], ids),
    }


def _exposed(study: Study, runs: dict[str, list[UnitResult]], statuses: dict[str, str]) -> dict[str, Any]:
    """Tasks whose kept run used a record reverify flags: how often those uses were harmful (a
    ratio with a bootstrap CI over tasks), and the paired differences on exactly those tasks."""
    flagged = {rid for rid, s in statuses.items() if s in ("stale", "repairable")}
    per_task = []
    for e in runs["kept"][0]["episodes"]:
        uses = [u for u in e.get("use_log", ()) if set(str(u[0]).split("+")) & flagged]
        if uses:
            bad = sum(d is not None and float(sc) < float(d) for _, sc, d in uses)
            per_task.append({"task_id": e["task_id"], "uses": len(uses), "bad": bad})
    ids = [t["task_id"] for t in per_task]
    out: dict[str, Any] = {"tasks": len(ids), "uses": sum(t["uses"] for t in per_task)}
    out["harmful"] = (
        ratio_ci([per_task], "bad", "uses", None, study.cfg.bootstrap, 100.0) if ids else Estimate(None)
    )
    diffs = _diffs(study, runs, ids) if ids else {}
    out.update({k: diffs.get(k, Estimate(None)) for k in EXPOSED_DIFFS})
    for cond in ("retired", "repaired"):  # harmful uses per exposed task: defined even when none remain
        out[f"harm_kept_{cond}"] = (
            study.paired(runs[cond], runs["kept"], ids, key="uses_worse_than_draft")
            if ids
            else Estimate(None)
        )
    return out


def _plain(obj: Any) -> Any:
    """Estimates as plain dicts, recursively (report.json)."""
    if isinstance(obj, Estimate):
        return obj.as_dict()
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def _positives(a: dict[str, Any]) -> int:
    """Records the reference says no longer hold as stored ("changed" or "gone")."""
    return sum(row[t] for row in a["counts"].values() for t in ("changed", "gone"))


def _num(v: float) -> Cell:
    return Cell(Estimate(float(v)), None, "{:.0f}")


def _pct(v: float | None) -> Cell:
    return Cell(Estimate(100.0 * v) if v is not None else None, None, "{:.0f}%")


def _cell(study: Study, b: str, fam: str, r: dict[str, UnitResult]) -> dict[str, Any]:
    domain = get_domain(get_benchmark(b).domain_name)
    records = FrozenStore.open(r["store"].path("snapshot")).records
    report = load_json(r["repaired_store"].path("report"))
    statuses = verdict_statuses(report)
    truth = rebuild_truth(domain, records, load_json(r["rebuilt_store"].directory / "verified.json"))
    runs = {c: [r[c]] for c in CONDITIONS}
    score = {c: study.score(runs[c]) for c in CONDITIONS}
    harm = {
        c: study.rate(runs[c], "uses_worse_than_draft", "selected_uses", None, 100.0) for c in CONDITIONS[1:]
    }
    diff = _diffs(study, runs, None)
    drift = {rid for rid, t in r["drift"]["truth"].items() if t != "holds"}
    rebuild_s = float(r["rebuilt_store"].get("_unit", {}).get("seconds", 0.0))
    cost = {
        "reverify_calls": r["repaired_store"]["cost"]["evaluator_calls"],
        "rebuild_calls": r["rebuilt_store"]["cost"]["evaluator_calls"],
        "reverify_tokens": r["repaired_store"]["cost"]["tokens"],
        "rebuild_tokens": r["rebuilt_store"]["cost"]["tokens"],
        "reverify_s": float(r["repaired_store"]["seconds"]),
        "rebuild_s": rebuild_s,
    }
    return {
        "change": r["env"]["description"][:80],
        "agreement": agreement(statuses, truth).as_dict(),
        "decision_agreement": agreement(statuses, r["decisions"]["truth"]).as_dict(),
        # the decision rebuild on the unchanged environment: what it fails to reproduce is its own
        # drift, so those records are left out of the second reading
        "drift": sorted(drift),
        "drift_agreement": agreement(
            {k: v for k, v in statuses.items() if k not in drift},
            {k: v for k, v in r["decisions"]["truth"].items() if k not in drift},
        ).as_dict(),
        "harm_by_verdict": harm_by_verdict(r["kept"]["episodes"], statuses),
        "score": score,
        "harm": harm,
        "diff": diff,
        "exposed": _exposed(study, runs, statuses),
        "cost": cost,
    }
