"""`check_domain`: check a benchmark domain the way Gymnasium's ``check_env`` checks an env.

It runs the domain's own code on (a sample of) its tasks and checks the contract of
`cm_gym.domains.base.Domain`:

- attributes: a valid, unique ``name`` (another class with the same name is an error) and an
  ``action_kind``; tasks: non-empty, unique ids, of this domain, JSON-serialisable features;
- the world model: every task's reference action scores solved; malformed actions come back as an
  `Outcome` (never an exception); ``parse_action`` recovers a fenced action;
- the error model: probabilities in [0, 1]; operators fire (change the reference) on these tasks
  (one that never does is a warning: it may target another benchmark of the domain; a failure
  with ``strict=True``), and some fired slip is scored worse than the reference;
- reference isolation: ``edit_operators``, ``distil``, condition predicates and ``apply_contrast``
  are called with tasks whose ``reference`` raises when read (reads are recorded even when the
  domain swallows the exception);
- conditions: every ``distil`` condition parses strictly (a malformed one is an error, not
  "always applicable") and some condition is false on some task (falsifiable); predicate kinds
  do not shadow the built-in ones and never raise; a condition that is false on its own source
  task is a warning;
- repairs: some rule-based edit of a slipped draft scores solved; a record's contrast applied to its
  own a⁻ gives a⁺ (warnings: the domain still works, memory just helps less).

Failures raise one `DomainCheckError` listing them (``raise_on_failure=False`` returns the report).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cm_gym.core.types import Action, AgentState, CmGymError, Outcome, Task
from cm_gym.domains.base import Distillation, Domain, Edit, ErrorModel
from cm_gym.domains.conditions import GENERIC_PREDICATES, ConditionParseError, parse_condition
from cm_gym.domains.reference_guard import ReferenceReadError, guarded

_NAME = re.compile(r"[a-z][a-z0-9_]*")
_GARBAGE = ("", "\x00 )( ;; <<>> %%% garbage", "``` unterminated fence", "9" * 5000)
SLIPS_PER_OPERATOR = 3


class DomainCheckError(CmGymError):
    """The domain breaks the `Domain` contract (the message lists every failed check)."""


@dataclass
class DomainReport:
    """What `check_domain` found: passed checks, failures and warnings, one line each."""

    domain: str
    n_tasks: int
    passed: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def format(self) -> str:
        lines = [f"domain {self.domain!r}: {self.n_tasks} tasks checked"]
        lines += [f"  ok    {p}" for p in self.passed]
        lines += [f"  warn  {w}" for w in self.warnings]
        lines += [f"  FAIL  {f}" for f in self.failures]
        return "\n".join(lines)


@dataclass(frozen=True)
class _Slip:
    task: Task
    operator: str
    draft: str


def _call(report: DomainReport, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, recording an exception as a failure (returns None then)."""
    try:
        return fn(*args)
    except ReferenceReadError:
        return None  # recorded by the guard
    except Exception as exc:  # noqa: BLE001 - reported as a failed check
        report.failures.append(f"{what} raised {type(exc).__name__}: {str(exc)[:160]}")
        return None


def _check_attributes(domain: Domain, report: DomainReport) -> None:
    from cm_gym.domains.catalog import domain_class_for

    name = getattr(domain, "name", None)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        report.failures.append(f"name must be a short lower-case identifier, got {name!r}")
        return
    owner = domain_class_for(name)
    if owner is not None and owner != f"{type(domain).__module__}.{type(domain).__qualname__}":
        report.failures.append(f"domain name {name!r} is already taken by {owner}")
    if not isinstance(getattr(domain, "action_kind", None), str) or not domain.action_kind:
        report.failures.append("action_kind must be a non-empty string")
    if not report.failures:
        report.passed.append(f"attributes: name {name!r}, action kind {domain.action_kind!r}")


