"""Python samples for `cm_gym.studies.analysis.real_errors`: the published HumanEval completions of a real
system (synthesis: prompt → program) and the simulated LLM's first drafts on CodeHumanEval's
repair tasks, both judged by the problem's own tests in the sandbox.

Taxonomy (`HE_KINDS`, HumanEvalFix's bug classes): a failing program is compared with the
canonical solution. When one known single edit turns it into the canonical one
(`cm_gym.domains.humaneval.families.between`) its class is that edit's family (``boundary``,
``off_by_one``, ``function_misuse``, ``operator``, ``value``, ``variable``, ``missing_logic``) and
the failure is *local*. Otherwise the token diff decides (`cm_gym.domains.code.bugclass`'s
rules, renamed to the HumanEvalFix classes): only tokens the fix adds → ``missing_logic``; only
tokens it removes → ``excess_logic``; only comparison / arithmetic operators → ``boundary`` /
``operator``; anything else → ``other`` (a different program, not one bug). A program that does
not parse or lacks the entry point is ``does_not_run``; an entry point with no code (an empty
reply: the failing Reflexion rows) is ``no_program``.

The real sample's tasks are HumanEval *problems* (one per problem with a CodeHumanEval task,
judged on that task's suite); the simulated sample's are CodeHumanEval repair tasks. The memory-free
scores compare a synthesis first answer with a repair first draft — the same tests, another
question (stated with every table).
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Sequence
from typing import Any

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.base import token_diff
from cm_gym.domains.code.bugclass import strip_docstrings
from cm_gym.domains.code.edits import parse
from cm_gym.domains.humaneval.families import between, kind_family
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

HE_KINDS: tuple[str, ...] = (
    "boundary",
    "off_by_one",
    "function_misuse",
    "operator",
    "value",
    "variable",
    "missing_logic",
    "excess_logic",
    "other",
    "no_program",
    "does_not_run",
)
_CMP = {"<", "<=", ">", ">="}
#: failures whose one-edit repair is checked per sample by default (each check runs up to 24
#: sandboxed test runs of ~0.3 s)
REPAIR_LIMIT = 60
_ARITH = {"+", "-", "*", "/", "//", "%", "**", "==", "!=", "and", "or", "not", "in"}


def classify_python(program: str, reference: str, function: str = "") -> tuple[str, bool]:
    """(HumanEvalFix class, local) of a failing `program` against the canonical `reference`."""
    tree = parse(program)
    if tree is None:
        return "does_not_run", False
    defs = [
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and (n.name == function or not function)
    ]
    if function and not defs:
        return "does_not_run", False
    if defs and _empty_body(defs[0]):
        return "no_program", False
    m = between(program, reference) or between(reference, program)
    if m is not None:
        family = kind_family(m)
        return (family if family != "other" else "other"), True
    a, b = parse(strip_docstrings(program)), parse(strip_docstrings(reference))
    if a is None or b is None:
        return "other", False
    diff = token_diff(ast.unparse(a), ast.unparse(b))
    removed = [r for r, _ in diff]
    added = [x for _, x in diff]
    if not diff:
        return "other", False
    if all(r in _CMP and x in _CMP for r, x in diff):
        return "boundary", False
    if all(r in _ARITH | _CMP and x in _ARITH | _CMP for r, x in diff):
        return "operator", False
    if all(r == "" for r in removed):
        return "missing_logic", False
    if all(x == "" for x in added):
        return "excess_logic", False
    return "other", False


def _empty_body(node: ast.FunctionDef) -> bool:
    """Only a docstring, ``pass`` or ``...``: the reply wrote no code."""
    return all(
        isinstance(st, ast.Pass) or isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
        for st in node.body
    )


def _problems() -> dict[str, dict[str, Any]]:
    from cm_gym.domains.humaneval.loader import humaneval_file, read_problems

    return {row["task_id"]: row for row in read_problems(humaneval_file())}


def tasks(limit: int | None = None) -> list[Task]:
    """One CodeHumanEval repair task per problem (its first injected bug), in problem order (the
    first `limit` when given): the real side answers problems, and a profile's drafts do not
    depend on the injected bug."""
    first: dict[str, Task] = {}
    for t in get_benchmark("CodeHumanEval").load(None):
        first.setdefault(str(t.meta["problem"]), t)
    out = list(first.values())
    return out[:limit] if limit is not None else out


def _failure(key: str, task: Task, program: str) -> Failure:
    function = str(task.features.get("function") or "")
    kind, local = classify_python(program, task.reference, function)
    return Failure(key, (kind,), local, subkinds=(kind,))


def _repairs(sample: ErrorSample, failed: list[tuple[Task, str]], evaluator: Any, repair: bool | int) -> None:
    if repair is False:
        return
    runs = [
        (i, pair)
        for i, pair in enumerate(failed)
        if sample.failures[i].kinds[0] not in ("does_not_run", "no_program")
    ]
    sub = ErrorSample(
        sample.domain, sample.source, sample.taxonomy, failures=[sample.failures[i] for i, _ in runs]
    )
    limit = None if repair is True else int(repair)
    attach_repairs(
        sub, [p for _, p in runs], get_domain("humaneval"), evaluator_check(evaluator), limit=limit
    )
    for (i, _), f in zip(runs, sub.failures, strict=True):
        sample.failures[i] = f
    sample.notes["repair_checked"] = sub.notes.get("repair_checked")


_JUDGED: dict[tuple[str, str], bool] = {}


def _judge(task: Task, program: str, evaluator: Any) -> bool:
    """The problem's tests on `program` (memoised per problem and program: a fit drafts the same
    programs round after round)."""
    key = (str(task.meta.get("problem", task.task_id)), program)
    if key not in _JUDGED:
        if len(_JUDGED) > 50_000:
            _JUDGED.clear()
        _JUDGED[key] = bool(evaluator.check(AgentState(task=task), Action(program)).solved)
    return _JUDGED[key]


def real_sample(
    system: str,
    task_list: Sequence[Task],
    *,
    repair: bool | int = REPAIR_LIMIT,
    evaluator: Any = None,
    **_: Any,
) -> ErrorSample:
    """The system's completion of every HumanEval problem that has a task in `task_list`, judged
    on that problem's suite (its first task's)."""
    rows = load_recordings("humaneval").for_system(system)
    problems = _problems()
    evaluator = evaluator or get_domain("humaneval").make_evaluator()
    first: dict[str, Task] = {}
    for t in task_list:
        first.setdefault(str(t.meta["problem"]), t)
    sample = ErrorSample("humaneval", f"real:{system}", HE_KINDS)
    agree = 0
    failed: list[tuple[Task, str]] = []
    for problem, task in first.items():
        if problem not in rows or problem not in problems:
            continue
        program = problems[problem]["prompt"] + rows[problem].text
        sample.n_tasks += 1
        solved = _judge(task, program, evaluator)
        agree += solved == (rows[problem].verdict == "pass")
        if solved:
            sample.n_solved += 1
        else:
            sample.failures.append(_failure(problem, task, program))
            failed.append((task, program))
    sample.notes["agrees_with_data_folder"] = f"{agree}/{sample.n_tasks}"
    _repairs(sample, failed, evaluator, repair)
    return sample


def simulated_sample(
    profile: Any,
    task_list: Sequence[Task],
    *,
    seeds: Sequence[int] = (0,),
    repair: bool | int = REPAIR_LIMIT,
    evaluator: Any = None,
    **_: Any,
) -> ErrorSample:
    """The simulated LLM's first drafts (whole programs) on the repair tasks, judged and classified."""
    evaluator = evaluator or get_domain("humaneval").make_evaluator()
    name = getattr(profile, "name", profile) or "default"
    sample = ErrorSample("humaneval", f"simulated:{name}", HE_KINDS, notes={"seeds": list(seeds)})
    failed: list[tuple[Task, str]] = []
    for _seed, task, draft in simulated_drafts(task_list, profile, seeds):
        sample.n_tasks += 1
        if _judge(task, draft, evaluator):
            sample.n_solved += 1
        else:
            sample.failures.append(_failure(task.task_id, task, draft))
            failed.append((task, draft))
    _repairs(sample, failed, evaluator, repair)
    return sample
