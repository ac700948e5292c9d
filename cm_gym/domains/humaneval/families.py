"""Bug families of HumanEvalFix's taxonomy as single AST-located edits, and the features they
are tied to.

A *family* groups the mutation kinds of `cm_gym.domains.code.edits` plus three more defined
here (``swap_function``: min↔max, lower↔upper, any↔all …; ``toggle_reverse``: a sort's order;
``change_value``: an integer constant ±1; ``drop_condition``: one operand of an ``and``/``or``
removed) under HumanEvalFix's class names: operator, boundary (inclusive/exclusive comparison),
off_by_one (range/slice/index bounds), variable, value, function_misuse, missing_logic. Every
family except missing_logic is its own inverse (the edit that injects it also repairs it), so a
verified repair is a local edit and can become a record. Excess logic (HumanEvalFix's seventh
class) has no edit here: its faithful injection needs a plausible extra clause we cannot write
generically. Features read the docstring and the code's shape only (reference-free).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from cm_gym.domains.code.edits import (
    OP_TEXT,
    Mutation,
    _int_value,
    _Offsets,
    enumerate_mutations,
    mutations_between,
    parse,
)
from cm_gym.domains.code.program import boundary_of

FUNCTION_PAIRS = {
    "min": "max", "max": "min", "any": "all", "all": "any", "lower": "upper", "upper": "lower",
    "isupper": "islower", "islower": "isupper", "startswith": "endswith", "endswith": "startswith",
    "floor": "ceil", "ceil": "floor", "find": "rfind", "rfind": "find", "isdigit": "isalpha",
    "isalpha": "isdigit", "lstrip": "rstrip", "rstrip": "lstrip",
}  # fmt: skip
BOUNDARY_OPS = {"<", "<=", ">", ">="}
FAMILIES = ("boundary", "off_by_one", "function_misuse", "operator", "value", "variable", "missing_logic")

#: docstring cue words per feature (whole words, any case)
CUES = {
    "order": ("descending", "ascending", "decreasing", "increasing", "reverse", "reversed", "sorted", "sort"),
    "extreme": ("largest", "smallest", "maximum", "minimum", "max", "min", "biggest", "highest", "lowest"),
    "arith": ("sum", "product", "difference", "total", "remainder", "divisible", "even", "odd", "multiply"),
    "case": ("uppercase", "lowercase", "upper", "lower", "capital", "case"),
}


def kind_family(m: Mutation) -> str:
    """The HumanEvalFix class of a mutation (injected bug or its repair)."""
    k = m.kind
    if k == "flip_comparison":
        return "boundary" if m.old.strip() in BOUNDARY_OPS else "operator"
    if k in ("plus_one", "minus_one"):
        return "off_by_one"
    if k in ("change_operator", "reverse_comparison"):
        return "operator"
    if k in ("change_variable", "swap_arguments"):
        return "variable"
    if k in ("change_value", "change_return"):
        return "value"
    if k in ("swap_function", "toggle_reverse"):
        return "function_misuse"
    if k in ("drop_condition", "remove_base_case"):
        return "missing_logic"
    return "other"


def _extra(source: str) -> list[Mutation]:
    tree = parse(source)
    if tree is None:
        return []
    off = _Offsets(source)
    out: list[tuple[str, int, int, str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name_node: ast.AST = node.func
            if isinstance(name_node, ast.Name) and name_node.id in FUNCTION_PAIRS:
                a, b = off.span(name_node)
                out.append(("swap_function", a, b, FUNCTION_PAIRS[name_node.id], node.lineno))
            elif isinstance(name_node, ast.Attribute) and name_node.attr in FUNCTION_PAIRS:
                b = off.span(name_node)[1]
                a = b - len(name_node.attr)
                if source[a:b] == name_node.attr:
                    out.append(("swap_function", a, b, FUNCTION_PAIRS[name_node.attr], node.lineno))
            fname = name_node.id if isinstance(name_node, ast.Name) else getattr(name_node, "attr", "")
            if fname in ("sorted", "sort"):
                rev = [k for k in node.keywords if k.arg == "reverse"]
                if rev and isinstance(rev[0].value, ast.Constant) and isinstance(rev[0].value.value, bool):
                    a, b = off.span(rev[0].value)
                    out.append(("toggle_reverse", a, b, str(not rev[0].value.value), node.lineno))
                elif not rev and (node.args or fname == "sort"):
                    end = off.span(node)[1] - 1  # the closing parenthesis
                    sep = ", " if node.args or node.keywords else ""
                    out.append(("toggle_reverse", end, end, f"{sep}reverse=True", node.lineno))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            value = _int_value(node.value)
            if value is not None:
                a, b = off.span(node.value)
                for kind_delta in (1, -1):
                    out.append(("change_value", a, b, str(value + kind_delta), node.lineno))
        elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
            (a0, b0), (a1, b1) = off.span(node.values[0]), off.span(node.values[1])
            out.append(("drop_condition", a0, b1, source[a0:b0], node.lineno))
            out.append(("drop_condition", a0, b1, source[a1:b1], node.lineno))
    found = []
    for kind, a, b, new, line in out:
        m = Mutation(kind, a, b, source[a:b], new, line)
        if source[a:b] != new and parse(m.apply(source)) is not None:
            found.append(m)
    return found


def all_mutations(source: str) -> list[Mutation]:
    """Every single edit of `source`: the code domain's kinds plus this module's."""
    return enumerate_mutations(source) + _extra(source)


def between(a_minus: str, a_plus: str) -> Mutation | None:
    """The single known edit (any kind of `all_mutations`) turning `a_minus` into `a_plus`."""
    m = mutations_between(a_minus, a_plus)
    if m is not None:
        return m
    for cand in _extra(a_minus):
        if cand.apply(a_minus) == a_plus:
            return cand
    return None


def _mentions(text: str, words: tuple[str, ...]) -> bool:
    low = text.lower()
    return any(re.search(rf"\b{re.escape(w)}\b", low) for w in words)


def docstring_of(prompt: str, function: str) -> str:
    """The entry point's docstring in a HumanEval prompt ("" when none)."""
    tree = parse(prompt + "    pass\n")
    if tree is None:
        return ""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return ast.get_docstring(node) or ""
    return ""