def _check_tasks(domain: Domain, tasks: Sequence[Task], report: DomainReport) -> bool:
    bad = [t for t in tasks if not isinstance(t, Task)]
    if not tasks or bad:
        report.failures.append(
            "load_tasks must return a non-empty list of Task" + (f" (got {type(bad[0])})" if bad else "")
        )
        return False
    ids = [t.task_id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})[:5] if len(set(ids)) != len(ids) else []
    foreign = sorted({t.domain for t in tasks} - {domain.name})
    problems = []
    if dupes:
        problems.append(f"duplicate task ids {dupes}")
    if foreign:
        problems.append(f"tasks of other domains {foreign} (Task.domain must be {domain.name!r})")
    for t in tasks:
        try:
            json.dumps(dict(t.features))
        except (TypeError, ValueError):
            problems.append(f"task {t.task_id}: features are not JSON-serialisable")
            break
        if not isinstance(t.prompt, str) or not t.prompt.strip() or not isinstance(t.reference, str):
            problems.append(f"task {t.task_id}: prompt must be non-empty text and reference a string")
            break
    report.failures += [f"tasks: {p}" for p in problems]
    if not problems:
        report.passed.append(f"tasks: {len(tasks)} of domain {domain.name!r}, unique ids")
    return not problems


def _score(evaluator: Any, task: Task, action: str) -> Outcome:
    outcome = evaluator.check(AgentState(task), Action(action))
    if not isinstance(outcome, Outcome):
        raise TypeError(f"check() returned {type(outcome).__name__}, not Outcome")
    if not (isinstance(outcome.score, (int, float)) and 0.0 <= outcome.score <= 1.0):
        raise ValueError(f"score {outcome.score!r} is not in [0, 1]")
    return outcome


def _check_world_model(domain: Domain, evaluator: Any, sample: Sequence[Task], report: DomainReport) -> None:
    unsolved, before = [], len(report.failures)
    for task in sample:
        outcome = _call(
            report, f"check(reference of {task.task_id})", _score, evaluator, task, task.reference
        )
        if outcome is not None and not outcome.solved:
            unsolved.append(
                f"{task.task_id} ({outcome.status}: {outcome.reason or outcome.feedback}"[:120] + ")"
            )
        parsed = _call(report, "parse_action", domain.parse_action, f"```\n{task.reference}\n```")
        if parsed is not None and parsed.strip() != task.reference.strip():
            report.failures.append(f"parse_action does not recover a fenced action (task {task.task_id})")
            break
    if unsolved:
        report.failures.append(
            f"reference actions not scored solved: {len(unsolved)} of {len(sample)}, e.g. {unsolved[0]}"
        )
    for junk in _GARBAGE:
        outcome = _call(
            report, f"check({junk[:12]!r}...) on a malformed action", _score, evaluator, sample[0], junk
        )
        if outcome is not None and outcome.solved and junk.strip() != sample[0].reference.strip():
            report.failures.append(f"a malformed action {junk[:20]!r} was scored solved")
    if len(report.failures) == before:
        report.passed.append(
            f"world model: {len(sample)} references solved; malformed actions scored, not raised"
        )


def _find_slips(
    domain: Domain, tasks: Sequence[Task], report: DomainReport, seed: int, strict: bool = False
) -> list[_Slip]:
    model = _call(report, "error_model()", domain.error_model)
    if not isinstance(model, ErrorModel) or not model.operators:
        report.failures.append("error_model() must return an ErrorModel with at least one operator")
        return []
    rates = [*model.revision.as_dict().values(), *model.fix_prob.values()]
    if not all(isinstance(r, (int, float)) and 0.0 <= r <= 1.0 for r in rates):
        report.failures.append("error model: fix_prob and the revision rates must be in [0, 1]")
    slips: list[_Slip] = []
    for op in model.operators:
        fired = 0
        for task in tasks:
            p = _call(report, f"operator {op.name}: probability", op.probability, task)
            if p is None:
                break
            if not (isinstance(p, (int, float)) and math.isfinite(p) and 0.0 <= p <= 1.0):
                report.failures.append(f"operator {op.name}: probability {p!r} is not in [0, 1]")
                break
            if p <= 0:
                continue
            draft = _call(
                report,
                f"operator {op.name}: apply",
                op.apply,
                task,
                task.reference,
                np.random.default_rng(seed),
            )
            if isinstance(draft, str) and draft != task.reference:
                slips.append(_Slip(task, op.name, draft))
                fired += 1
                if fired >= SLIPS_PER_OPERATOR:
                    break
        if not fired:
            (report.failures if strict else report.warnings).append(
                f"error operator {op.name!r} never fires on these {len(tasks)} tasks"
                + ("" if strict else " (fine if it targets another benchmark of this domain)")
            )
    if not slips:
        report.failures.append(f"no error operator fires (changes a reference) on {len(tasks)} tasks")
    return slips


