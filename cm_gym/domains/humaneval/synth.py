"""CodeHumanEvalSynth (``cm_gym/CodeHumanEvalSynth-v0``): HumanEval as *synthesis* — the task shows
a problem's prompt (signature and docstring), the action is the whole program, judged by the same
tests and judge as CodeHumanEval (`checks.py`, the sandbox, cases or pytest mode).

Why a second HumanEval benchmark: published HumanEval outputs (GPT-4, GPT-4 + Reflexion;
`cm_gym.llm.recordings`) answer the prompt — they are completions, not repairs of an injected
bug — so ``recorded:gpt-4``'s first draft is a task of this benchmark, not of CodeHumanEval. Its
recording key is the problem id; a published completion stands for the program ``prompt +
completion`` (HumanEval's own convention), the generated text unchanged.

The simulated LLM needs an error model here like on every benchmark. Its slips are **invented
mistakes**: the problem's vetted HumanEvalFix-class bugs (the ones CodeHumanEval injects,
`inject.py`: boundary, off-by-one, function misuse, operator, value, variable, missing logic; up
to three per problem), each written into the draft with probability `SLIP_PROBABILITY`, moved
onto the current draft as the same single edit. That one rate is set so the simulated first
drafts fail about as often as GPT-4's recorded completions do (24 of 164, 14.6 %: ≈ 0.05 per
class with ~3 classes); their kinds and everything else are not fitted to real outputs.

Conditions read only what the task shows (the prompt): docstring wording (``mentions_any`` /
``mentions_none``) and the prompt's names (``he_names``: parameters, the function, type names).
The code-shape predicates of CodeHumanEval would read the hidden solution here, so `distil`
drops them.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from cm_gym.core.types import Task
from cm_gym.domains.base import Distillation, ErrorModel, ErrorOperator, LoadReport, PredicateFn
from cm_gym.domains.code.program import program_features
from cm_gym.domains.humaneval.domain import HumanEvalDomain, distil_fix
from cm_gym.domains.humaneval.errormodel import transfer_contrast
from cm_gym.domains.humaneval.families import CUES, docstring_of, shape_features
from cm_gym.domains.humaneval.loader import humaneval_file, vetted_problems
from cm_gym.evaluators.testrun import TestSuite

DOMAIN = "humaneval_synth"
#: chance that a draft carries each of the problem's vetted HumanEvalFix-class bugs (module doc)
SLIP_PROBABILITY = 0.05
#: condition kinds that read what a synthesis task shows (the others read code shape)
VISIBLE_KINDS = ("mentions_any", "mentions_none", "he_names")


def _names(task: Task, args: tuple[str, ...]) -> bool:
    """he_names on a synthesis task: every name occurs in its prompt's code (not the solution)."""
    return bool(args) and all(a in (task.features.get("names") or []) for a in args)


PREDICATES: Mapping[str, PredicateFn] = {"he_names": _names}


def _shown_names(stub: str) -> list[str]:
    """Names the prompt's code shows: functions, parameters, imported and annotation names."""
    try:
        tree = ast.parse(stub + "    pass\n")
    except SyntaxError:
        return []
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
    return sorted(names)


def _shown(task: Task, conjunct: str) -> bool:
    """Whether a distilled conjunct reads only what the task shows: wording, or names that its
    prompt's code has (a fix's local variable names are the solution's, not the prompt's)."""
    kind = conjunct.split("(", 1)[0].strip()
    if kind == "he_names":
        return _names(task, tuple(json.loads(f"[{conjunct.split('(', 1)[1].rsplit(')', 1)[0]}]")))
    return kind in VISIBLE_KINDS


def _prompt(row: Mapping[str, Any]) -> str:
    return (
        f"Write the Python function `{row['entry_point']}` so that it does what its docstring says.\n"
        "Return the whole program: the code below with the function's body written.\n\n"
        f"```python\n{row['prompt']}```"
    )


def _family(doc: str) -> str:
    low = doc.lower()
    for cue, words in CUES.items():
        if any(re.search(rf"\b{re.escape(w)}\b", low) for w in words):
            return cue
    return "plain"


