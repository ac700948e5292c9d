"""CodeHumanEval's construction figures: check() conversion, injected families, load time, and
(given a store) records, their conditions and look-alike exclusion.

A record's *look-alikes* are the other tasks whose correct program (the reference, read here only
for this measurement) contains a site for the record's edit: there, applying the record's fix
would break a correct program. The record *excludes* a look-alike when its condition is false on it.

    python bench/bench_humaneval.py                       # conversion, families, load times
    python bench/bench_humaneval.py --store STORE.sqlite  # + records and look-alike exclusion
"""

from __future__ import annotations

import argparse
import collections
import os
import tempfile
import time
from pathlib import Path

from cm_gym.core.types import Task
from cm_gym.domains.base import LoadReport
from cm_gym.domains.conditions import parse_condition_or_none
from cm_gym.domains.humaneval import HumanEvalDomain
from cm_gym.domains.humaneval.checks import convert_check
from cm_gym.domains.humaneval.errormodel import transfer_contrast
from cm_gym.domains.humaneval.loader import _load, humaneval_file, load_humaneval_tasks, read_problems
from cm_gym.memory.opening import open_store


def conversion() -> None:
    rows = read_problems(humaneval_file())
    asserts = converted = vacuous = 0
    problems_pytest = []
    reasons: collections.Counter[str] = collections.Counter()
    for row in rows:
        conv = convert_check(row["test"], row["entry_point"])
        converted += len(conv.cases)
        vacuous += conv.vacuous
        asserts += (
            len(conv.cases) + conv.vacuous + sum(1 for t, _ in conv.unconvertible if t.startswith("assert"))
        )
        if conv.unconvertible:
            problems_pytest.append(row["task_id"])
        reasons.update(why.split(" ")[0] + " " + why.split(" ")[1] for _, why in conv.unconvertible)
    print(
        f"problems {len(rows)}; check() asserts {asserts}: converted to cases {converted}, vacuous {vacuous}"
    )
    print(
        f"problems judged in pytest mode (some statement unconvertible): {len(problems_pytest)} {problems_pytest}"
    )
    print(f"unconvertible statements by reason: {dict(reasons)}")


def load_times() -> list[Task]:
    with tempfile.TemporaryDirectory() as cache:
        os.environ["CM_GYM_CACHE"] = cache
        _load.cache_clear()
        t0 = time.perf_counter()
        report = LoadReport()
        tasks = load_humaneval_tasks(report=report)
        cold = time.perf_counter() - t0
        _load.cache_clear()
        t0 = time.perf_counter()
        load_humaneval_tasks()
        warm = time.perf_counter() - t0
    problems = {t.meta["problem"] for t in tasks}
    print(
        f"tasks {len(tasks)} from {len(problems)} problems; load with vetting {cold:.1f} s, cached {warm:.1f} s"
    )
    print(f"families: {dict(collections.Counter(t.family for t in tasks).most_common())}")
    print(f"dropped: {report.dropped}")
    return tasks


def records(store_path: Path, tasks: list[Task]) -> None:
    store = open_store(store_path)
    domain = HumanEvalDomain()
    preds = domain.condition_predicates()
    recs = store.records
    with_lookalike = excluded_all = excluded_some = 0
    for r in recs:
        cond = parse_condition_or_none(r.condition, preds)
        looks = [
            t
            for t in tasks
            if t.task_id != r.source_task_id
            and transfer_contrast(t.reference, r.a_minus, r.a_plus) is not None
        ]
        if not looks:
            continue
        with_lookalike += 1
        false_on = [t for t in looks if not cond.holds(t)]
        excluded_some += bool(false_on)
        excluded_all += len(false_on) == len(looks)
    print(f"records {len(recs)}; with a look-alike task {with_lookalike}; condition excludes at least one "
          f"{excluded_some} ({excluded_some / max(1, len(recs)):.0%} of records), all {excluded_all}")  # fmt: skip
    print(f"families of records: {dict(collections.Counter(r.contrast_key.split(':')[0] for r in recs))}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, help="a CodeHumanEval store or snapshot")
    args = ap.parse_args()
    conversion()
    tasks = load_times()
    if args.store:
        records(args.store, tasks)


if __name__ == "__main__":
    main()
