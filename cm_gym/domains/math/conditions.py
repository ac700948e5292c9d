"""Math condition predicates, rule-based distillation, contrast keys and record transfer.

Predicates read only the statement's features (`features` module), never the reference:

| kind | true when |
|---|---|
| ``math_domain_is(d, …)`` | the statement quantifies over one of the types (R, Z, nat, Q, C) |
| ``math_nonlinear(true|false)`` | the statement multiplies variables / raises them to powers |
| ``math_has(f, …)`` | it has every listed feature: division, power, abs, sqrt, mod, exists, transcendental, sum, functions, definitions, binders, var_equations, hypotheses |
| ``math_lacks(f, …)`` | it has none of them |
| ``math_goal_kind_is(k, …)`` | the goal is eq / ineq / neq / conj / disj / iff / exists / other |

A distilled condition names what made the change right: the domain and linearity for a swapped
decision procedure ("``nra``, not ``lia``, when the goal is non-linear over R"), binders for an
added ``intros``, absolute values for ``split_Rabs`` … so it is false on look-alikes.
Records transfer line by line (`apply_contrast`): a replaced line is replaced where the draft runs
the same tactic (selector and bullets kept), an added line goes after the line it followed in a⁺
(or, for headers, into the header; for ``intros`` first; else before the last procedure), a removed
line is removed.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping

from cm_gym.core.types import Task
from cm_gym.domains.base import Distillation, PredicateFn, described
from cm_gym.domains.math.lines import ScriptLines, normal, parts, procedure_of, split_lines, with_body

FLAGS = {"division": "has_division", "power": "has_power", "abs": "has_abs", "sqrt": "has_sqrt", "mod": "has_mod",
         "exists": "has_exists", "transcendental": "has_transcendental", "sum": "has_sum",
         "functions": "has_functions", "definitions": "has_definitions", "binders": "has_binders",
         "var_equations": "var_equations", "hypotheses": "n_hypotheses"}  # fmt: skip


def _math(task: Task) -> Mapping[str, object]:
    return task.features if task.domain == "math" else {}


def _has(task: Task, name: str) -> bool:
    key = FLAGS.get(name.strip().lower())
    return bool(key) and bool(_math(task).get(key))  # type: ignore[arg-type]


def _domain_is(task: Task, args: tuple[str, ...]) -> bool:
    return str(_math(task).get("domain", "")) in {a.strip() for a in args}


def _nonlinear(task: Task, args: tuple[str, ...]) -> bool:
    want = (args[0] if args else "true").strip().lower() in ("true", "yes", "1")
    return "nonlinear" in _math(task) and bool(_math(task)["nonlinear"]) == want


def _has_all(task: Task, args: tuple[str, ...]) -> bool:
    return bool(args) and all(_has(task, a) for a in args)


def _lacks_all(task: Task, args: tuple[str, ...]) -> bool:
    return task.domain == "math" and bool(args) and not any(_has(task, a) for a in args)


def _goal_kind_is(task: Task, args: tuple[str, ...]) -> bool:
    return str(_math(task).get("goal_kind", "")) in {a.strip() for a in args}


PREDICATES: Mapping[str, PredicateFn] = {
    "math_domain_is": described(_domain_is, '("R"|"Z"|"nat"|"Q"|"C", ...) - the statement quantifies over this type'),
    "math_nonlinear": described(_nonlinear, "(true|false) - the statement multiplies variables or takes powers of them"),
    "math_has": described(_has_all, f"(feature, ...) - the statement has all of: {', '.join(FLAGS)}"),
    "math_lacks": described(_lacks_all, "(feature, ...) - the statement has none of these features"),
    "math_goal_kind_is": described(_goal_kind_is, "(eq|ineq|neq|conj|disj|iff|exists|other, ...) - the goal's shape"),
}  # fmt: skip


def _q(value: object) -> str:
    return json.dumps(str(value))


def line_changes(a_minus: str, a_plus: str) -> list[tuple[str, list[str], list[str], int]]:
    """(op, removed lines, added lines, index in a⁺'s lines) for every changed block."""
    m, p = split_lines(a_minus), split_lines(a_plus)
    ml, pl = m.header + m.body, p.header + p.body
    out = []
    matcher = difflib.SequenceMatcher(a=[normal(x) for x in ml], b=[normal(x) for x in pl], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "equal":
            out.append((op, ml[i1:i2], pl[j1:j2], j1))
    return out


def contrast_key(a_minus: str, a_plus: str) -> str:
    """``lia. -> nra.``, ``+intros.``, ``-subst.`` joined by "; " (line level)."""
    parts_: list[str] = []
    for op, removed, added, _ in line_changes(a_minus, a_plus):
        if op == "replace" and len(removed) == len(added):
            parts_.extend(f"{normal(r)} -> {normal(a)}" for r, a in zip(removed, added, strict=True))
        else:
            parts_.extend([f"-{normal(r)}" for r in removed] + [f"+{normal(a)}" for a in added])
    return "; ".join(parts_) or "no change"


def _situation_of(task: Task) -> tuple[str, str]:
    f = _math(task)
    dom = str(f.get("domain", "nat"))
    shape = "non-linear" if f.get("nonlinear") else "linear"
    extras = [n for n in ("division", "abs", "power", "sqrt", "mod") if _has(task, n)]
    return dom, f"a {shape} {f.get('goal_kind', '')} goal over {dom}" + (
        f" with {', '.join(extras)}" if extras else ""
    )


def distil_script(task: Task, a_minus: str, a_plus: str) -> Distillation:
    """Situation q and a condition c for a verified script change on `task` (module doc)."""
    dom, where = _situation_of(task)
    changes = line_changes(a_minus, a_plus)
    added = [normal(a) for _, _, add, _ in changes for a in add]
    removed = [normal(r) for _, rem, _, _ in changes for r in rem]
    procs_added = [procedure_of(x) for x in added if procedure_of(x)]
    preds = [f"math_domain_is({_q(dom)})"]
    if procs_added and any(procedure_of(x) for x in removed):
        preds.append(f"math_nonlinear({'true' if _math(task).get('nonlinear') else 'false'})")
        if procs_added[0] == "field" and _has(task, "division"):
            preds.append('math_has("division")')
    for line, feature in (("intros.", "binders"), ("subst.", "var_equations"), ("split_Rabs.", "abs"),
                          ("field_simplify.", "division")):  # fmt: skip
        if any(line in x for x in added) and _has(task, feature):
            preds.append(f"math_has({_q(feature)})")
    if any("repeat split." in x for x in added):
        preds.append(f"math_goal_kind_is({_q(_math(task).get('goal_kind', 'conj'))})")
    if any("pow2_ge_0" in x for x in added):
        preds.append("math_nonlinear(true)")
    change = contrast_key(a_minus, a_plus)
    situation = f"Proving {where} in Coq: `{change}` made the proof go through."
    return Distillation(situation, " AND ".join(dict.fromkeys(preds)))


def transfer(draft: str, a_minus: str, a_plus: str) -> str | None:
    """The record's line changes moved onto `draft` (module doc); None when nothing applies."""
    d = split_lines(draft)
    before = d.text()
    plus = split_lines(a_plus)
    plus_lines = plus.header + plus.body
    for op, removed, added, j in line_changes(a_minus, a_plus):
        if op == "replace" and len(removed) == len(added):
            for r, a in zip(removed, added, strict=True):
                _replace(d, r, a)
        elif op == "delete" or (op == "replace"):
            for r in removed:
                _remove(d, r)
            for k, a in enumerate(added):
                _insert(d, a, plus_lines[j + k - 1] if j + k > 0 else "")
        else:
            for k, a in enumerate(added):
                _insert(d, a, plus_lines[j + k - 1] if j + k > 0 else "")
    after = d.text()
    return after if after != before else None


def _same_tactic(x: str, y: str) -> bool:
    return parts(x)[1] == parts(y)[1] and bool(parts(x)[1])


def _replace(d: ScriptLines, removed: str, added: str) -> None:
    if removed.startswith(("Require", "From", "Import", "Open")):
        if removed in d.header:
            d.header[d.header.index(removed)] = added
        elif added not in d.header:
            d.header.append(added)
        return
    for i, line in enumerate(d.body):
        if _same_tactic(line, removed):
            d.body[i] = with_body(line, parts(added)[1])
            if procedure_of(added):
                d.ensure_library(procedure_of(added))
            return


def _remove(d: ScriptLines, removed: str) -> None:
    if removed in d.header:
        d.header.remove(removed)
        return
    for i, line in enumerate(d.body):
        if _same_tactic(line, removed):
            del d.body[i]
            return


def _insert(d: ScriptLines, added: str, anchor: str) -> None:
    if added.startswith(("Require", "From", "Import", "Open")):
        if added not in d.header:
            d.header.append(added)
        return
    if any(_same_tactic(line, added) for line in d.body):
        return
    for i, line in enumerate(d.body):
        if anchor and _same_tactic(line, anchor):
            d.body.insert(i + 1, added)
            return
    if parts(added)[1] == "intros":
        d.body.insert(0, added)
        return
    fin = d.finishing()
    d.body.insert(fin[-1] if fin else len(d.body), added)
