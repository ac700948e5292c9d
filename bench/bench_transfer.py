"""Lessons that can transfer (issue 32 item 5): how many records of a build on recorded Spider drafts
are generic (a site-free transform and a wording-only condition), and whether any generic record
covers or fixes held-out real failures.

Per split (the paper's task split, and ``databases``: held-out databases never seen) and system:
construction on the build side's real first drafts with the item-4 local edits
(`construct_from_recorded(..., edit_grammar="extended")`, K = 4, one decision, no reuse); then,
on the eval side's real failures, (a) the records with a transform whose condition holds
(coverage), those whose transform has a site in the draft, and those whose transform makes the
draft pass (fixed; ``revise="transform"``, no LLM); on the eval side's *right* drafts, how many
some such record would break (applied wherever eligible and it fits); (b) for comparison, `heldout_transfer` with the simulated LLM
reviser (every record, top-k retrieved and eligible scopes).

    PYTHONPATH=. python bench/bench_transfer.py --out runs/transfer/report.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.conditions import parse_condition_or_none
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.domains.sql.conditions import parse
from cm_gym.domains.sql.transfer import database_bound
from cm_gym.llm.recordings import load_recordings
from cm_gym.memory.snapshot import FrozenStore
from cm_gym.studies.analysis.real_memory import construct_from_recorded, heldout_transfer, split_ids


def generic_transfer(snapshot: str, system: str, eval_ids: list[str]) -> dict[str, Any]:
    """Held-out real failures covered / applicable / fixed by the store's generic records."""
    sql = get_domain("sql")
    by_id = {t.task_id: t for t in get_benchmark("SpiderSQL").load()}
    rows = load_recordings("spider")
    generic = [r for r in FrozenStore.open(snapshot).records if r.transform]
    preds = sql.condition_predicates()
    conditions = {r.record_id: parse_condition_or_none(r.condition, preds) for r in generic}
    ev = sql.make_evaluator()
    out: dict[str, Any] = {"failures": 0, "right": 0, "covered": 0, "applicable": 0, "fixed": 0, "broken": 0}
    fixes: list[dict[str, str]] = []
    broken_by: Counter[str] = Counter()
    for task_id in eval_ids:
        task = by_id[task_id]
        row = rows.get(sql.recording_key(task) or "", system)
        if row is None:
            continue
        state, draft = AgentState(task), sql.parse_action(row.text)
        blind = replace(task, reference="")
        if ev.check(state, Action(draft)).solved:
            out["right"] += 1
            eligible = [r for r in generic if conditions[r.record_id].holds(blind)]
            for r in eligible:  # harm: a transform applied to a right draft
                revised = sql.apply_transform(blind, draft, r.transform)
                if revised and not ev.check(state, Action(revised)).solved:
                    out["broken"] += 1
                    broken_by[r.contrast_key] += 1
                    break
            continue
        out["failures"] += 1
        eligible = [r for r in generic if conditions[r.record_id].holds(blind)]
        applied = [(r, sql.apply_transform(blind, draft, r.transform)) for r in eligible]
        applied = [(r, a) for r, a in applied if a]
        out["covered"] += bool(eligible)
        out["applicable"] += bool(applied)
        winner = next((r for r, a in applied if ev.check(state, Action(a)).solved), None)
        if winner is not None:
            out["fixed"] += 1
            fixes.append({"task_id": task_id, "record": winner.record_id, "key": winner.contrast_key,
                          "from": winner.source_task_id})  # fmt: skip
    ev.close()
    out["fixes"], out["broken_by"] = fixes, dict(broken_by)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", nargs="+", default=["gpt-4-zero-shot", "codex-din-sql"])
    parser.add_argument("--splits", nargs="+", default=["tasks", "databases"])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    report: dict[str, Any] = {"runs": []}
    lines = [
        "| split | system | real failures (build) | records | with a transform | generic (wording-only "
        "condition) | generic kinds | held-out failures | covered (eligible record with a transform) "
        "| transform has a site | fixed (transform) | right drafts broken | fixed, LLM reviser (eligible) |",
        "|" + "---|" * 13,
    ]
    for split in args.splits:
        build = split_ids("SpiderSQL", "build", split=split)
        held = split_ids("SpiderSQL", "eval", split=split)
        for system in args.systems:
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                built = construct_from_recorded("SpiderSQL", system, tmp, build, edit_grammar="extended")
                with_transform = [r for r in built.records if r["transform"]]
                generic = [r for r in with_transform if not database_bound(parse(r["condition"]))]
                kinds = Counter(r["contrast_key"] for r in generic)
                moved = generic_transfer(built.snapshot, system, held)
                llm = heldout_transfer("SpiderSQL", built.snapshot, system, held, store_system=system,
                                       scopes=("eligible",))  # fmt: skip
            eligible = llm.rate("eligible")
            run = {
                "split": split, "system": system, "build_failures": len(built.failures),
                "records": built.records, "with_transform": len(with_transform), "generic": len(generic), "generic_kinds": dict(kinds),
                "transfer": moved, "llm_eligible": eligible, "seconds": time.perf_counter() - t0,
            }  # fmt: skip
            report["runs"].append(run)
            lines.append(
                f"| {split} | {system} | {len(built.failures)} | {len(built.records)} | {len(with_transform)} | "
                f"{len(generic)} | "
                f"{', '.join(f'{k} {n}' for k, n in kinds.items()) or '—'} | {moved['failures']} | "
                f"{moved['covered']} | {moved['applicable']} | {moved['fixed']} | {moved['broken']} of {moved['right']} | "
                f"{eligible['fixed']} of {eligible['failures']} |"
            )
            print(lines[-1], flush=True)
    print("\n".join(lines))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
