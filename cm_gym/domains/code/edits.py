"""AST-located, text-preserving single edits of a Python program (one decision unit each).

Each `Mutation` replaces one small span of the source (an operator, a bound, an argument order,
a name, a base case) and leaves everything else byte-for-byte as it was, so diffs between an
action and its edit show exactly the one decision unit. Used by the edit operators (Module I),
the simulated LLM's error model, bug-class labelling and `apply_contrast`.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator
from dataclasses import dataclass

#: mutation kind → the bug class it introduces (and, inverted, repairs)
KIND_TO_BUG_CLASS = {
    "flip_comparison": "flipped_comparison",
    "reverse_comparison": "flipped_comparison",
    "plus_one": "off_by_one",
    "minus_one": "off_by_one",
    "swap_arguments": "swapped_arguments",
    "change_variable": "wrong_variable",
    "remove_base_case": "missing_base_case",
    "add_base_case": "other",
    "change_operator": "wrong_operator",
    "change_return": "wrong_return",
}
KIND_ORDER = (
    "flip_comparison",
    "plus_one",
    "minus_one",
    "swap_arguments",
    "change_operator",
    "remove_base_case",
    "add_base_case",
    "change_return",
    "reverse_comparison",
    "change_variable",
)
FLIP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "in": "not in", "not in": "in"}
REVERSE = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
CMP_TEXT = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
}  # fmt: skip
OP_TEXT = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.BitXor: "^", ast.BitAnd: "&", ast.BitOr: "|", ast.LShift: "<<", ast.RShift: ">>", ast.Pow: "**",
}  # fmt: skip
OP_SWAP = {
    "+": ("-", "*"), "-": ("+",), "*": ("+", "/"), "/": ("//", "*"), "//": ("/", "%"), "%": ("//",),
    "^": ("&", "|"), "&": ("^", "|"), "|": ("&", "^"), "<<": (">>",), ">>": ("<<",), "**": ("*",),
}  # fmt: skip
NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
_BUILTINS = set(dir(builtins))


@dataclass(frozen=True)
class Mutation:
    """Replace source[start:end] (`old`) by `new`; `line` is 1-based, for descriptions."""

    kind: str
    start: int
    end: int
    old: str
    new: str
    line: int

    def apply(self, source: str) -> str:
        return source[: self.start] + self.new + source[self.end :]

    @property
    def description(self) -> str:
        old = self.old.strip().splitlines()[0] if self.old.strip() else "∅"
        new = self.new.strip().splitlines()[0] if self.new.strip() else "∅"
        return f"{self.kind} at line {self.line}: {old} -> {new}"


class _Offsets:
    """(lineno, UTF-8 byte column) → character offset."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def at(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        return self.starts[lineno - 1] + len(line.encode()[:col].decode(errors="ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.at(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.at(node.end_lineno or node.lineno, node.end_col_offset or 0)  # type: ignore[attr-defined]
        return start, end


#: deeper syntax trees are refused: the parser, `ast.dump`, `ast.unparse` and visitors recurse
MAX_AST_DEPTH = 200


def parse_or_reason(source: str) -> tuple[ast.Module | None, str]:
    """The module AST of untrusted `source`, or None and why not. Never raises: a program too
    deeply nested for the parser (a 5 KB tower of unary operators) or for the recursive AST tools
    used on it later is refused here, as a syntax error is."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return None, f"line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        return (
            None,
            f"{type(exc).__name__}: {str(exc)[:100] or 'the program is too large or too deeply nested'}",
        )
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_AST_DEPTH:
            return None, f"the program nests more than {MAX_AST_DEPTH} levels deep"
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree, ""


def parse(source: str) -> ast.Module | None:
    """The module AST, or None if `source` is not valid Python (or nests too deeply)."""
    return parse_or_reason(source)[0]


def normalise(source: str) -> str:
    """A formatting-insensitive fingerprint of a program (its AST dump), or the stripped text."""
    tree = parse(source)
    if tree is None:
        return source.strip()
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def _op_between(source: str, a: int, b: int, token: str) -> tuple[int, int] | None:
    """Locate operator `token` in source[a:b] (outside parentheses)."""
    seg = source[a:b]
    idx = seg.find(token)
    while idx >= 0:
        before = seg[idx - 1] if idx > 0 else " "
        after = seg[idx + len(token)] if idx + len(token) < len(seg) else " "
        word = token[0].isalpha()
        if not word or (not before.isalnum() and not after.isalnum()):
            if token in ("<", ">") and after == "=":
                idx = seg.find(token, idx + 1)
                continue
            if token == "*" and (after == "*" or before == "*"):
                idx = seg.find(token, idx + 1)
                continue
            if token == "/" and (after == "/" or before == "/"):
                idx = seg.find(token, idx + 1)
                continue
            return a + idx, a + idx + len(token)
        idx = seg.find(token, idx + 1)
    return None


def _scope_names(func: ast.AST) -> list[str]:
    names: list[str] = []
    if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        names.extend(a.arg for a in func.args.args + func.args.kwonlyargs)
    for node in ast.walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        elif isinstance(node, ast.arg):
            names.append(node.arg)
    return sorted(set(names) - _BUILTINS)


def _functions(tree: ast.Module) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]


def _bound_contexts(tree: ast.Module) -> list[ast.expr]:
    """Expressions that act as bounds: range() args, slice bounds, indices, compared operands."""
    out: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            out.extend(node.args)
        elif isinstance(node, ast.Slice):
            out.extend(x for x in (node.lower, node.upper) if x is not None)
        elif isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
            out.append(node.slice)
        elif isinstance(node, ast.Compare):
            out.extend([node.left, *node.comparators])
        elif isinstance(node, ast.Return) and node.value is not None and _int_value(node.value) is not None:
            out.append(node.value)
    return out


def enumerate_mutations(source: str, *, validate: bool = True) -> list[Mutation]:
    """Every single edit this module knows for `source`, in `KIND_ORDER` (only those that still
    parse when `validate`)."""
    tree = parse(source)
    if tree is None:
        return []
    off = _Offsets(source)
    found: list[Mutation] = []
    seen: set[tuple[int, int, str]] = set()

    def add(kind: str, start: int, end: int, new: str, line: int) -> None:
        key = (start, end, new)
        if key in seen or source[start:end] == new:
            return
        seen.add(key)
        cand = Mutation(kind, start, end, source[start:end], new, line)
        if not validate or parse(cand.apply(source)) is not None:
            found.append(cand)

    for m in _iter_raw(tree, source, off):
        add(*m)
    order = {k: i for i, k in enumerate(KIND_ORDER)}
    found.sort(key=lambda m: (order.get(m.kind, 99), m.start, m.new))
    return found


def _iter_raw(tree: ast.Module, source: str, off: _Offsets) -> Iterator[tuple[str, int, int, str, int]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                text = CMP_TEXT.get(type(op))
                if text is None:
                    continue
                a, b = off.span(operands[i])[1], off.span(operands[i + 1])[0]
                loc = _op_between(source, a, b, text)
                if loc is None:
                    continue
                if text in FLIP:
                    yield ("flip_comparison", loc[0], loc[1], FLIP[text], node.lineno)
                if text in REVERSE:
                    yield ("reverse_comparison", loc[0], loc[1], REVERSE[text], node.lineno)
        elif isinstance(node, (ast.BinOp, ast.AugAssign)):
            text = OP_TEXT.get(type(node.op))
            if text is None:
                continue
            left = node.left if isinstance(node, ast.BinOp) else node.target
            right = node.right if isinstance(node, ast.BinOp) else node.value
            a, b = off.span(left)[1], off.span(right)[0]
            loc = _op_between(source, a, b, text)
            if loc is not None and text in OP_SWAP:
                for alt in OP_SWAP[text]:
                    yield ("change_operator", loc[0], loc[1], alt, node.lineno)
            if isinstance(node, ast.BinOp) and isinstance(node.op, NON_COMMUTATIVE):
                (la, lb), (ra, rb) = off.span(left), off.span(right)
                new = source[ra:rb] + source[lb:ra] + source[la:lb]
                yield ("swap_arguments", la, rb, new, node.lineno)
        elif isinstance(node, ast.BoolOp) and len(node.values) >= 2:
            text = "and" if isinstance(node.op, ast.And) else "or"
            a, b = off.span(node.values[0])[1], off.span(node.values[1])[0]
            loc = _op_between(source, a, b, text)
            if loc is not None:
                yield ("change_operator", loc[0], loc[1], "or" if text == "and" else "and", node.lineno)
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            if any(isinstance(a, ast.Starred) for a in node.args[:2]):
                continue
            (a0, b0), (a1, b1) = off.span(node.args[0]), off.span(node.args[1])
            new = source[a1:b1] + source[b0:a1] + source[a0:b0]
            yield ("swap_arguments", a0, b1, new, node.lineno)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple) and len(node.value.elts) == 2:
            (a0, b0), (a1, b1) = off.span(node.value.elts[0]), off.span(node.value.elts[1])
            yield ("swap_arguments", a0, b1, source[a1:b1] + source[b0:a1] + source[a0:b0], node.lineno)
        elif (
            isinstance(node, ast.Return)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, bool)
        ):
            a, b = off.span(node.value)
            yield ("change_return", a, b, str(not node.value.value), node.lineno)
    yield from _bounds(tree, source, off)
    yield from _base_cases(tree, source, off)
    yield from _variables(tree, source, off)


def _int_value(expr: ast.expr) -> int | None:
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return expr.value
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        inner = _int_value(expr.operand)
        return -inner if inner is not None else None
    return None


def _bounds(tree: ast.Module, source: str, off: _Offsets) -> Iterator[tuple[str, int, int, str, int]]:
    for expr in _bound_contexts(tree):
        a, b = off.span(expr)
        text = source[a:b]
        value = _int_value(expr)
        if value is not None:
            yield ("plus_one", a, b, str(value + 1), expr.lineno)
            yield ("minus_one", a, b, str(value - 1), expr.lineno)
            continue
        if isinstance(expr, ast.Constant):
            continue
        if (
            isinstance(expr, ast.BinOp)
            and isinstance(expr.right, ast.Constant)
            and type(expr.right.value) is int
            and isinstance(expr.op, (ast.Add, ast.Sub))
        ):
            ra, rb = off.span(expr.right)
            sign = 1 if isinstance(expr.op, ast.Add) else -1
            value = sign * expr.right.value
            for kind, delta in (("plus_one", 1), ("minus_one", -1)):
                new_value = value + delta
                if new_value == 0:
                    la, lb = off.span(expr.left)
                    yield (kind, a, b, source[la:lb], expr.lineno)
                elif (new_value > 0) == (sign > 0):
                    yield (kind, ra, rb, str(abs(new_value)), expr.lineno)
            continue
        wrap = f"({text})" if isinstance(expr, (ast.BoolOp, ast.Compare, ast.IfExp, ast.Lambda)) else text
        yield ("plus_one", a, b, f"{wrap} + 1", expr.lineno)
        yield ("minus_one", a, b, f"{wrap} - 1", expr.lineno)


def _base_cases(tree: ast.Module, source: str, off: _Offsets) -> Iterator[tuple[str, int, int, str, int]]:
    for func in _functions(tree):
        for stmt in func.body[:3]:
            if (
                isinstance(stmt, ast.If)
                and not stmt.orelse
                and len(stmt.body) == 1
                and isinstance(stmt.body[0], ast.Return)
            ):
                a = off.starts[stmt.lineno - 1]
                b = off.starts[stmt.end_lineno or stmt.lineno]
                yield ("remove_base_case", a, b, "", stmt.lineno)
        recursive = any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == func.name
            for n in ast.walk(func)
        )
        if not recursive or not func.args.args or not func.body:
            continue
        first = func.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(func.body) > 1:
            first = func.body[1]  # after a docstring
        at = off.starts[first.lineno - 1]
        line = off.lines[first.lineno - 1]
        indent = line[: len(line) - len(line.lstrip())]
        p = func.args.args[0].arg
        for cond, value in ((f"{p} <= 0", "0"), (f"{p} <= 1", p), (f"not {p}", p)):
            yield ("add_base_case", at, at, f"{indent}if {cond}:\n{indent}    return {value}\n", first.lineno)


def _variables(tree: ast.Module, source: str, off: _Offsets) -> Iterator[tuple[str, int, int, str, int]]:
    for func in _functions(tree):
        names = _scope_names(func)
        called = {
            n.func.id for n in ast.walk(func) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        for node in ast.walk(func):
            if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
                continue
            if node.id not in names or node.id in called:
                continue
            a, b = off.span(node)
            for other in names:
                if other != node.id and other not in called:
                    yield ("change_variable", a, b, other, node.lineno)


def _changed_region(a: str, b: str) -> tuple[int, int]:
    """[start, end) of `a` outside the longest common prefix and suffix with `b`."""
    p = 0
    n = min(len(a), len(b))
    while p < n and a[p] == b[p]:
        p += 1
    q = 0
    while q < n - p and a[len(a) - 1 - q] == b[len(b) - 1 - q]:
        q += 1
    return p, len(a) - q


def mutations_between(a_minus: str, a_plus: str) -> Mutation | None:
    """The single known mutation that turns `a_minus` into `a_plus`: exact text first (only
    mutations covering the changed region), then formatting-insensitive."""
    if a_minus == a_plus:
        return None
    muts = enumerate_mutations(a_minus, validate=False)
    lo, hi = _changed_region(a_minus, a_plus)
    # spans covering the changed region (an insertion's region is empty and may sit next to it)
    near = [m for m in muts if m.start <= lo and m.end >= hi or (lo == hi and m.start <= lo <= m.end + 2)]
    for m in near:
        if m.apply(a_minus) == a_plus:
            return m
    target = normalise(a_plus)
    if target == normalise(a_minus):
        return None
    for m in near:
        if normalise(m.apply(a_minus)) == target:
            return m
    return None
