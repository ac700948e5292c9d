"""Reference-free features of a theorem statement, read by condition predicates and by the
simulated LLM's error model: the domain of quantification, linearity, division, powers, absolute
values, roots, modular arithmetic, the shape of the goal.

They are read from the statement's tokens, not by elaborating it, so they are heuristics with
documented rules: `domain` is the most frequent binder type among R / Z / nat / Q / C (ties and
binder-free statements fall back to the scope the file opens, then to R if real-number functions
occur, then Z, then nat); `nonlinear` means a product whose two sides both mention a variable or a
function application (``x * y``, ``(a + 1) * (a - 1)``, ``f x * 2`` is linear only when one side is
a numeral), or a power / root with a variable operand; the goal is the part after the last
top-level ``->`` with leading ``forall …,`` binders stripped.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from cm_gym.domains.math.coqlex import words
from cm_gym.domains.math.statement import Statement

NUMBER_TYPES = ("R", "Z", "nat", "Q", "C")
_SCOPE_TYPE = {"R_scope": "R", "Z_scope": "Z", "nat_scope": "nat", "Q_scope": "Q", "C_scope": "C"}
_REAL_FUNCS = {"Rabs", "sqrt", "Rsqrt", "Rpower", "ln", "exp", "sin", "cos", "tan", "PI", "INR", "IZR",
               "Rmax", "Rmin", "pow", "R_dist", "sum_f_R0", "Rinv", "Rdiv"}  # fmt: skip
_ABS = {"Rabs", "Z.abs", "Zabs", "Qabs", "abs", "Z.abs_nat", "Cmod"}
_SQRT = {"sqrt", "Rsqrt", "Z.sqrt", "Nat.sqrt", "R_sqrt.sqrt"}
_MOD = {"mod", "modulo", "Nat.modulo", "Z.modulo", "Zmod", "rem", "Z.rem", "Nat.mod", "Z.mod", "Zdivide",
        "Z.divide", "Nat.divide", "divide", "Z.gcd", "Nat.gcd", "gcd", "lcm", "Z.lcm", "Nat.lcm", "prime", "Znumtheory.prime"}  # fmt: skip
_DIV = {"/", "Rdiv", "Z.div", "Nat.div", "div", "Qdiv", "Rinv", "Z.quot"}
_POW = {"^", "pow", "Z.pow", "Nat.pow", "Rpower", "powerRZ", "Qpower"}
_TRANSCENDENTAL = {"sin", "cos", "tan", "exp", "ln", "Rpower", "PI", "atan", "asin", "acos", "Rlog"}
_SUMS = {"sum_f_R0", "fold_left", "fold_right", "sum_n", "sum_f", "seq", "map", "list_sum", "Rsum"}
_RELATIONS = ("<->", "<>", "<=", ">=", "<", ">", "=")
_BINDER = re.compile(r"\(\s*([A-Za-z_][\w' ]*?)\s*:\s*([^()]+?)\s*\)")
_FORALL = re.compile(r"\b(?:forall|exists)\s+((?:[A-Za-z_][\w']*\s*)+):\s*([^,()]+?)\s*,")


def _body(theorem: str) -> str:
    """The statement's type: after ``Theorem name [binders] :`` (the first top-level colon)."""
    depth = 0
    for i, ch in enumerate(theorem):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ":" and depth == 0 and theorem[i + 1 : i + 2] != "=":
            return theorem[i + 1 :].strip().removesuffix(".")
    return theorem


def _binders(theorem: str) -> list[tuple[str, str]]:
    """(variable, type) of binders ``(x y : T)`` and ``forall x y : T,``; a function type keeps
    its arrow (``nat -> Z``), so its codomain is the last word."""
    out: list[tuple[str, str]] = []
    for rx in (_BINDER, _FORALL):
        for m in rx.finditer(theorem):
            out.extend((v, " ".join(m.group(2).split())) for v in m.group(1).split())
    return out


def _codomain(type_text: str) -> str:
    return type_text.rsplit("->", 1)[-1].strip()


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def goal_of(body: str) -> str:
    """The conclusion: after the last top-level ``->``, without leading ``forall …,`` binders."""
    goal = _split_top(body, "->")[-1].strip()
    while goal.startswith("forall"):
        rest = _split_top(goal, ",")
        goal = ",".join(rest[1:]).strip() if len(rest) > 1 else goal
        if len(rest) <= 1:
            break
    return goal


def goal_kind(goal: str) -> str:
    """exists / conj / disj / iff / neq / ineq / eq / other, from the goal's top-level shape."""
    g = goal.strip()
    while (
        g.startswith("(") and g.endswith(")") and len(_split_top(g[1:-1], "\x00")) == 1 and _balanced(g[1:-1])
    ):
        g = g[1:-1].strip()
    if g.startswith("exists"):
        return "exists"
    for sep, kind in (("<->", "iff"), ("\\/", "disj"), ("/\\", "conj")):
        if len(_split_top(g, sep)) > 1:
            return kind
    for rel, kind in (
        ("<>", "neq"),
        ("<=", "ineq"),
        (">=", "ineq"),
        ("<", "ineq"),
        (">", "ineq"),
        ("=", "eq"),
    ):
        if len(_split_top(g.replace("->", "  ").replace("<->", "   "), rel)) > 1:
            return kind
    return "other"


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