def _check_slips(domain: Domain, evaluator: Any, slips: list[_Slip], report: DomainReport) -> list[_Slip]:
    """Slips the world model scores worse than the reference (the ones memory could repair)."""
    failing = []
    for slip in slips:
        outcome = _call(report, f"check(slip {slip.operator})", _score, evaluator, slip.task, slip.draft)
        if outcome is not None and not outcome.solved:
            failing.append(slip)
    if slips and not failing:
        report.failures.append(
            "no fired slip is scored worse than its reference: the error model is invisible"
        )
    elif slips:
        ops = sorted({s.operator for s in slips})
        report.passed.append(
            f"error model: {len(ops)} operators fire; {len(failing)} of {len(slips)} slips fail the check"
        )
    return failing


def _check_memory_hooks(
    domain: Domain, evaluator: Any, tasks: Sequence[Task], slips: list[_Slip], report: DomainReport
) -> None:
    reads: list[str] = []
    predicates = _call(report, "condition_predicates()", domain.condition_predicates) or {}
    if not isinstance(predicates, Mapping):
        report.failures.append("condition_predicates() must return a mapping kind -> function")
        predicates = {}
    for kind, fn in predicates.items():
        if not isinstance(kind, str) or not re.fullmatch(r"[A-Za-z_]\w*", kind) or not callable(fn):
            report.failures.append(f"predicate kind {kind!r} must be an identifier mapped to a function")
        elif kind in GENERIC_PREDICATES:
            report.failures.append(f"predicate kind {kind!r} shadows the built-in kind of that name")
    conditions, repaired, transferred, before = [], 0, 0, len(report.failures)
    for slip in slips:
        gt = guarded(slip.task, "edit_operators", reads)
        edits = _call(report, "edit_operators", domain.edit_operators, gt, slip.draft) or []
        if not isinstance(edits, list) or not all(
            isinstance(e, Edit) and isinstance(e.text, str) for e in edits
        ):
            report.failures.append("edit_operators must return a list of Edit")
            edits = []
        for edit in edits[:4]:
            outcome = _call(report, "check(edit)", _score, evaluator, slip.task, edit.text)
            repaired += bool(outcome is not None and outcome.solved)
        d = _call(
            report,
            "distil",
            domain.distil,
            guarded(slip.task, "distil", reads),
            slip.draft,
            slip.task.reference,
        )
        if d is None:
            continue
        if not isinstance(d, Distillation) or not isinstance(d.situation, str) or not d.situation.strip():
            report.failures.append("distil must return a Distillation with a non-empty situation")
            continue
        try:
            cond = parse_condition(d.condition, predicates)
        except ConditionParseError as exc:
            report.failures.append(f"distil gave a malformed condition {d.condition!r}: {exc}")
            continue
        conditions.append((slip, cond))
        blank = guarded(dataclasses.replace(slip.task, reference=""), "apply_contrast", reads)
        revised = _call(
            report,
            "apply_contrast",
            domain.apply_contrast,
            blank,
            slip.draft,
            slip.draft,
            slip.task.reference,
        )
        transferred += revised is not None and revised.strip() == slip.task.reference.strip()
        key = _call(report, "contrast_key", domain.contrast_key, slip.draft, slip.task.reference)
        if not isinstance(key, str) or not key:
            report.failures.append("contrast_key must return a non-empty string")
    _check_conditions(conditions, tasks, reads, report)
    for where in sorted(set(reads)):
        report.failures.append(f"{where} read task.reference (it must not: the reference is hidden there)")
    if slips and not repaired:
        report.warnings.append(
            "no rule-based edit of a slipped draft scores solved: Module I finds no repairs"
        )
    if conditions and not transferred:
        report.warnings.append(
            "apply_contrast never turns a record's a- into its a+: records cannot be reused"
        )
    if len(report.failures) == before and conditions:
        report.passed.append(
            f"memory hooks: {len(conditions)} records distilled; {repaired} repairing edits; "
            f"{transferred} contrasts re-applied; the reference is never read"
        )


