"""A tiny fake domain ("toy": one comparison per action) and a fake LLM for the memory tests.

Tasks ask for rows "at least N" (reference uses >=), "strictly above N" (reference uses >) or "at
most N" (<=). The fake LLM drafts every inclusive task with a persistent strict-for-inclusive slip
(">" for ">="), so an inclusive task fails until a record revises it; strict tasks are drafted
right. It revises with the record's a- -> a+ contrast, proposes alternatives through the real edit
grammar (or a broken reply, to test fallbacks) and distils with the domain's rules.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from cm_gym.core.types import Action, AgentState, Outcome, Task
from cm_gym.domains.base import Distillation, Domain, Edit, ErrorModel, ErrorOperator, PredicateFn
from cm_gym.llm.base import (
    DISTIL_RECORD,
    DRAFT_ACTION,
    GENERATE_LOCAL_ALTERNATIVES,
    REFLECT,
    REVISE_WITH_RECORD,
    Completion,
)
from cm_gym.llm.parsers import format_alternatives

_OPS = {">": "GT", ">=": "GTE", "<": "LT", "<=": "LTE"}
_FLIP = {">": ">=", ">=": ">", "<": "<=", "<=": "<"}
_OP_RE = re.compile(r">=|<=|>|<")


def _has_number(task: Task, args: tuple[str, ...]) -> bool:
    """The question names a number."""
    return bool(re.search(r"\d", task.prompt))


def _boundary_is(task: Task, args: tuple[str, ...]) -> bool:
    """The question's boundary kind (inclusive / strict)."""
    return task.features.get("boundary") == args[0]


class ToyDomain(Domain):
    """One decision unit per action: the comparison operator."""

    name = "memtoy"
    action_kind = "toy query"

    def make_evaluator(self, **kwargs: Any) -> ToyEvaluator:
        return ToyEvaluator()

    def edit_operators(self, task: Task, action: str) -> list[Edit]:
        out: list[Edit] = []
        for m in _OP_RE.finditer(action):
            new = action[: m.start()] + _FLIP[m.group(0)] + action[m.end() :]
            out.append(Edit(new, "comparison", f"{m.group(0)} -> {_FLIP[m.group(0)]}"))
        if "DISTINCT" not in action:
            out.append(Edit(action.replace("SELECT", "SELECT DISTINCT", 1), "distinct", "add DISTINCT"))
        return out

    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        return {"toy_has_number": _has_number, "toy_boundary_is": _boundary_is}

    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        situation = "A numeric threshold comparison may omit or include its boundary value."
        if "at least" in task.prompt:
            return Distillation(situation, 'mentions_any("at least") AND toy_has_number()')
        if "strictly" in task.prompt:
            return Distillation(situation, 'mentions_any("strictly")')
        return Distillation(situation, "")

    def contrast_key(self, a_minus: str, a_plus: str) -> str:
        ma, mb = _OP_RE.search(a_minus), _OP_RE.search(a_plus)
        if ma and mb and ma.group(0) != mb.group(0):
            return f"cmp:{_OPS[ma.group(0)]}->{_OPS[mb.group(0)]}"
        return super().contrast_key(a_minus, a_plus)

    def error_model(self) -> ErrorModel:
        def prob(task: Task) -> float:
            return 1.0 if task.features.get("boundary") == "inclusive" else 0.0

        def apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
            return action.replace(">=", ">", 1) if ">=" in action else None

        return ErrorModel((ErrorOperator("strict_for_inclusive", prob, apply),))


class ToyEvaluator:
    """Score 1 iff the action equals the reference (whitespace-insensitive); empty → error."""

    def __init__(self) -> None:
        self.calls = 0

    def check(self, state: AgentState, action: Action) -> Outcome:
        self.calls += 1
        text = " ".join(action.text.split())
        if not text:
            return Outcome(0.0, False, "empty action", status="error", reason="empty")
        ok = text == " ".join(state.task.reference.split())
        return Outcome(1.0 if ok else 0.0, ok, "correct" if ok else "wrong rows")


def make_task(i: int, kind: str, env: str = "db0", threshold: int | None = None) -> Task:
    n = threshold if threshold is not None else 10 + i
    col = ("age", "score", "height")[i % 3]
    if kind == "inclusive":
        prompt, ref = (
            f"List people whose {col} is at least {n}.",
            f"SELECT name FROM people WHERE {col} >= {n}",
        )
    elif kind == "strict":
        prompt, ref = (
            f"List people whose {col} is strictly above {n}.",
            f"SELECT name FROM people WHERE {col} > {n}",
        )
    else:
        prompt, ref = (
            f"List people whose {col} is at most {n}.",
            f"SELECT name FROM people WHERE {col} <= {n}",
        )
    return Task(
        task_id=f"mt-{i:04d}",
        domain="memtoy",
        prompt=prompt,
        env_id=env,
        reference=ref,
        family=kind,
        features={"boundary": "inclusive" if kind != "strict" else "strict"},
    )


def make_tasks(n: int, kinds: tuple[str, ...] = ("inclusive", "strict", "inclusive")) -> list[Task]:
    return [make_task(i, kinds[i % len(kinds)], env=f"db{i % 2}") for i in range(n)]


def fenced(text: str) -> str:
    return f"```\n{text}\n```"


class FakeLLM:
    """Deterministic fake of the LLM protocol for the toy domain (counts calls per template).

    `alternatives` = "grammar" (real edit grammar), "broken" (unparseable reply) or "none".
    `sleep` adds a delay per call (the kill test uses it to slow a build down).
    """

    name = "fake"

    def __init__(self, alternatives: str = "grammar", distil: str = "ok", sleep: float = 0.0) -> None:
        self.domain = ToyDomain()
        self.calls: Counter[str] = Counter()
        self.alternatives, self.distil_mode, self.sleep = alternatives, distil, sleep

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        if self.sleep:
            import time

            time.sleep(self.sleep)
        self.calls[template] += 1
        task: Task = fields["task"]
        if template == DRAFT_ACTION:
            ref = task.reference
            text = fenced(ref.replace(">=", ">", 1) if task.features.get("boundary") == "inclusive" else ref)
        elif template == REVISE_WITH_RECORD:
            revised = self.domain.apply_contrast(
                task, fields["draft"], fields["record_a_minus"], fields["record_a_plus"]
            )
            text = fenced(revised if revised is not None else fields["draft"])
        elif template == GENERATE_LOCAL_ALTERNATIVES:
            action = fields["action"]
            if self.alternatives == "broken":
                text = "I would try something different, honestly."
            elif self.alternatives == "none":
                text = ""
            else:  # the LLM proposes the DISTINCT edit first, then the operator flip
                edits = [e.text for e in self.domain.edit_operators(task, action)]
                text = format_alternatives(action, list(reversed(edits))[:2])
        elif template == DISTIL_RECORD:
            if self.distil_mode == "garbage":
                text = "I cannot summarise this."
            elif self.distil_mode == "bad_condition":
                text = "SITUATION: a boundary slip\nCONDITION: the question is inclusive-ish"
            elif self.distil_mode == "wrong_condition":  # parseable, but false on the source task
                text = 'SITUATION: a boundary slip\nCONDITION: mentions_any("strictly")'
            else:
                d = self.domain.distil(task, fields["a_minus"], fields["a_plus"])
                text = f"SITUATION: {d.situation}\nCONDITION: {d.condition or 'none'}"
        elif template == REFLECT:
            text = "I should check the boundary."
        else:
            raise AssertionError(f"unexpected template {template}")
        return Completion(text, 50, max(1, len(text) // 4))
