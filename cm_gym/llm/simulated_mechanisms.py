"""The simulated LLM's answers to the memory-mechanism templates (`prompts_mechanisms.py`).

**A simulator, not a language model** (see `simulated.py`). It answers by rule, reading only the
rendered string fields (so it answers the same in-process and through the HTTP server), and it
never reads a task's reference. The rules, per template:

* REVISE_WITH_GUIDANCE — the simulated LLM can act only on guidance that shows a change: a worked
  example (``BEFORE:`` / ``AFTER:`` blocks) or a rendered trajectory in which a failed attempt was
  followed by a solving one (`parsers_mechanisms.stated_contrasts`). Each change, in the
  order shown, goes through the *same* revision model as a CounterMem record: the draft so far is
  revised by REVISE_WITH_RECORD with the example as the record's a⁻ → a⁺ (whatever that model does
  — apply, ignore, or anything else `simulated.py` models — happens here too). Guidance that shows
  no change leaves the draft unchanged. So mechanisms differ only in what they store and show.
* EXPEL_INSIGHT — the lesson is the domain's rule-based situation sentence for the failed →
  successful pair, with that pair as its worked example.
* GENERATIVE_AGENTS_IMPORTANCE — a fixed rubric on the observation: a change shown (a corrected
  failure, a worked example) 8, a failure 6, otherwise 2 (Park et al.'s prompt rates mundane events low
  and significant ones high; the exact numbers are this simulator's choice).
* GENERATIVE_AGENTS_REFLECT — the most frequent correction among the examples in the memories
  (ties: the most recent), stated as a generalized reflection with that example; none → a
  reflection without an example.
* VOYAGER_SKILL — name from the question, description = the question (what the procedure
  solves), steps = the final action's decision units plus, when the task was solved after a
  failure, the correction as a worked example.
* MEMGPT_ARCHIVE — the question, the outcome and, when solved after a failure, the correction as
  a worked example. MEMGPT_SEARCH — searches (for the question) when the working context is empty
  or the state shows a failed attempt; otherwise keeps the context.
* REASONINGBANK_EXTRACT / REASONINGBANK_VERIFIED — judges success from the trajectory's results
  (in these domains the environment reports whether an attempt solved the task, so the judge is
  right); a success after a failure gives a strategy with the correction as its example, a
  first-try success or a failure a strategy without one. The verified variant also sees checked
  scores and takes the attempt pair with the largest score gain, so a partial improvement counts.
* MATTS_SELF_CONTRAST — contrasts the final actions of a failed and a successful attempt
  (fewest differing tokens); all failed or all solved → a strategy without an example.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from cm_gym.core.types import Task
from cm_gym.domains.base import Domain, token_diff
from cm_gym.llm.base import (
    EXPEL_INSIGHT,
    GENERATIVE_AGENTS_IMPORTANCE,
    GENERATIVE_AGENTS_REFLECT,
    MATTS_SELF_CONTRAST,
    MEMGPT_ARCHIVE,
    MEMGPT_SEARCH,
    REASONINGBANK_EXTRACT,
    REASONINGBANK_VERIFIED,
    REVISE_WITH_GUIDANCE,
    REVISE_WITH_RECORD,
    VOYAGER_SKILL,
    Completion,
)
from cm_gym.llm.fence import fenced
from cm_gym.llm.parsers_mechanisms import (
    AttemptText,
    correction,
    example_block,
    parse_attempts,
    stated_contrasts,
)
from cm_gym.llm.prompts import Rendered


class Simulator(Protocol):
    """What these answers need of the simulated LLM (`cm_gym.llm.simulated.SimulatedLLM`, which
    dispatches to them): its answer to another template, and a domain by name."""

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion: ...

    def _domain(self, name: str) -> Domain: ...


Handler = Callable[[Simulator, Rendered, "Task | None"], str]


def _fenced(action: str) -> str:
    return fenced(action)


def _blind(task: Task) -> Task:
    return dataclasses.replace(task, reference="")


def _situation(sim: Simulator, task: Task, before: str, after: str) -> str:
    d = sim._domain(task.domain).distil(_blind(task), before, after)
    return " ".join(d.situation.split()) or "A similar action needed this correction."


def _revise_with_guidance(sim: Simulator, r: Rendered, task: Task | None) -> str:
    assert task is not None
    f = r.fields
    domain = sim._domain(task.domain)
    draft = f["draft"]
    for i, (before, after) in enumerate(stated_contrasts(f["guidance"]), start=1):
        reply = sim.complete(
            REVISE_WITH_RECORD,
            {
                "task": task,
                "agent": f["agent"],
                "decision": f["decision"],
                "state_text": f["state_text"],
                "action_kind": f["action_kind"],
                "action_format": f["action_format"],
                "draft": draft,
                "record": f["guidance"],
                "record_id": f"{f['mechanism']}-{i}",
                "record_a_minus": before,
                "record_a_plus": after,
            },
        )
        draft = domain.parse_action(reply.text) or draft
    return _fenced(draft)


def _expel_insight(sim: Simulator, r: Rendered, task: Task | None) -> str:
    assert task is not None
    before, after = r.fields["failed_action"], r.fields["successful_action"]
    lesson = _situation(sim, task, before, after)
    return f"INSIGHT: {lesson}\n{example_block(before, after)}"


def _importance(sim: Simulator, r: Rendered, task: Task | None) -> str:
    text = r.fields["observation"]
    if stated_contrasts(text):
        return "IMPORTANCE: 8"
    return "IMPORTANCE: 6" if any(not a.solved for a in parse_attempts(text)) else "IMPORTANCE: 2"


def _reflect(sim: Simulator, r: Rendered, task: Task | None) -> str:
    pairs = stated_contrasts(r.fields["memories"])
    if not pairs or task is None:
        return "REFLECTION: Most recent tasks went through without a correction worth generalizing."
    keys = [" ; ".join(f"{a}->{b}" for a, b in token_diff(x, y)) for x, y in pairs]
    counts = collections.Counter(keys)
    top = max(range(len(pairs)), key=lambda i: (counts[keys[i]], i))
    before, after = pairs[top]
    lesson = _situation(sim, task, before, after)
    return f"REFLECTION: A recurring correction across recent tasks: {lesson}\n{example_block(before, after)}"


def _question_name(question: str) -> str:
    words = re.findall(r"[A-Za-z]+", question)[:5]
    return "_".join(w.lower() for w in words) or "skill"


def _voyager_skill(sim: Simulator, r: Rendered, task: Task | None) -> str:
    assert task is not None
    f = r.fields
    attempts = parse_attempts(f["trajectory"])
    final = attempts[-1].action if attempts else ""
    units = sim._domain(task.domain).decision_units(final) if final else []
    steps = " ".join(f"{i}. {u.strip()}" for i, u in enumerate(units, start=1))
    fix = correction(attempts)
    if fix is not None:
        steps += f" Check this correction: {_situation(sim, task, *fix)}\n{example_block(*fix)}"
    question = " ".join(f["question"].split())
    return f"NAME: {_question_name(question)}\nDESCRIPTION: {question}\nSTEPS: {steps}"


def _memgpt_archive(sim: Simulator, r: Rendered, task: Task | None) -> str:
    assert task is not None
    attempts = parse_attempts(r.fields["trajectory"])
    question = " ".join(r.fields["question"].split())[:300]
    solved = any(a.solved for a in attempts)
    entry = f"ENTRY: Task: {question} Outcome: {'solved' if solved else 'not solved'} after {len(attempts)} attempt(s)."
    fix = correction(attempts)
    if fix is not None:
        entry += f" What fixed it: {_situation(sim, task, *fix)}\n{example_block(*fix)}"
    return entry


def _memgpt_search(sim: Simulator, r: Rendered, task: Task | None) -> str:
    f = r.fields
    context = f["working_context"].strip()
    if not context or context == "(empty)" or "Previous attempt:" in f["state_text"]:
        question = f["state_text"].split("\n", 1)[0].removeprefix("Task:").strip()
        return f"SEARCH: {question}"
    return "SEARCH: none"


def _strategy(sim: Simulator, task: Task, attempts: list[AttemptText], by_score: bool) -> str:
    success = any(a.solved for a in attempts)
    fix = correction(attempts, by_score=by_score)
    if fix is not None:
        lesson = _situation(sim, task, *fix)
        return (
            f"OUTCOME: {'success' if success else 'failure'}\nTITLE: Correct the recurring slip\n"
            f"DESCRIPTION: {lesson}\nCONTENT: {lesson}\n{example_block(*fix)}"
        )
    if success:
        return (
            "OUTCOME: success\nTITLE: Follow the request closely\nDESCRIPTION: A direct reading of the "
            "request worked.\nCONTENT: Write the action that the request's wording asks for, unit by unit."
        )
    feedback = attempts[-1].feedback[:200] if attempts else ""
    return (
        "OUTCOME: failure\nTITLE: Do not repeat a rejected action\nDESCRIPTION: The checker rejected "
        f"every attempt.\nCONTENT: Avoid what the checker rejected ({feedback}); reread the request."
    )


def _rb_extract(sim: Simulator, r: Rendered, task: Task | None) -> str:
    assert task is not None
    return _strategy(sim, task, parse_attempts(r.fields["trajectory"]), by_score=False)


def _rb_verified(sim: Simulator, r: Rendered, task: Task | None) -> str:
    assert task is not None
    return _strategy(sim, task, parse_attempts(r.fields["trajectory"]), by_score=True)


def _matts(sim: Simulator, r: Rendered, task: Task | None) -> str:
    assert task is not None
    runs = [
        parse_attempts(block)
        for block in re.split(r"^Trajectory \d+:\n", r.fields["trajectories"], flags=re.M)
    ]
    finals = [(run[-1].action, run[-1].solved) for run in runs if run]
    good = [a for a, ok in finals if ok]
    bad = [a for a, ok in finals if not ok]
    pairs = [(b, g) for b in bad for g in good if b != g]
    if not pairs:
        merged = [a for run in runs for a in run]
        body = _strategy(sim, task, merged, by_score=False)
        return body.split("\n", 1)[1]  # MaTTS replies carry no OUTCOME line
    before, after = min(pairs, key=lambda p: (len(token_diff(*p)), pairs.index(p)))
    lesson = _situation(sim, task, before, after)
    return (
        f"TITLE: What the successful attempts do differently\nDESCRIPTION: {lesson}\nCONTENT: {lesson}\n"
        f"{example_block(before, after)}"
    )


#: Template name → simulated answer; `simulated.py` dispatches to these.
REPLIES: dict[str, Handler] = {
    REVISE_WITH_GUIDANCE: _revise_with_guidance,
    EXPEL_INSIGHT: _expel_insight,
    GENERATIVE_AGENTS_IMPORTANCE: _importance,
    GENERATIVE_AGENTS_REFLECT: _reflect,
    VOYAGER_SKILL: _voyager_skill,
    MEMGPT_ARCHIVE: _memgpt_archive,
    MEMGPT_SEARCH: _memgpt_search,
    REASONINGBANK_EXTRACT: _rb_extract,
    REASONINGBANK_VERIFIED: _rb_verified,
    MATTS_SELF_CONTRAST: _matts,
}

#: Templates whose answer needs the Task (resolved from ``<task_id>``).
NEEDS_TASK = frozenset(REPLIES) - {GENERATIVE_AGENTS_IMPORTANCE, MEMGPT_SEARCH}