def _check_conditions(
    conditions: list[tuple[_Slip, Any]], tasks: Sequence[Task], reads: list[str], report: DomainReport
) -> None:
    falsified, seen = 0, set()
    for slip, cond in conditions:
        if not cond.holds(guarded(slip.task, "a condition predicate", reads)):
            report.warnings.append(
                f"condition {cond.text!r} does not hold on its own source task {slip.task.task_id}"
            )
        if cond.is_empty or cond.text in seen:
            continue
        seen.add(cond.text)
        for pred, fn in zip(cond.predicates, cond.fns, strict=True):
            for task in tasks[:50]:
                try:
                    fn(guarded(task, "a condition predicate", reads), pred.args)
                except ReferenceReadError:
                    break
                except Exception as exc:  # noqa: BLE001
                    report.failures.append(
                        f"predicate {pred.text} raised {type(exc).__name__} on task {task.task_id}"
                    )
                    break
        falsified += any(not cond.holds(guarded(t, "a condition predicate", reads)) for t in tasks)
    if conditions and not falsified:
        report.failures.append(
            "no distilled condition is false on any task: conditions cannot tell look-alikes apart"
        )


def check_domain(
    domain: Domain | type[Domain] | str,
    tasks: Sequence[Task] | None = None,
    *,
    max_tasks: int = 40,
    seed: int = 0,
    evaluator_kwargs: Mapping[str, Any] | None = None,
    raise_on_failure: bool = True,
    strict: bool = False,
) -> DomainReport:
    """Check `domain` (an instance, a class, or a registered benchmark name whose tasks are then
    loaded) on `tasks`. The world model is checked on `max_tasks` tasks drawn with `seed`; the
    error model looks at every task (`strict`: an operator that never fires fails the check).
    Raises `DomainCheckError` on a failure unless `raise_on_failure` is False."""
    if isinstance(domain, str):
        from cm_gym.domains.catalog import get_benchmark, get_domain

        spec = get_benchmark(domain)
        tasks = list(spec.load()) if tasks is None else tasks
        domain = get_domain(spec.domain_name)
    elif isinstance(domain, type):
        domain = domain()
    if tasks is None:
        raise DomainCheckError("check_domain needs tasks: pass tasks=... or a registered benchmark name")
    tasks = list(tasks)
    report = DomainReport(str(getattr(domain, "name", "?")), len(tasks))
    _check_attributes(domain, report)
    if not _check_tasks(domain, tasks, report):
        return _finish(report, raise_on_failure)
    order = np.random.default_rng(seed).permutation(len(tasks))
    sample = [tasks[i] for i in order[:max_tasks]]
    evaluator = _call(
        report, "make_evaluator()", lambda: domain.make_evaluator(**dict(evaluator_kwargs or {}))
    )
    if evaluator is None or not callable(getattr(evaluator, "check", None)):
        report.failures.append("make_evaluator() must return an object with check(state, action)")
        return _finish(report, raise_on_failure)
    _check_world_model(domain, evaluator, sample, report)
    slips = _find_slips(domain, [tasks[i] for i in order], report, seed, strict)
    failing = _check_slips(domain, evaluator, slips, report)
    _check_memory_hooks(domain, evaluator, tasks, failing, report)
    return _finish(report, raise_on_failure)


def _finish(report: DomainReport, raise_on_failure: bool) -> DomainReport:
    if report.failures and raise_on_failure:
        raise DomainCheckError(
            f"domain {report.domain!r} failed {len(report.failures)} check(s): " + "; ".join(report.failures)
        )
    return report
