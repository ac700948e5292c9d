"""Recurring annotation slips of the simulated LLM's Dafny drafts, in families tied to program
features, and the reference-blind repairs that undo them (so a verified correction for one program
transfers to programs of the same shape).

Families (each an `ErrorOperator` of `dafny_error_model`; rates in `SLIP_RATES`):

- ``weak_bound``: a loop-index bound invariant written like the loop guard, ``0 <= i < n`` for
  ``0 <= i <= n`` under ``while i < n`` (it fails on exit, where ``i == n``). Repair: restore ``<=``.
- ``drop_slice_invariant``: an invariant over a sequence or array slice left out
  (``multiset(a[..]) == old(multiset(a[..]))``, ``s == F(a[..i])``). Repair: the enclosing
  method's slice postcondition as an invariant — verbatim when it relates the state to ``old``
  (a preservation invariant), else with ``X[..]`` narrowed to ``X[..i]`` for the loop's index.
- ``drop_decreases``: a ``decreases`` clause left out, more often in recursive programs and at
  loops whose guard is not an index bound Dafny can guess a measure for (``x > 0``, ``i != n``).
  Repair: the guard's measure (`guard_invariants`), or for a recursive member a parameter's
  measure (`spec_decreases`).
- Missing frame clauses (``modifies`` / ``reads``) are *not* a family here: DafnyBench's hint
  removal keeps them (they are specification, not hints; 1 of 445 ground truths adds one), so a
  draft without one changes the task's program, which the annotation checker refuses.

Where the rates come from: no cached run of a real model on Dafny exists in this project to fit
them to, so they are priors. The family split follows how often DafnyBench's ground truths need
each family (``python bench/bench_dafny_slips.py --counts``: bound invariants ``lo <= i <= n`` in
176 of the 247 programs with invariants, decreases in 114, slice invariants in 41): a family's
slip fires on half the drafts whose program has its feature (a strict index loop; recursion or a
non-index loop guard; a slice postcondition), an easy decreases clause on 10%. The generic slips
of the model this one refines (`errormodel.dafny_error_model`: dropped invariants and assertions,
off-by-ones, no hints) stay, at rates cut once (to 5-14%, from 12-70%) before any selector ran:
the first build (40 build tasks, seed 0) showed that independent slips compounding on one method
left no single-annotation correction that verifies (0 records), which says nothing about a
selector. No rate was tuned to a policy's score.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.base import Edit
from cm_gym.domains.dafny.annotations import (
    Annotation,
    AnnotationError,
    extract_annotations,
    insert_after,
    norm,
    remove_annotation,
    replace_annotation,
)
from cm_gym.domains.dafny.program import Loop, code_lines, loops, members, recursive_members

#: the chance that a draft makes each family's slip, by the program feature that triggers it
SLIP_RATES: dict[str, float] = {
    "weak_bound": 0.5,  # a loop guarded by a strict index bound (``i < n``)
    "drop_slice_invariant": 0.5,  # a loop in a program whose spec speaks of slices
    "drop_decreases_hard": 0.5,  # recursion, or a loop guard that is not ``i < n`` / ``i <= n``
    "drop_decreases_easy": 0.1,  # only index-bounded loops (Dafny guesses their measure)
}
_BOUND = re.compile(r"^invariant\s+(.+?)\s*<=\s*([A-Za-z_]\w*)\s*<=\s*(.+?)\s*;?$")
_WEAK = re.compile(r"^invariant\s+(.+?)\s*<=\s*([A-Za-z_]\w*)\s*<\s*(.+?)\s*;?$")
_STRICT_GUARD = re.compile(r"^\s*([A-Za-z_]\w*)\s*<\s*(.+?)\s*$")
_SLICE = re.compile(r"\[\s*\.\.|\.\.\s*\]")
_WHOLE = re.compile(r"\b([A-Za-z_]\w*)\[\s*\.\.\s*\]")
_ENSURES = re.compile(r"^\s*ensures\s+(.+?)\s*;?\s*$")
_PARAM = re.compile(r"([A-Za-z_]\w*)\s*:\s*(nat|int|seq\s*<|string|set\s*<|multiset\s*<)")
_SPEC_START = re.compile(r"^\s*(requires|ensures|reads|modifies|decreases|\{)")


def guard_invariants(guard: str) -> list[str]:
    """Bound invariants and a decreases clause suggested by a loop guard ``a < b`` etc. (of a
    conjunction ``a < b && ...``, its first conjunct)."""
    guard = guard.split("&&", 1)[0] if "||" not in guard else guard
    m = re.match(r"^\s*([A-Za-z_]\w*)\s*(<=|<|>=|>|!=)\s*([^&|(){};]+?|\|[^|]+\|)\s*$", guard)
    if not m:
        return []
    var, op, bound = m.group(1), m.group(2), m.group(3)
    if op in ("<", "!="):
        return [f"invariant 0 <= {var} <= {bound}", f"decreases {bound} - {var}"]
    if op == "<=":
        return [f"invariant {var} <= {bound} + 1", f"decreases {bound} - {var}"]
    return [f"invariant {var} >= {bound}", f"decreases {var} - {bound}"]


def _squash(text: str) -> str:
    return "".join(text.split())


def _anns(task: Task, action: str) -> list[Annotation]:
    try:
        return extract_annotations(str(task.meta.get("program", "")), action)
    except AnnotationError:
        return []


def _loop_of(lps: list[Loop], line: int) -> Loop | None:
    above = [lp for lp in lps if lp.line < line]
    return above[-1] if above else None


@dataclass(frozen=True)
class BoundSite:
    """A bound invariant ``lo <= i <= n`` (or its weak form ``lo <= i < n``) at ``while i < n``."""

    ann: Annotation
    lower: str
    var: str
    upper: str


def _bound_sites(task: Task, action: str, pattern: re.Pattern[str]) -> list[BoundSite]:
    lps = loops(action)
    out = []
    for ann in _anns(task, action):
        m = pattern.match(" ".join(ann.text.split()))
        loop = _loop_of(lps, ann.line)
        g = _STRICT_GUARD.match(loop.guard) if loop else None
        if m and g and m.group(2) == g.group(1) and _squash(m.group(3)) == _squash(g.group(2)):
            out.append(BoundSite(ann, m.group(1), m.group(2), m.group(3)))
    return out


def strict_index_loop(task: Task) -> bool:
    """Some loop is guarded by a strict index bound ``i < n`` (shape ``V < ...``, no ``&&``)."""
    return any(s.startswith("V < ") and "&&" not in s and "||" not in s
               for s in task.features.get("loop_guard_shapes", []) or [])  # fmt: skip


def slice_spec(task: Task) -> bool:
    """The program has a loop and its specification speaks of a whole slice ``X[..]``."""
    program = str(task.meta.get("program", ""))
    return bool(task.features.get("has_loop")) and any(
        m and _WHOLE.search(m.group(1)) for m in map(_ENSURES.match, code_lines(program))
    )


def hard_termination(task: Task) -> bool:
    """Recursion, or a loop whose guard is not an index bound ``V < ...`` / ``V <= ...``."""
    shapes = task.features.get("loop_guard_shapes", []) or []
    return bool(task.features.get("has_recursion")) or any(
        not (s.startswith("V < ") or s.startswith("V <= ")) for s in shapes
    )


def weak_bound(task: Task, action: str, rng: np.random.Generator) -> str | None:
    """Write one bound invariant like its loop guard (``<=`` → ``<`` on the upper bound)."""
    sites = _bound_sites(task, action, _BOUND)
    if not sites:
        return None
    s = sites[int(rng.integers(len(sites)))]
    return replace_annotation(action, s.ann, f"invariant {s.lower} <= {s.var} < {s.upper}")


def drop_slice_invariant(task: Task, action: str, rng: np.random.Generator) -> str | None:
    """Leave out one invariant over a slice."""
    anns = [a for a in _anns(task, action) if a.keyword == "invariant" and _SLICE.search(a.text)]
    if not anns:
        return None
    return remove_annotation(action, anns[int(rng.integers(len(anns)))])


def _spec_slices(action: str, loop: Loop) -> list[str]:
    """Single-line postconditions with a whole slice ``X[..]`` of the member enclosing `loop`."""
    lines = code_lines(action)
    header = max((i for i in range(loop.line) if members(lines[i])), default=None)
    if header is None:
        return []
    out = []
    for line in lines[header : loop.line]:
        m = _ENSURES.match(line)
        if m and _WHOLE.search(m.group(1)) and m.group(1).count("(") == m.group(1).count(")"):
            out.append(m.group(1))
    return out


def _narrow(post: str, index: str, bound: str) -> str:
    """`post` with each whole slice ``X[..]`` of the loop's bound ``X.Length`` / ``|X|`` cut to ``X[..index]``."""

    def cut(m: re.Match[str]) -> str:
        name = m.group(1)
        return f"{name}[..{index}]" if bound in (f"{name}.Length", f"|{name}|") else m.group(0)

    return _WHOLE.sub(cut, post)


