"""Rule-based local edits of a proof script (Module I): each changes one decision unit.

In the order they are offered (the alternatives generator fills its slots from the front):

1. a Lean/Mathlib tactic or lemma name replaced by Coq's (``linarith`` → ``lra``);
2. the missing ``Require Import`` of a decision procedure the script runs;
3. a decision procedure swapped for another that fits the statement's domain (``lia`` → ``nra``
   on R; ``lia`` → ``nia`` on nat/Z; the procedure's library comes along as part of the unit);
4. ``intros.`` added (or dropped), ``subst.`` added (or dropped);
5. a goal split: ``split_Rabs.`` before the last procedure when the statement has absolute values,
   ``repeat split.`` for conjunctions, ``field_simplify.`` when it divides;
6. an ``nra`` hint: ``pose proof (pow2_ge_0 v).`` for a real variable v of a non-linear statement.

Edits read the statement's public features (`Task.features`), never the reference.
"""

from __future__ import annotations

from collections.abc import Callable

from cm_gym.core.types import Task
from cm_gym.domains.base import Edit
from cm_gym.domains.math.lines import (
    LEAN_LEMMAS,
    LEAN_TO_COQ,
    PROCEDURES_BY_DOMAIN,
    ScriptLines,
    normal,
    parts,
    procedure_of,
    split_lines,
    with_body,
    with_selector,
)

MAX_EDITS = 24
Add = Callable[[ScriptLines, str, str], None]
_COQ_LEMMA = {lean: coq for coq, lean in LEAN_LEMMAS.items()}


def _domain(task: Task) -> str:
    return str(task.features.get("domain", "nat"))


def math_edit_operators(task: Task, action: str) -> list[Edit]:
    """The edits of `action` (see module doc), deduplicated, at most `MAX_EDITS`."""
    s = split_lines(action)
    out: list[Edit] = []

    def add(new: ScriptLines, unit: str, description: str) -> None:
        text = new.text()
        if text != s.text() and all(e.text != text for e in out):
            out.append(Edit(text, unit, description))

    _translations(s, add)
    _missing_libraries(s, add)
    _swaps(task, s, add)
    _intros_subst(task, s, add)
    _splits(task, s, add)
    _hints(task, s, add)
    return out[:MAX_EDITS]


def _translations(s: ScriptLines, add: Add) -> None:
    for i, line in enumerate(s.body):
        proc = procedure_of(line)
        if proc in LEAN_TO_COQ:
            new = s.copy()
            coq = LEAN_TO_COQ[proc]
            new.body[i] = with_body(line, coq)
            new.ensure_library(coq)
            add(new, line, f"Coq has no `{proc}`: use `{coq}`")
        for lean, coq in _COQ_LEMMA.items():
            if lean in line.split(" ") or f"({lean}" in line or f"{lean}." in line:
                new = s.copy()
                new.body[i] = line.replace(lean, coq)
                add(new, line, f"`{lean}` is Lean's name: Coq's is `{coq}`")


def _missing_libraries(s: ScriptLines, add: Add) -> None:
    for i in s.finishing():
        proc = procedure_of(s.body[i])
        new = s.copy()
        new.ensure_library(proc)
        add(new, new.header[-1] if new.header else "", f"load the library `{proc}` needs")


def _swaps(task: Task, s: ScriptLines, add: Add) -> None:
    options = PROCEDURES_BY_DOMAIN.get(_domain(task), PROCEDURES_BY_DOMAIN["nat"])
    for i in reversed(s.finishing()):
        proc = procedure_of(s.body[i])
        for alt in options:
            if alt == proc:
                continue
            new = s.copy()
            new.body[i] = with_body(s.body[i], alt)
            new.ensure_library(alt)
            add(new, s.body[i], f"decision procedure `{proc}` → `{alt}`")


def _intros_subst(task: Task, s: ScriptLines, add: Add) -> None:
    heads = [parts(line)[1].split(" ")[0] for line in s.body]
    if "intros" not in heads and "intro" not in heads:
        if task.features.get("has_binders", True):
            new = s.copy()
            new.body.insert(0, "intros.")
            add(new, "intros.", "introduce the variables and hypotheses first")
    else:
        new = s.copy()
        del new.body[heads.index("intros") if "intros" in heads else heads.index("intro")]
        add(new, "intros.", "drop `intros`")
    if "subst" not in heads:
        if task.features.get("n_hypotheses", 0):
            new = s.copy()
            at = heads.index("intros") + 1 if "intros" in heads else 0
            new.body.insert(at, "subst.")
            add(new, "subst.", "substitute the hypotheses' equations before the procedure")
    else:
        new = s.copy()
        del new.body[heads.index("subst")]
        add(new, "subst.", "drop `subst`")


def _before_last(s: ScriptLines, line: str, selector_all: bool) -> ScriptLines | None:
    fin = s.finishing()
    if not fin:
        return None
    new = s.copy()
    i = fin[-1]
    if selector_all:
        new.body[i] = with_selector(new.body[i], "all")
    new.body.insert(i, line)
    return new


def _splits(task: Task, s: ScriptLines, add: Add) -> None:
    present = {normal(x) for x in s.body}
    f = task.features
    for wanted, flag, desc in (
        ("split_Rabs.", f.get("has_abs") and _domain(task) == "R", "split the absolute values into cases"),
        ("repeat split.", f.get("goal_kind") in ("conj", "iff"), "split the goal's conjunction"),
        ("field_simplify.", f.get("has_division"), "clear the denominators first"),
    ):
        if flag and wanted not in present:
            new = _before_last(s, wanted, selector_all=wanted != "field_simplify.")
            if new is not None:
                add(new, wanted, desc)


def _hints(task: Task, s: ScriptLines, add: Add) -> None:
    f = task.features
    if _domain(task) != "R" or not f.get("nonlinear"):
        return
    for v in list(f.get("variables", []))[:2]:
        hint = f"pose proof (pow2_ge_0 {v})."
        if hint not in s.body:
            new = _before_last(s, hint, selector_all=False)
            if new is not None:
                add(new, hint, f"give `nra` the square of `{v}` as a hint")