def _task(row: Mapping[str, Any], suite: TestSuite, slips: Mapping[str, str]) -> Task:
    fn, stub = row["entry_point"], row["prompt"]
    doc = docstring_of(stub, fn)
    feats: dict[str, Any] = program_features(stub, fn)
    shown = shape_features(stub, fn, doc)  # wording cues; the stub has no code shape
    feats.update({k: v for k, v in shown.items() if k == "boundary" or k.startswith("mentions_")})
    names = _shown_names(stub)
    test_names = suite.names()
    feats.update(names=names, docstring=doc[:2000], test_names=test_names, n_tests=len(test_names),
                 test_mode=suite.mode, source="humaneval", lookalike="")  # fmt: skip
    number = row["task_id"].rsplit("/", 1)[-1]
    return Task(
        task_id=f"humaneval-synth-{number}",
        domain=DOMAIN,
        prompt=_prompt(row),
        env_id=f"humaneval/{number}",
        reference=stub + row["canonical_solution"],
        context="Tests: " + ", ".join(test_names[:40]),
        family=_family(doc),
        features=feats,
        meta={
            "suite": suite.to_dict(),
            "buggy": stub,  # what a diff action applies to (the code the task shows)
            "stub": stub,
            "problem": row["task_id"],
            "slips": dict(slips),  # the simulator's only: never shown, never in a prompt
        },
    )


def load_synth_tasks(
    root: Path | str | None = None, limit: int | None = None, report: LoadReport | None = None
) -> list[Task]:
    """CodeHumanEvalSynth's tasks (ids ``humaneval-synth-<n>``), one per problem, in problem order;
    a problem whose canonical solution fails its own converted tests is dropped (reported)."""
    problems, seen = vetted_problems(str(humaneval_file(root)))
    refused = {tid for tid, why in seen.dropped if why.startswith("the canonical solution does not pass")}
    if report is not None:
        report.dropped.extend(e for e in seen.dropped if not e[1].startswith("no tried single-edit bug"))
        report.notes.extend(seen.notes)
    tasks = [
        _task(row, suite, {bug.family: bug.program for bug in bugs})
        for row, suite, bugs in problems
        if row["task_id"] not in refused
    ]
    return tasks[:limit] if limit is not None else tasks


def _slip(family: str) -> ErrorOperator:
    def probability(task: Task) -> float:
        return SLIP_PROBABILITY if family in (task.meta.get("slips") or {}) else 0.0

    def apply(task: Task, action: str, _rng: Any) -> str | None:
        bug = (task.meta.get("slips") or {}).get(family)
        if not bug:
            return None
        return bug if action == task.reference else transfer_contrast(action, task.reference, bug)

    return ErrorOperator(f"writes_{family}_bug", probability, apply)


class HumanEvalSynthDomain(HumanEvalDomain):
    """HumanEval synthesis: write the function from its prompt; the world model runs its tests."""

    name: ClassVar[str] = DOMAIN
    action_kind: ClassVar[str] = "Python program (the given code with the function's body written)"
    action_format: ClassVar[str] = (
        "Return the whole program (the given code with the function's body written) in one "
        "```python fenced code block."
    )

    def condition_predicates(self) -> Mapping[str, PredicateFn]:
        return PREDICATES

    def distil(self, task: Task, a_minus: str, a_plus: str) -> Distillation:
        """CodeHumanEval's distillation, keeping only the conjuncts that read what the task shows."""
        shown = Task(task.task_id, "humaneval", task.prompt, task.env_id, "", features=task.features)
        found = distil_fix(shown, a_minus, a_plus)
        parts = [p for p in found.condition.split(" AND ") if _shown(task, p)]
        return Distillation(found.situation, " AND ".join(parts))

    def error_model(self) -> ErrorModel:
        from cm_gym.domains.humaneval.families import FAMILIES

        return ErrorModel(operators=tuple(_slip(f) for f in FAMILIES))

    def recording_key(self, task: Task) -> str | None:
        """The HumanEval problem id (``HumanEval/<n>``) the task asks for."""
        problem = task.meta.get("problem")
        return str(problem) if problem else None

    def recorded_reply(self, task: Task, output: str) -> str:
        """HumanEval's convention: the program is the prompt followed by the completion."""
        return str(task.meta.get("stub", "")) + output
