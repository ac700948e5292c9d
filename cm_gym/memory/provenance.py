"""Where a record's a⁻ and a⁺ came from, and which a⁻ a store built on real drafts admits.

A record's a⁻ is an executed action (the memory-free draft, or the draft revised with a record
during construction-time reuse); its a⁺ a checked alternative (an LLM's local edit or the
domain's rule-based edit). On recorded drafts (``llm="recorded:<system>"``) the draft is a real
published output but the revision and the LLM alternatives are the *simulator's* text, so a
record's a⁻ can be a simulated disturbance of a real draft. `Record.a_minus_provenance` /
`a_plus_provenance` say which (`cm_gym.memory.record.PROVENANCES`), from the replies' marks
(`Completion.provenance`, `cm_gym.llm.replies`):

* a draft's reply marked ``real:<system>`` → "real"; a revision's or an alternative's → "real-revision";
* ``simulated`` → "simulated"; a rule-based edit, or a record's transform (``transform``) → "edit";
* unmarked → "simulated" when the LLM is the simulator (which does not mark its replies), else
  "unknown".

Admission (`ConstructionConfig.admit_a_minus`, `ADMIT_A_MINUS`): "auto" (default) refuses an a⁻
that is not real model text when the decision's draft was real (a store built from recorded or
local-model drafts admits only real a⁻); "real" refuses it always; "any" admits every a⁻ (the
behaviour before provenance existed, for comparison).
"""

from __future__ import annotations

from typing import Any

from cm_gym.agent import TRANSFORM_MARK
from cm_gym.llm.replies import REAL, SIMULATED, kind_of
from cm_gym.memory.record import REAL_PROVENANCES

ADMIT_A_MINUS = ("auto", "real", "any")
#: The rejection reason counted in `BuildSummary` when admission refuses a non-real a⁻.
A_MINUS_NOT_REAL = "a_minus_not_real"


def unmarked_provenance(llm: Any) -> str:
    """What an unmarked reply of `llm` is: "simulated" when the simulator answers (through any
    wrappers that keep their backend as ``.inner``), else "unknown"."""
    from cm_gym.llm.simulated import SimulatedLLM

    for _ in range(8):
        if llm is None:
            break
        if isinstance(llm, SimulatedLLM):
            return SIMULATED
        llm = getattr(llm, "inner", None)
    return "unknown"


def provenance_of(mark: str, *, revision: bool, unmarked: str = "unknown") -> str:
    """The record provenance of a reply's mark: a real reply is "real" (a draft) or
    "real-revision" (`revision`: a revision of, or an alternative to, a draft); an action a
    record's transform made (``revise="transform"``, no LLM) is a rule-based "edit"."""
    if mark == TRANSFORM_MARK:
        return "edit"
    kind = kind_of(mark or "")
    if kind == REAL:
        return "real-revision" if revision else "real"
    if kind == SIMULATED:
        return SIMULATED
    return unmarked


def a_minus_refusal(policy: str, a_minus: str, draft: str) -> str | None:
    """`A_MINUS_NOT_REAL` when `policy` refuses an a⁻ of provenance `a_minus` on a decision whose
    draft had provenance `draft` (see the module docstring), else None."""
    if policy not in ADMIT_A_MINUS:
        raise ValueError(f"admit_a_minus must be one of {ADMIT_A_MINUS}, got {policy!r}")
    if policy == "any" or a_minus in REAL_PROVENANCES:
        return None
    if policy == "real" or draft in REAL_PROVENANCES:
        return A_MINUS_NOT_REAL
    return None
