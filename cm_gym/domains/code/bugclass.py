"""Bug-class labels for code-repair tasks, read from the fix (buggy → fixed program).

The class is benchmark metadata (like a family): the generated benchmark knows it from how the
bug was seeded; for QuixBugs it is read here, at load time, from upstream's fix — the single
known edit that repairs the bug, else a token-diff heuristic.
"""

from __future__ import annotations

import ast

from cm_gym.domains.base import token_diff
from cm_gym.domains.code.edits import KIND_TO_BUG_CLASS, mutations_between, parse


def strip_docstrings(source: str) -> str:
    """`source` without module-level string statements (QuixBugs keeps descriptions and
    alternative fixes there), layout of the rest unchanged."""
    tree = parse(source)
    if tree is None:
        return source
    lines = source.splitlines(keepends=True)
    drop: set[int] = set()
    for node in tree.body:
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            drop.update(range(node.lineno - 1, node.end_lineno or node.lineno))
    return "".join(line for i, line in enumerate(lines) if i not in drop).rstrip() + "\n"


#: a repair's kind → the bug class it fixes: the mutation table without its base-case kinds (a
#: repair that adds or removes a base case is labelled "other")
_REPAIR_TO_BUG = {k: v for k, v in KIND_TO_BUG_CLASS.items() if not k.endswith("_base_case")}
_CMP_TOKENS = {"<", "<=", ">", ">=", "==", "!=", "in", "not in"}
_ARITH_TOKENS = {
    "+",
    "-",
    "*",
    "/",
    "//",
    "%",
    "^",
    "&",
    "|",
    "+=",
    "-=",
    "*=",
    "^=",
    "&=",
    "|=",
    "and",
    "or",
}


def bug_class_of(buggy: str, fixed: str) -> str:
    """Label a defect from its fix: the class of the single known edit that repairs it, else a
    token-diff heuristic (added condition → "missing_condition"), else "other"."""
    buggy, fixed = strip_docstrings(buggy), strip_docstrings(fixed)
    m = mutations_between(buggy, fixed)
    if m is not None:
        return _REPAIR_TO_BUG.get(m.kind, "other")
    m = mutations_between(fixed, buggy)
    if m is not None:
        return KIND_TO_BUG_CLASS.get(m.kind, "other")
    tb, tf = parse(buggy), parse(fixed)
    if tb is None or tf is None:
        return "other"
    diff = token_diff(ast.unparse(tb), ast.unparse(tf))
    removed = [r for r, _ in diff]
    added = [a for _, a in diff]
    if diff and all(r in _CMP_TOKENS and a in _CMP_TOKENS for r, a in diff):
        return "flipped_comparison"
    if diff and all(r == "" and a in ("+ 1", "- 1") or a == "" and r in ("+ 1", "- 1") for r, a in diff):
        return "off_by_one"
    if diff and all(r in _ARITH_TOKENS and a in _ARITH_TOKENS for r, a in diff):
        return "wrong_operator"
    if len(diff) == 1 and removed[0].isidentifier() and added[0].isidentifier():
        return "wrong_variable"
    if sorted(" ".join(removed).split()) == sorted(" ".join(added).split()) and diff:
        return "swapped_arguments"
    if any(w in " ".join(added).split() for w in ("if", "and", "or", "not", "max", "min")):
        return "missing_condition"
    if all(r == "" for r in removed):
        return "missing_code"
    return "other"