def slice_invariants(action: str, loop: Loop) -> list[str]:
    """Slice invariants suggested by the enclosing member's postconditions (see module doc)."""
    g = _STRICT_GUARD.match(loop.guard)
    out = []
    for post in _spec_slices(action, loop):
        if "old(" in post:
            out.append(f"invariant {post}")
        elif g and (narrowed := _narrow(post, g.group(1), _squash(g.group(2)))) != post:
            out.append(f"invariant {narrowed}")
    return out


def spec_decreases(action: str) -> list[tuple[int, str]]:
    """(header line, clause) measures for recursive members without a ``decreases`` clause: each
    ``nat`` / ``int`` parameter ``p`` (``decreases p``) and each sequence, string or set ``s``
    (``decreases |s|``), for a one-line signature followed by its specification or body."""
    lines = code_lines(action)
    out = []
    for i, _name in recursive_members(action):
        header = lines[i]
        if header.rstrip().endswith("{"):
            continue
        rest = [(j, ln) for j, ln in enumerate(lines[i + 1 :], i + 1) if ln.strip()]
        if not rest or not _SPEC_START.match(rest[0][1]):
            continue
        body = next((j for j, ln in rest if ln.strip().startswith("{")), None)
        if body is None or any(ln.strip().startswith("decreases") for ln in lines[i + 1 : body]):
            continue
        for param, kind in _PARAM.findall(header):
            out.append((i, f"decreases {param}" if kind in ("nat", "int") else f"decreases |{param}|"))
    return out


