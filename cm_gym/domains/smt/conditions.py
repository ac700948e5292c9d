"""SMT condition predicates and the rule-based DISTIL_RECORD.

Predicates read only public task features and the prompt, so a correction can be kept from a
look-alike: an ``Int → Real`` fix made on real-valued amounts is not shown on a whole-number task,
adding ``distinct`` is not carried to meetings that may share an hour, a logic fix for QF_BV is not
applied to QF_LIA, and a ``>`` → ``>=`` fix is tied to the inclusive wording it was made for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cm_gym.core.types import Task
from cm_gym.domains.base import Distillation, PredicateFn, described
from cm_gym.domains.smt.edits import config_values, contrast_parts, is_config

INCLUSIVE = ("at least", "no less than", "at most", "no more than", "no later than")
STRICT = ("more than", "exceeds", "less than", "below", "before")


def _num(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _truth(args: tuple[str, ...]) -> bool:
    return (args[0] if args else "true").strip().lower() in ("true", "yes", "1")


def _flag(key: str) -> PredicateFn:
    def pred(task: Task, args: tuple[str, ...]) -> bool:
        value = task.features.get(key)
        return isinstance(value, bool) and value == _truth(args)

    return pred


def _logic_is(task: Task, args: tuple[str, ...]) -> bool:
    return task.features.get("logic") in args


def _family_is(task: Task, args: tuple[str, ...]) -> bool:
    return (task.family or task.features.get("family")) in args


def _kind_is(task: Task, args: tuple[str, ...]) -> bool:
    return task.features.get("kind") in args


def _bit_width_is(task: Task, args: tuple[str, ...]) -> bool:
    return bool(args) and _num(task.features.get("bit_width")) == _num(args[0])


def _asserts_above(task: Task, args: tuple[str, ...]) -> bool:
    have = _num(task.features.get("n_asserts", task.features.get("n_constraints")))
    return have is not None and bool(args) and _num(args[0]) is not None and have > float(args[0])


def _rlimit_at_least(task: Task, args: tuple[str, ...]) -> bool:
    have, need = _num(task.features.get("max_rlimit")), _num(args[0]) if args else None
    return have is not None and need is not None and have >= need


PREDICATES: dict[str, PredicateFn] = {
    "smt_kind_is": described(_kind_is, '("encoding"|"solver") - the SMT task kind'),
    "smt_family_is": described(_family_is, "(family, ...) - generated problem family or SMT-LIB logic"),
    "smt_logic_is": described(_logic_is, "(logic, ...) - the SMT-LIB logic, e.g. QF_BV"),
    "smt_has_nonlinear": described(_flag("has_nonlinear"), "(true|false) - the formula has non-linear terms"),
    "smt_uses_bitvectors": described(_flag("uses_bitvectors"), "(true|false) - the problem uses bit-vectors"),
    "smt_whole_numbers": described(
        _flag("whole_numbers"), "(true|false) - some quantities are whole numbers"
    ),
    "smt_real_numbers": described(_flag("real_numbers"), "(true|false) - some quantities are real-valued"),
    "smt_has_distinct": described(_flag("has_distinct"), "(true|false) - values must be pairwise different"),
    "smt_signed_compare": described(_flag("signed_compare"), "(true|false) - a signed bit-vector comparison"),
    "smt_bit_width_is": described(_bit_width_is, "(w) - registers are w bits wide"),
    "smt_asserts_above": described(_asserts_above, "(n) - more than n assertions / constraints"),
    "smt_rlimit_at_least": described(_rlimit_at_least, "(n) - the rlimit allowance is at least n"),
}


def _q(v: Any) -> str:
    return json.dumps(str(v))


def _b(v: Any) -> str:
    return "true" if bool(v) else "false"


def _wording(task: Task, parts: list[str]) -> list[str]:
    """A ``mentions_any`` for a strictness fix: the prompt's phrases of the kind the fix moves to."""
    text = task.prompt.lower()
    moves_to_inclusive = any(
        p.startswith("cmp") and p.split("-> ")[-1] in (">=", "<=", "bvuge", "bvule", "bvsge", "bvsle")
        for p in parts
    )
    moves_to_strict = any(
        p.startswith("cmp") and p.split("-> ")[-1] in (">", "<", "bvugt", "bvult", "bvsgt", "bvslt")
        for p in parts
    )
    phrases = [
        p for p in (INCLUSIVE if moves_to_inclusive else STRICT if moves_to_strict else ()) if p in text
    ]
    return [f"mentions_any({', '.join(_q(p) for p in phrases)})"] if phrases else []


def discriminators(task: Task) -> list[str]:
    """Family-specific predicates separating `task` from its look-alikes."""
    f = task.features
    fam = task.family or str(f.get("family", ""))
    if fam == "integrality":
        return [f"smt_whole_numbers({_b(f.get('whole_numbers'))})"]
    if fam in ("meetings", "digits"):
        return [f"smt_has_distinct({_b(f.get('has_distinct'))})"]
    if fam == "bitvector":
        return [
            f"smt_bit_width_is({f.get('bit_width', 0)})",
            f"smt_signed_compare({_b(f.get('signed_compare'))})",
        ]
    return []


def distil(task: Task, a_minus: str, a_plus: str) -> Distillation:
    """Situation q and a condition that is false on look-alikes (never reads the reference)."""
    kind = str(task.features.get("kind", "encoding"))
    fam = task.family or str(task.features.get("family", ""))
    parts = contrast_parts(a_minus, a_plus)
    change = "; ".join(parts) or "no change"
    preds = [f"smt_kind_is({_q(kind)})"]
    if kind == "solver":
        preds.append(f"smt_logic_is({_q(task.features.get('logic', fam))})")
        preds.append(f"smt_has_nonlinear({_b(task.features.get('has_nonlinear'))})")
        if is_config(a_plus):
            raw = config_values(a_plus).get("rlimit", "").replace("_", "")
            if raw.isdigit():
                preds.append(f"smt_rlimit_at_least({int(raw)})")
        situation = f"z3 configuration for a {task.features.get('logic', fam)} benchmark: {change}"
    else:
        preds.append(f"smt_family_is({_q(fam)})")
        preds.extend(discriminators(task))
        preds.extend(_wording(task, parts))
        situation = f"SMT-LIB encoding of a {fam} problem: {change}"
    return Distillation(situation, " AND ".join(preds))


def condition_predicates() -> Mapping[str, PredicateFn]:
    """The SMT domain's predicate kinds."""
    return dict(PREDICATES)
