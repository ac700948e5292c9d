"""Static facts about a Python program, read from the *buggy* program a task shows (never from
the reference): function signature, loops, recursion, comparisons, boundary wording."""

from __future__ import annotations

import ast
import re
from typing import Any

from cm_gym.domains.code.edits import CMP_TEXT, parse

#: phrases that mark a strict / an inclusive boundary in a task description
STRICT_PHRASES = (
    "strictly",
    "less than",
    "greater than",
    "below",
    "above",
    "exclusive",
    "not including",
    "half-open",
)
INCLUSIVE_PHRASES = (
    "at most",
    "at least",
    "or equal",
    "inclusive",
    "through",
    "no more than",
    "no less than",
    "or more",
)


def boundary_of(text: str) -> str:
    """ "inclusive", "strict", "mixed" or "" from the wording of a description."""
    low = re.sub(r"\b(less|greater|more|fewer) than or equal\b", "or equal", text.lower())
    inc = any(re.search(rf"\b{re.escape(p)}\b", low) for p in INCLUSIVE_PHRASES)
    strict = any(re.search(rf"\b{re.escape(p)}\b", low) for p in STRICT_PHRASES)
    if inc and strict:
        return "mixed"
    return "inclusive" if inc else "strict" if strict else ""


def program_features(source: str, function: str) -> dict[str, Any]:
    """JSON-serialisable features of `source` centred on `function` (the function under test)."""
    tree = parse(source)
    feats: dict[str, Any] = {
        "function": function,
        "params": [],
        "arity": 0,
        "has_loop": False,
        "has_while": False,
        "has_recursion": False,
        "comparisons": [],
        "calls": [],
        "n_lines": len([ln for ln in source.splitlines() if ln.strip()]),
    }
    if tree is None:
        return feats
    funcs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    target = funcs.get(function)
    if target is not None:
        feats["params"] = [a.arg for a in target.args.args]
        feats["arity"] = len(target.args.args)
    comparisons: set[str] = set()
    calls: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.While, ast.comprehension)):
            feats["has_loop"] = True
        if isinstance(node, ast.While):
            feats["has_while"] = True
        if isinstance(node, ast.Compare):
            comparisons.update(CMP_TEXT[type(op)] for op in node.ops if type(op) in CMP_TEXT)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            calls.add(node.func.id)
    for name, fn in funcs.items():
        if any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
            for n in ast.walk(fn)
        ):
            feats["has_recursion"] = True
    feats["comparisons"] = sorted(comparisons)
    feats["calls"] = sorted(calls)
    return feats


def defined_functions(source: str) -> list[str]:
    """Names of the functions `source` defines (empty when it does not parse)."""
    tree = parse(source)
    if tree is None:
        return []
    return [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