def shape_features(program: str, function: str, docstring: str) -> dict[str, Any]:
    """Docstring wording and code shape of the entry point (never the reference)."""
    tree = parse(program)
    feats: dict[str, Any] = {
        "range_loop": False,
        "slicing": False,
        "accumulator": False,
        "sorts": False,
        "extreme_calls": False,
        "string_case_calls": False,
        "bool_ops": False,
        "boundary": boundary_of(docstring),
        "call_names": [],
        "ops": [],
        "names": [],
    }
    for cue, words in CUES.items():
        feats[f"mentions_{cue}"] = _mentions(docstring, words)
    if tree is None:
        return feats
    target = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function), tree)
    calls, ops, names = set(), set(), set()
    for node in ast.walk(target):
        if isinstance(node, ast.Name):
            names.add(node.id)
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in OP_TEXT:
            ops.add(OP_TEXT[type(node.op)])
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            calls.add(name)
            feats["range_loop"] |= name == "range"
            feats["sorts"] |= name in ("sorted", "sort")
            feats["extreme_calls"] |= name in ("min", "max")
            feats["string_case_calls"] |= name in ("lower", "upper", "isupper", "islower")
        feats["slicing"] |= isinstance(node, ast.Slice)
        feats["accumulator"] |= isinstance(node, ast.AugAssign)
        feats["bool_ops"] |= isinstance(node, ast.BoolOp)
    feats.update(call_names=sorted(calls), ops=sorted(ops), names=sorted(names))
    return feats


def body_span(source: str, function: str) -> tuple[int, int]:
    """[start, end) character offsets of `function`'s body after its docstring ((0, 0) if absent)."""
    tree = parse(source)
    if tree is None:
        return 0, 0
    off = _Offsets(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            body = node.body
            if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]
            return off.span(body[0])[0], off.span(node)[1]
    return 0, 0