_CONSTANTS = {"R0", "R1", "PI", "R", "Z", "nat", "Q", "C", "Ci", "true", "false", "IZR", "INR", "IQR"}


def _operand(toks: list[str], i: int, step: int) -> list[str]:
    """The operand next to an operator at `i` (a token, or a whole parenthesised group)."""
    if not 0 <= i < len(toks):
        return []
    close, opening = (")", "(") if step < 0 else ("(", ")")
    if toks[i] != close:
        return [toks[i]]
    group, depth, j = [], 0, i
    while 0 <= j < len(toks):
        depth += (toks[j] == close) - (toks[j] == opening)
        group.append(toks[j])
        if depth == 0:
            break
        j += step
    return group


def _mentions_variable(operand: list[str]) -> bool:
    return any(t[:1].isalpha() or t[:1] == "_" for t in operand if t not in _CONSTANTS)


def _nonlinear(toks: list[str]) -> bool:
    """A product of two operands that both mention a variable, or a power / root / transcendental
    function of a variable (see module doc)."""
    for i, t in enumerate(toks):
        left, right = _operand(toks, i - 1, -1), _operand(toks, i + 1, 1)
        if t == "*" and _mentions_variable(left) and _mentions_variable(right):
            return True
        if t == "^" and (_mentions_variable(left) or _mentions_variable(right)):
            return True
        if t in (
            "pow",
            "Z.pow",
            "Nat.pow",
            "sqrt",
            "Rsqrt",
            "Rpower",
            "exp",
            "ln",
            "sin",
            "cos",
        ) and _mentions_variable(right):
            return True
    return False


def statement_features(statement: Statement, file_stem: str = "") -> dict[str, Any]:
    """JSON-serialisable features of `statement` (see module doc)."""
    body = _body(statement.theorem)
    toks = [t for t in words(body.replace("%", " %")) if t]
    toks = _merge_ops(toks)
    ids = set(toks)
    binders = _binders(statement.theorem)
    types = Counter(_codomain(t) for _, t in binders if _codomain(t) in NUMBER_TYPES)
    scopes = [_SCOPE_TYPE[s] for s in statement.opened_scopes if s in _SCOPE_TYPE]
    present = sorted({t for t in NUMBER_TYPES if t in ids or f"%{t}" in ids} | set(types) | set(scopes))
    if types:
        best = max(types.values())
        tied = [t for t in NUMBER_TYPES if types.get(t) == best]
        domain = tied[0] if len(tied) == 1 else (scopes[-1] if scopes and scopes[-1] in tied else tied[0])
    elif scopes:
        domain = scopes[-1]
    elif ids & _REAL_FUNCS:
        domain = "R"
    elif "Z" in present:
        domain = "Z"
    else:
        domain = "nat"
    goal = goal_of(body)
    numeric = [v for v, t in binders if t in NUMBER_TYPES]
    hyps = (
        len(_split_top(body, "->"))
        - 1
        + sum(1 for _, t in binders if t not in NUMBER_TYPES and t[0].isupper())
    )
    return {
        "file": file_stem,
        "domain": domain,
        "types": present,
        "n_variables": len(numeric),
        "variables": numeric[:8],
        "has_binders": bool(binders) or body.lstrip().startswith("forall"),
        "n_hypotheses": max(0, hyps),
        "nonlinear": _nonlinear(toks),
        "has_division": bool(ids & _DIV),
        "has_power": bool(ids & _POW),
        "has_abs": bool(ids & _ABS),
        "has_sqrt": bool(ids & _SQRT),
        "has_mod": bool(ids & _MOD),
        "has_exists": "exists" in ids,
        "has_transcendental": bool(ids & _TRANSCENDENTAL),
        "has_sum": bool(ids & _SUMS),
        "has_functions": any("->" in t for _, t in binders),
        "has_definitions": bool(statement.definitions),
        "closed_numeric": not binders and not body.lstrip().startswith(("forall", "exists")),
        "goal_kind": goal_kind(goal),
        "var_equations": bool(re.search(r"(?:^|->|\()\s*[A-Za-z_]\w*\s*=\s*[^=]", body)),
    }


def _merge_ops(toks: list[str]) -> list[str]:
    """Join two-character operators the word splitter keeps apart (``/\\``, ``<=``, ``->`` …)."""
    out: list[str] = []
    pairs = {"/\\", "\\/", "<=", ">=", "<>", "->", "=>"}
    for t in toks:
        if out and out[-1] + t in pairs:
            out[-1] = out[-1] + t
        elif out and out[-1] == "<-" and t == ">":
            out[-1] = "<->"
        else:
            out.append(t)
    return out


def family_of(stem: str) -> str:
    """The miniF2F source family of a file stem: mathd_algebra, mathd_numbertheory, amc, aime,
    imo, induction, algebra, numbertheory."""
    for fam in ("mathd_algebra", "mathd_numbertheory", "induction", "numbertheory", "algebra"):
        if stem.startswith(fam):
            return fam
    for fam in ("amc", "aime", "imo"):
        if stem.startswith(fam):
            return fam
    return "other"
