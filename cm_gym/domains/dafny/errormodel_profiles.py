"""Dafny error models of the simulator's *fitted profiles* (``llm="simulated:<profile>"``).

A profile keeps the default model's slips (`cm_gym.domains.dafny.errormodel.dafny_error_model`), each
where it can occur, scaled to a fitted rate, and adds the kinds of mistake DafnyBench's published
programs show that the default lacks (measured by `cm_gym.studies.analysis.real_errors_dafny`; rates in
the profile files under ``cm_gym/llm/profiles/``):

* ``changed_code`` — a comparison in a body line flipped (``<`` ↔ ``<=``): the program is no
  longer the task's, which the annotation checker refuses;
* ``changed_spec`` — one single-line ``ensures`` clause left out (the specification changed);
* ``extra_invariant`` — the loop guard written as an invariant (false on exit);
* ``extra_decreases`` — a loop's index written as its measure (``decreases i`` under
  ``while i < n``: it grows);
* ``extra_assertion`` — a postcondition asserted as the first statement of its method;
* ``no_program`` — a reply with no program (an apology in prose);
* ``forbidden`` — ``assume false;`` as the first statement of a method.

``p(task) = min(0.95, rate × gate(task))``; a default slip's gate is its default probability
over its largest default rate, an added slip's is 1 where it fits the program. The retry and
revision rates are the default's (the published outputs say nothing about them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.base import ErrorModel, ErrorOperator
from cm_gym.domains.dafny.annotations import insert_after
from cm_gym.domains.dafny.errormodel import dafny_error_model
from cm_gym.domains.dafny.program import code_lines, loops, members

MAX_P = 0.95
#: the largest default rate of each default slip (`dafny_error_model`, `slips.SLIP_RATES`)
DEFAULT_PEAK: dict[str, float] = {
    "no_hints": 0.05,
    "weak_bound": 0.5,
    "drop_slice_invariant": 0.5,
    "drop_decreases": 0.5,
    "drop_invariant": 0.14,
    "drop_assertion": 0.1,
    "off_by_one_invariant": 0.05,
}
_ANN = re.compile(r"^\s*(invariant|decreases|assert|requires|ensures|modifies|reads)\b")
_CMP = re.compile(r"<=|>=|(?<![<=>-])<(?![=>])|(?<![=<-])>(?![=])")
_FLIP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
_ENSURES = re.compile(r"^\s*ensures\s+(.+?)\s*;?\s*$")
_INDEX_GUARD = re.compile(r"^\s*([A-Za-z_]\w*)\s*<=?\s*\S")


def _body_lines(program: str) -> list[int]:
    """Lines of code inside members that hold a comparison and are no annotation / spec."""
    lines = code_lines(program)
    return [i for i, ln in enumerate(lines) if _CMP.search(ln) and not _ANN.match(ln) and not members(ln)]


def changed_code(task: Task, action: str, rng: np.random.Generator) -> str | None:
    sites = _body_lines(action)
    if not sites:
        return None
    i = sites[int(rng.integers(len(sites)))]
    lines = action.splitlines()
    m = _CMP.search(lines[i].split("//", 1)[0])
    if m is None:
        return None
    lines[i] = lines[i][: m.start()] + _FLIP[m.group(0)] + lines[i][m.end() :]
    return "\n".join(lines) + "\n"


def _ensures(program: str) -> list[int]:
    return [
        i for i, ln in enumerate(code_lines(program)) if _ENSURES.match(ln) and ln.count("(") == ln.count(")")
    ]


def changed_spec(task: Task, action: str, rng: np.random.Generator) -> str | None:
    sites = _ensures(action)
    if not sites:
        return None
    drop = sites[int(rng.integers(len(sites)))]
    return "\n".join(ln for i, ln in enumerate(action.splitlines()) if i != drop) + "\n"


def _open_loops(action: str) -> list[Any]:
    return [lp for lp in loops(action) if not lp.brace_on_header and lp.guard]


def extra_invariant(task: Task, action: str, rng: np.random.Generator) -> str | None:
    lps = _open_loops(action)
    if not lps:
        return None
    lp = lps[int(rng.integers(len(lps)))]
    return insert_after(action, lp.line, f"invariant {lp.guard}")


def extra_decreases(task: Task, action: str, rng: np.random.Generator) -> str | None:
    lps = [lp for lp in _open_loops(action) if _INDEX_GUARD.match(lp.guard)]
    if not lps:
        return None
    lp = lps[int(rng.integers(len(lps)))]
    m = _INDEX_GUARD.match(lp.guard)
    assert m is not None
    return insert_after(action, lp.line, f"decreases {m.group(1)}")


def _body_start(action: str, at: int) -> int | None:
    """The line that opens the body of the member declared at or above line `at`."""
    lines = code_lines(action)
    for i in range(at, len(lines)):
        if lines[i].rstrip().endswith("{") and not _ANN.match(lines[i]):
            return i
    return None


def _first_statement(action: str, text: Callable[[str], str | None], rng: np.random.Generator) -> str | None:
    lines = code_lines(action)
    heads = [i for i, ln in enumerate(lines) if members(ln) and members(ln)[0][0] in ("method", "lemma")]
    if not heads:
        return None
    head = heads[int(rng.integers(len(heads)))]
    start = _body_start(action, head)
    nxt = next((i for i in heads if i > head), len(lines))
    if start is None or start >= nxt:
        return None
    posts = [m.group(1) for ln in lines[head:start] if (m := _ENSURES.match(ln))]
    new = text(posts[0] if posts else "")
    return insert_after(action, start, new) if new else None


def extra_assertion(task: Task, action: str, rng: np.random.Generator) -> str | None:
    return _first_statement(action, lambda post: f"assert {post};" if post else None, rng)


def forbidden(task: Task, action: str, rng: np.random.Generator) -> str | None:
    return _first_statement(action, lambda post: "assume false;", rng)


def no_program(task: Task, action: str, rng: np.random.Generator) -> str | None:
    return "I apologize, but I cannot add annotations that make this program verify."


_LOOPS = lambda t: bool(t.features.get("has_loop"))  # noqa: E731
#: added slips: name → (gate on the task, the slip)
ADDED: dict[str, tuple[Callable[[Task], bool], Callable[[Task, str, np.random.Generator], str | None]]] = {
    "changed_code": (lambda t: bool(_body_lines(t.reference)), changed_code),
    "changed_spec": (lambda t: bool(_ensures(t.reference)), changed_spec),
    "extra_invariant": (_LOOPS, extra_invariant),
    "extra_decreases": (_LOOPS, extra_decreases),
    "extra_assertion": (lambda t: bool(_ensures(t.reference)), extra_assertion),
    "forbidden": (lambda t: True, forbidden),
    "no_program": (lambda t: True, no_program),
}
OPERATORS: tuple[str, ...] = (*DEFAULT_PEAK, *ADDED)
#: the kind (`cm_gym.studies.analysis.real_errors_dafny.DAFNY_KINDS`) each slip produces
TARGETS: dict[str, str] = {
    "no_hints": "no_annotations",
    "weak_bound": "bound",
    "drop_slice_invariant": "missing_invariant",
    "drop_decreases": "missing_decreases",
    "drop_invariant": "missing_invariant",
    "drop_assertion": "missing_assertion",
    "off_by_one_invariant": "bound",
    **{name: name for name in ADDED},
}
_GATES: dict[tuple[str, str], bool] = {}


def initial_rates() -> dict[str, float]:
    """Where a fit starts: each default slip at its largest default rate, each added one at 0.1."""
    return {name: DEFAULT_PEAK.get(name, 0.1) for name in OPERATORS}


def _gate(name: str, task: Task) -> bool:
    key = (name, task.task_id + "\x1f" + str(hash(task.reference)))
    if key not in _GATES:
        _GATES[key] = ADDED[name][0](task)
    return _GATES[key]


def profile_error_model(params: Mapping[str, Any]) -> ErrorModel:
    """The `ErrorModel` of a fitted Dafny profile (``params["rates"]``: slip → rate)."""
    rates = {str(k): float(v) for k, v in (params.get("rates") or {}).items()}
    unknown = sorted(set(rates) - set(OPERATORS))
    if unknown:
        raise ValueError(f"unknown Dafny slip(s) in the profile: {', '.join(unknown)}")
    base = dafny_error_model()
    defaults = {op.name: op for op in base.operators}

    def prob(name: str) -> Callable[[Task], float]:
        rate = rates.get(name, 0.0)
        if name in defaults:
            op, peak = defaults[name], DEFAULT_PEAK[name]
            return lambda t: min(MAX_P, rate * op.probability(t) / peak) if rate > 0 else 0.0
        return lambda t: min(MAX_P, rate) if rate > 0 and _gate(name, t) else 0.0

    # slips that replace or break the program go last, so the annotation slips still find sites
    ops = tuple(
        ErrorOperator(name, prob(name), defaults[name].apply if name in defaults else ADDED[name][1])
        for name in OPERATORS
    )
    return ErrorModel(operators=ops, fix_prob=base.fix_prob, revision=base.revision)
