"""Core vocabulary of SPEC §2: Task, AgentState, Action, Outcome, the Evaluator protocol and Split.

All value types are small frozen dataclasses, so a *fork* of an `AgentState` is the object itself
(nothing can mutate it) and evaluators can never change the state they were handed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

# Prompt-field truncation limits in characters (SPEC §3, paper D.8).
TRUNCATION: Mapping[str, int] = {
    "state": 2500,
    "action": 2000,
    "draft": 2000,
    "feedback": 800,
    "decision_units": 4000,
    "context": 3000,
    "record": 1200,
    "trajectory": 3000,
}


def truncate(text: str, limit: int) -> str:
    """Cut `text` to at most `limit` characters, marking the cut with an ellipsis."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 3)] + "..."


class CmGymError(Exception):
    """Base class of every error cm_gym raises on purpose."""


class SplitOverlapError(CmGymError):
    """T_build ∪ T_train intersects T_eval (Eq. 14): the protocol refuses to run."""


@dataclass(frozen=True)
class Task:
    """One benchmark instance.

    `reference` is the hidden reference solution: only evaluators and the simulated LLM's
    *drafting* may read it; it is never rendered into a prompt or into feedback.
    `features` holds JSON-serialisable task features read by condition predicates and by the
    domain's simulated-LLM error model (e.g. ``{"boundary": "inclusive", "columns": {...}}``).
    `meta` holds loader/evaluator data (problem description, file path, expected verdict); like
    `reference`, it is never rendered into prompts or shown to the LLM.
    """

    task_id: str
    domain: str
    prompt: str
    env_id: str
    reference: str
    context: str = ""
    family: str = ""
    features: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    meta: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)


