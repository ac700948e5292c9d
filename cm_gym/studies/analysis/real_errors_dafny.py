"""Dafny samples for `cm_gym.studies.analysis.real_errors`: DafnyBench programs of a real system and the
simulated LLM's first drafts, each diffed against the hint-free file and the ground truth.

Taxonomy (`DAFNY_KINDS`; several per answer):

* ``no_program`` — the reply holds no Dafny member (prose only: "I apologize …");
* ``changed_spec`` / ``changed_code`` — the annotation checker (`extract_annotations`, on Dafny's
  tokens: whitespace and comments never count) refuses the answer at a program line that is a
  signature or ``requires`` / ``ensures`` / ``modifies`` / ``reads`` line, or at another line;
* ``forbidden`` — ``assume`` or an attribute such as ``{:verify false}`` that the file lacks;
* ``missing_invariant`` / ``extra_invariant``, ``missing_decreases`` / ``extra_decreases``,
  ``missing_assertion`` / ``extra_assertion`` — an annotation of the ground truth the answer
  lacks, or one the answer has that the ground truth lacks (whitespace-insensitive; an extra one
  need not be wrong — the ground truth is one proof of several — but the answer failed);
* ``bound`` — an invariant that differs from one of the ground truth's only in a comparison
  operator or a ``+ 1`` / ``- 1`` (counted instead of that missing + extra pair);
* ``no_annotations`` — none added where the ground truth adds some;
* ``same_as_truth`` — the ground truth's annotations exactly, yet judged failed.

A failure is *local* when exactly one annotation differs and no program line does.

Verdicts. The real side keeps upstream's verdict (DafnyBench ran Dafny 4.x: ``"1"``…``"10"``
solved, ``"failed"`` failed); the ``"0"`` rows (208 upstream files, 0 for every model,
undocumented) are left out of both counts. Nothing is re-verified by default: Dafny 2.3 takes
~5 s a program on this project's machines. The simulated side's failure is *its annotations
differ from the ground truth's* (a proxy; ``verify=N`` checks the first N such drafts with
Dafny 2.3 and records how many of them really fail, ``proxy_fails``, in the notes). The
one-edit repair check (``repair=N``) verifies with Dafny 2.3 too, on N failures spread over the
list and the first `REPAIR_EDITS` edits of each: a lower bound on the grammar's reach.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from cm_gym.core.types import Task
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.recordings import load_recordings
from cm_gym.studies.analysis.real_errors import (
    ErrorSample,
    Failure,
    attach_repairs,
    evaluator_check,
    simulated_drafts,
)

logger = logging.getLogger(__name__)

DAFNY_KINDS: tuple[str, ...] = (
    "no_program",
    "changed_spec",
    "changed_code",
    "forbidden",
    "missing_invariant",
    "extra_invariant",
    "bound",
    "missing_decreases",
    "extra_decreases",
    "missing_assertion",
    "extra_assertion",
    "no_annotations",
    "same_as_truth",
)
_ANN = re.compile(r"^\s*(invariant|decreases|assert)\b(.*)$")
_MEMBER = re.compile(r"\b(method|function|lemma|predicate|class|datatype)\b")
_SPEC = re.compile(r"^\s*(requires|ensures|modifies|reads|method|function|lemma|predicate|twostate|ghost)\b")
_FORBIDDEN = re.compile(r"\bassume\b|\{:\s*(verify|axiom|extern|trusted)\b")
_NAMES = {"invariant": "invariant", "decreases": "decreases", "assert": "assertion"}
#: edits verified per failure in a one-edit repair check (the grammar's family repairs come first)
REPAIR_EDITS = 10
_PROGRAM_LINE = re.compile(r"program line (\d+)")
_BOUNDISH = re.compile(r"<=|>=|<|>|[+-]\s*1\b")


def _strip(line: str) -> str:
    return " ".join((line.split("//", 1)[0] if '"' not in line else line).split())


def _annotations(program: str) -> Counter[tuple[str, str]]:
    """(keyword, whitespace-free text without a trailing ``;``) of each annotation line."""
    out: Counter[tuple[str, str]] = Counter()
    for line in program.splitlines():
        m = _ANN.match(_strip(line))
        if m:
            out[(m.group(1), "".join(m.group(0).split()).rstrip(";"))] += 1
    return out


def _program_change(program: str, answer: str) -> str:
    """ "" when `answer` is `program` plus annotations (the domain's own token-level checker),
    else ``changed_spec`` / ``changed_code`` by the program line it stops at, or ``forbidden``."""
    from cm_gym.domains.dafny.annotations import AnnotationError, extract_annotations

    try:
        extract_annotations(program, answer)
    except AnnotationError as exc:
        text = str(exc)
        if "forbidden construct" in text:
            return "forbidden"
        m = _PROGRAM_LINE.search(text)
        lines = program.splitlines()
        if m and 0 < int(m.group(1)) <= len(lines) and _SPEC.match(lines[int(m.group(1)) - 1]):
            return "changed_spec"
        return "changed_code"
    return ""


def classify_dafny(answer: str, program: str, truth: str) -> tuple[tuple[str, ...], bool]:
    """(kinds, local) of a failing `answer` against the hint-free `program` and the ground
    `truth` (see the module doc)."""
    if not _MEMBER.search(answer):
        return ("no_program",), False
    kinds: set[str] = set()
    changed = _program_change(program, answer)
    if changed:
        kinds.add(changed)
    if _FORBIDDEN.search(answer) and not _FORBIDDEN.search(program):
        kinds.add("forbidden")
    base = _annotations(program)
    gold, mine = _annotations(truth) - base, _annotations(answer) - base
    missing, extra = list((gold - mine).elements()), list((mine - gold).elements())
    for m in list(extra):
        if m[0] != "invariant":
            continue
        shape = _BOUNDISH.sub("", m[1])
        pair = next((g for g in missing if g[0] == "invariant" and _BOUNDISH.sub("", g[1]) == shape), None)
        if pair is not None:
            extra.remove(m)
            missing.remove(pair)
            kinds.add("bound")
    if gold and not mine:
        kinds.add("no_annotations")
    else:
        kinds.update(f"missing_{_NAMES[k]}" for k, _ in missing)
        kinds.update(f"extra_{_NAMES[k]}" for k, _ in extra)
    differing = len(missing) + len(extra) + sum(1 for k in kinds if k == "bound")
    if not kinds:
        kinds.add("same_as_truth")
    local = not changed and differing == 1 and "forbidden" not in kinds
    return tuple(k for k in DAFNY_KINDS if k in kinds), local


def tasks(limit: int | None = None) -> list[Task]:
    """DafnyBench's tasks with a known upstream verdict — none of the systems' rows says ``"0"``
    (those are the same upstream files for every model) — so the real and the simulated side
    answer the same tasks (the first `limit` when given)."""
    unknown = {row.key for row in load_recordings("dafny") if row.verdict == "0"}
    out = [t for t in get_benchmark("Dafny").load(None) if str(t.meta["file"]) not in unknown]
    return out[:limit] if limit is not None else out


def _failure(task: Task, answer: str) -> Failure:
    kinds, local = classify_dafny(answer, str(task.meta["program"]), task.reference)
    return Failure(task.task_id, kinds, local, subkinds=kinds)


def real_sample(
    system: str,
    task_list: Sequence[Task],
    *,
    repair: bool | int = False,
    max_edits: int = REPAIR_EDITS,
    **_: Any,
) -> ErrorSample:
    """The system's program for every task, by upstream's verdict ("0" rows left out); with
    `repair` (True, or how many failures), `_repairs`."""
    rows = load_recordings("dafny").for_system(system)
    sample = ErrorSample("dafny", f"real:{system}", DAFNY_KINDS)
    unknown = 0
    failed: list[tuple[Task, str]] = []
    for task in task_list:
        row = rows.get(str(task.meta["file"]))
        if row is None:
            continue
        if row.verdict == "0":
            unknown += 1
            continue
        sample.n_tasks += 1
        if row.verdict.isdigit():
            sample.n_solved += 1
        else:
            answer = get_domain("dafny").parse_action(row.text)
            sample.failures.append(_failure(task, answer))
            failed.append((task, answer))
    sample.notes.update(verdicts="upstream (Dafny 4.x)", left_out_zero_rows=unknown)
    _repairs(sample, failed, repair, max_edits)
    return sample


def _repairs(sample: ErrorSample, failed: list[tuple[Task, str]], repair: bool | int, max_edits: int) -> None:
    """One-edit repair with Dafny 2.3 on `repair` failures spread evenly over the list (all with
    True): an answer the annotation checker refuses has no edit (not repairable, nothing run);
    otherwise its first `max_edits` edits are verified until one passes."""
    if repair is False or not failed:
        return
    limit = None if repair is True else int(repair)
    check = evaluator_check(get_domain("dafny").make_evaluator())
    attach_repairs(sample, failed, get_domain("dafny"), check, limit=limit, max_edits=max_edits)


def simulated_sample(
    profile: Any,
    task_list: Sequence[Task],
    *,
    seeds: Sequence[int] = (0,),
    verify: int = 0,
    repair: bool | int = False,
    max_edits: int = REPAIR_EDITS,
    **_: Any,
) -> ErrorSample:
    """The simulated LLM's first drafts: a draft whose annotations differ from the ground truth's
    counts as failed (proxy); `verify` > 0 checks that many of those with Dafny 2.3."""
    name = getattr(profile, "name", profile) or "default"
    sample = ErrorSample("dafny", f"simulated:{name}", DAFNY_KINDS, notes={"seeds": list(seeds)})
    failed: list[tuple[Task, str]] = []
    for _seed, task, draft in simulated_drafts(task_list, profile, seeds):
        sample.n_tasks += 1
        if draft.strip() == task.reference.strip():
            sample.n_solved += 1
        else:
            sample.failures.append(_failure(task, draft))
            failed.append((task, draft))
    sample.notes["verdicts"] = "proxy: annotations differ from the ground truth's"
    if verify > 0 and failed:
        check = evaluator_check(get_domain("dafny").make_evaluator())
        checked = failed[:verify]
        fails = sum(not check(task, draft) for task, draft in checked)
        sample.notes["proxy_fails"] = f"{fails}/{len(checked)} verified with Dafny 2.3"
    _repairs(sample, failed, repair, max_edits)
    return sample


def upstream_agreement(system: str, task_list: Sequence[Task], n: int = 10) -> dict[str, Any]:
    """Re-verify with Dafny 2.3 up to `n` of `system`'s programs upstream (Dafny 4.x) solved and
    `n` it failed, among those the annotation checker accepts (the rest cannot run here): how
    often the two verifiers agree. Spread evenly over the task list; each check costs seconds."""
    rows = load_recordings("dafny").for_system(system)
    domain = get_domain("dafny")
    check = evaluator_check(domain.make_evaluator())
    groups: dict[str, list[tuple[Task, str]]] = {"solved": [], "failed": []}
    for task in task_list:
        row = rows.get(str(task.meta["file"]))
        if row is None or row.verdict == "0":
            continue
        answer = domain.parse_action(row.text)
        if _program_change(str(task.meta["program"]), answer) or not _MEMBER.search(answer):
            continue
        groups["solved" if row.verdict.isdigit() else "failed"].append((task, answer))
    out: dict[str, Any] = {}
    for name, items in groups.items():
        picks = [items[int(i * len(items) / n)] for i in range(min(n, len(items)))] if items else []
        passed = sum(check(task, answer) for task, answer in picks)
        out[name] = {"checkable": len(items), "verified_2_3": passed, "checked": len(picks)}
    return out