def family_repairs(task: Task, action: str) -> list[Edit]:
    """Reference-blind repairs of the slip families, first the ones that undo a slip in place
    (restore a bound), then insertions at loops that have room for one."""

    edits: list[Edit] = []
    for s in _bound_sites(task, action, _WEAK):
        fixed = f"invariant {s.lower} <= {s.var} <= {s.upper}"
        first = s.ann.text.splitlines()[0]
        edits.append(
            Edit(
                replace_annotation(action, s.ann, fixed), f"line {s.ann.line + 1}", f"`{first}` -> `{fixed}`"
            )
        )
    for line, clause in spec_decreases(action):
        edits.append(Edit(insert_after(action, line, clause), f"line {line + 1}", f"add `{clause}`"))
    anns = _anns(task, action)
    lps = loops(action)
    for loop in lps:
        if loop.brace_on_header:
            continue
        here = {_squash(a.text).rstrip(";") for a in anns if _loop_of(lps, a.line) == loop}
        for cand in dict.fromkeys(slice_invariants(action, loop) + guard_invariants(loop.guard)):
            if _squash(cand) not in here and norm(cand):
                edits.append(
                    Edit(insert_after(action, loop.line, cand), f"line {loop.line + 1}", f"add `{cand}`")
                )
    return edits