def task_digest(tasks: Iterable[Task]) -> str:
    """sha256 of the tasks' full content (every field, features and meta included, in the given
    order): two task lists with the same digest are the same benchmark input. Used in cache keys
    and in ``results.json`` so an edited gold query or prompt never passes for the old one."""
    h = hashlib.sha256()
    for task in tasks:
        data = asdict(task)
        try:
            blob = json.dumps(data, sort_keys=True, default=str, ensure_ascii=False)
        except TypeError:  # dict keys of mixed types (a test input such as {"a": 1, 5: 2})
            blob = json.dumps(_str_keys(data), sort_keys=True, default=str, ensure_ascii=False)
        h.update(blob.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


#: `task_text` results kept (one per task; cleared when full)
_TEXTS_SIZE = 4096
_texts: dict[tuple[Any, ...], tuple[Any, Any, str]] = {}


def task_text(task: Task) -> str:
    """Every field of `task` but the hidden reference, as canonical JSON: the task's part of a
    work-memo key for reference-free work (condition verdicts, simulated revision candidates and
    drafts). `task_digest` also copies the task (`asdict`): 10x the cost.

    Memoised on the scalar fields and the *identity* of the `features` and `meta` mappings (the
    memo keeps them, so their ids are not reused): a task and its copy without the reference
    (`dataclasses.replace` shares those mappings) are one entry, and the JSON of a SQL task
    (30-70 us) is written once per process instead of at every lookup of every copy. Like the
    frozen `Task` itself, this assumes the mappings are not changed in place."""
    key = (task.task_id, task.domain, task.env_id, task.family, task.prompt, task.context,
           id(task.features), id(task.meta))  # fmt: skip
    hit = _texts.get(key)
    if hit is not None and hit[0] is task.features and hit[1] is task.meta:
        return hit[2]
    text = _canonical_text(task)
    if len(_texts) >= _TEXTS_SIZE:
        _texts.clear()
    _texts[key] = (task.features, task.meta, text)
    return text


def _canonical_text(task: Task) -> str:
    fields = [task.task_id, task.domain, task.env_id, task.family, task.prompt, task.context,
              task.features, task.meta]  # fmt: skip
    try:
        return json.dumps(fields, sort_keys=True, default=str, ensure_ascii=False)
    except TypeError:  # dict keys of mixed types
        return json.dumps(_str_keys(fields), sort_keys=True, default=str, ensure_ascii=False)


def _str_keys(obj: Any) -> Any:
    """`obj` with every non-string dict key tagged by its type (``5`` → ``"int:5"``), so keys of
    mixed types sort, and ``5`` and ``"5"`` stay apart."""
    if isinstance(obj, dict):
        return {
            (k if isinstance(k, str) else f"{type(k).__name__}:{k}"): _str_keys(v) for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [_str_keys(v) for v in obj]
    return obj


# The value types built on every check and decision (Action, Outcome, Attempt, AgentState) keep
# the frozen dataclass's fields, equality, hash, repr and frozenness, but set their fields in their
# own ``__init__`` through the instance dict: the generated one calls ``object.__setattr__`` once
# per field (a frozen class's only way), 0.35 us for an Action, 0.66 us for an AgentState and
# 1.3 us for an Outcome, about half of that here (issue 35: the world model's cost beside its raw
# tool). The same objects: `tests/core/test_types_init.py` checks them against the generated init.
_NO_DETAILS: Any = object()


@dataclass(frozen=True, init=False)
class Action:
    """The text the LLM submits: a SQL query, a CNF/SMT encoding or solver configuration, a patch."""

    text: str

    def __init__(self, text: str) -> None:
        self.__dict__["text"] = text


@dataclass(frozen=True, init=False)
class Outcome:
    """What the world model says about one action. `score` is U(o) in [0, 1].

    `status` is "ok" when the check completed; otherwise one of "error" (the action is malformed or
    raised), "refused" (the sandbox denied it), "timeout" / "budget" (a limit was hit),
    "undecided" (the answer could neither be verified nor refuted, e.g. a quantified assertion under
    a model), "unevaluable" (the task itself cannot be judged, e.g. its reference is beyond a cap)
    or "infrastructure" (a wall-clock hang guard stopped the check twice: the machine, not the
    action; never scored, never cached: `cm_gym.evaluators.budgets`).
    A refused or failed check is still an Outcome with score 0 and a `reason`, never an exception.
    """

    score: float
    solved: bool
    feedback: str = ""
    status: str = "ok"
    reason: str = ""
    details: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def __init__(
        self,
        score: float,
        solved: bool,
        feedback: str = "",
        status: str = "ok",
        reason: str = "",
        details: Mapping[str, Any] = _NO_DETAILS,
    ) -> None:
        d = self.__dict__
        d["score"] = score
        d["solved"] = solved
        d["feedback"] = feedback
        d["status"] = status
        d["reason"] = reason
        d["details"] = {} if details is _NO_DETAILS else details

    @property
    def graded_score(self) -> float:
        """A graded utility in [0, 1] where the world model computes one beside `score` —
        ``details["graded"]``: result-set overlap for SQL — else `score` (already graded where a
        domain scores the fraction of tests or constraints). Evidence Δ uses it."""
        graded = self.details.get("graded") if self.details else None
        return float(graded) if graded is not None else float(self.score)

    @property
    def completed(self) -> bool:
        """True when the evaluator finished its check (needed for admission, Eq. 2)."""
        return self.status == "ok"


@dataclass(frozen=True, init=False)
class Attempt:
    """One evaluated action within a task, with the record id that shaped it (if any)."""

    action: str
    outcome: Outcome
    draft: str = ""
    record_id: str | None = None

    def __init__(self, action: str, outcome: Outcome, draft: str = "", record_id: str | None = None) -> None:
        d = self.__dict__
        d["action"], d["outcome"], d["draft"], d["record_id"] = action, outcome, draft, record_id


@dataclass(frozen=True, init=False)
class AgentState:
    """Task + environment + partial solution + feedback so far (s_t). Immutable: fork() is free."""

    task: Task
    attempts: tuple[Attempt, ...] = ()
    reflections: tuple[str, ...] = ()

    def __init__(
        self, task: Task, attempts: tuple[Attempt, ...] = (), reflections: tuple[str, ...] = ()
    ) -> None:
        d = self.__dict__
        d["task"], d["attempts"], d["reflections"] = task, attempts, reflections

    @property
    def decision(self) -> int:
        """Index of the next decision (= number of evaluated attempts so far)."""
        return len(self.attempts)

    @property
    def last_outcome(self) -> Outcome | None:
        return self.attempts[-1].outcome if self.attempts else None

    @property
    def last_score(self) -> float:
        return self.attempts[-1].outcome.score if self.attempts else 0.0

    @property
    def solved(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].outcome.solved

    def fork(self) -> AgentState:
        """A copy an evaluator may use; since the state is immutable this is the state itself."""
        return self

    def with_attempt(self, attempt: Attempt) -> AgentState:
        if type(self) is not AgentState:  # a subclass may have more fields: `replace` copies them
            return replace(self, attempts=self.attempts + (attempt,))
        return AgentState(self.task, self.attempts + (attempt,), self.reflections)  # (every decision)

    def with_reflection(self, reflection: str) -> AgentState:
        if type(self) is not AgentState:
            return replace(self, reflections=self.reflections + (reflection,))
        return AgentState(self.task, self.attempts, self.reflections + (reflection,))

    def render(self) -> str:
        """The state text used in prompts and embedded for retrieval (truncated to SPEC limits).

        Task, last attempt, feedback and reflections come first; the environment context fills
        what is left of the state budget, so feedback is never cut off by a long schema.
        """
        parts = [f"Task: {self.task.prompt}"]
        if self.attempts:
            last = self.attempts[-1]
            parts.append("Previous attempt:\n" + truncate(last.action, TRUNCATION["action"]))
            parts.append("Feedback: " + truncate(last.outcome.feedback, TRUNCATION["feedback"]))
        if self.reflections:
            parts.append("Reflections:\n" + "\n".join(f"- {r}" for r in self.reflections[-3:]))
        head = truncate("\n".join(parts), TRUNCATION["state"])
        room = TRUNCATION["state"] - len(head) - len("\nEnvironment:\n")
        if self.task.context and room > 40:
            head += "\nEnvironment:\n" + truncate(self.task.context, min(room, TRUNCATION["context"]))
        return head


@runtime_checkable
class Evaluator(Protocol):
    """Executable world model H. `check` evaluates `action` from a fork of `state` and never
    mutates the state or its environment (databases are opened read-only, files are copied)."""

    def check(self, state: AgentState, action: Action) -> Outcome: ...


def check_all(evaluator: Evaluator, state: AgentState, actions: Sequence[Action]) -> list[Outcome]:
    """Check independent `actions` from the same state, in order. An evaluator may offer
    ``check_many(state, actions) -> list[Outcome]`` (same results as calling `check` on each, run
    in parallel, e.g. one external verifier process per action); otherwise they run one by one."""
    many = getattr(evaluator, "check_many", None)
    if callable(many) and len(actions) > 1:
        outcomes = list(many(state.fork(), list(actions)))
        if len(outcomes) != len(actions):
            raise CmGymError(
                f"{type(evaluator).__name__}.check_many returned {len(outcomes)} outcomes for {len(actions)} actions"
            )
        return outcomes
    return [evaluator.check(state.fork(), a) for a in actions]


@dataclass(frozen=True)
class Split:
    """Task-id sets of the protocol (Appendix C.3). `validation` ⊆ `train` is the selector's
    checkpoint-selection subset."""

    build: tuple[str, ...]
    train: tuple[str, ...]
    validation: tuple[str, ...]
    eval: tuple[str, ...]

    def check(self) -> None:
        """Refuse overlap between T_build ∪ T_train and T_eval (Eq. 14), naming the ids."""
        overlap = sorted((set(self.build) | set(self.train)) & set(self.eval))
        if overlap:
            shown = ", ".join(overlap[:10]) + (" ..." if len(overlap) > 10 else "")
            raise SplitOverlapError(
                f"{len(overlap)} task id(s) are in both T_build∪T_train and T_eval: {shown}"
            )
        stray = sorted(set(self.validation) - set(self.train))
        if stray:
            raise SplitOverlapError(f"validation ids not in T_train: {', '.join(stray[:10])}")
