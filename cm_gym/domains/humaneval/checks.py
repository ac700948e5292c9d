"""HumanEval's ``check(candidate)`` turned into input/output cases that the judge compares.

Each top-level ``assert`` of `check` that has one of these shapes becomes a `Case` (``f`` is the
entry point; ``A`` and ``E`` are evaluated *here*, as trusted upstream test data, with only the
standard library's `math` in scope — never with the program):

- ``candidate(A) == E`` / ``candidate(A) is E``      → ``f(*input_data)`` == E (``is True/False``
  keeps identity: ``f(*input_data) is E``)
- ``tuple(candidate(A)) == tuple(E)``               → ``tuple(f(*input_data))`` == tuple(E)
- ``candidate(A)`` / ``not candidate(A)``           → ``bool(f(*input_data))`` == True / False
- ``abs(candidate(A) - E) < tol`` (either order)    → approx(E, abs=tol)

Only the call ``f(*input_data)`` runs in the sandbox; the expected value stays in the judge.
Anything else (loops over random inputs, asserts that call the program's helpers, assignments)
cannot be converted; `convert_check` reports it. `assert True` is vacuous and dropped. A problem
with any unconvertible statement is judged in *pytest* mode instead: its whole `check` runs in the
trusted judge process with ``candidate`` and the program's other functions as remote calls into
the sandbox (`cm_gym.evaluators.judge`), never in the candidate's process.
"""

from __future__ import annotations

import ast
import builtins
import math
from dataclasses import dataclass, field
from typing import Any

from cm_gym.evaluators.testrun import Case, encode_expected

_SAFE_NAMES: dict[str, Any] = {"math": math}
_BUILTIN_NAMES = set(dir(builtins))


class Unconvertible(Exception):
    """An assert whose shape is not one of the module doc's."""


@dataclass
class Conversion:
    """The cases read from one `check`, and what could not be read (statement source, why)."""

    cases: list[Case] = field(default_factory=list)
    unconvertible: list[tuple[str, str]] = field(default_factory=list)
    vacuous: int = 0


def _value(node: ast.expr) -> Any:
    """Evaluate trusted upstream test data (no program names in scope)."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    unknown = names - set(_SAFE_NAMES) - _BUILTIN_NAMES
    if unknown:
        raise Unconvertible(f"refers to {', '.join(sorted(unknown))}")
    code = compile(ast.Expression(node), "<check>", "eval")
    return eval(code, dict(_SAFE_NAMES))  # noqa: S307 - HumanEval's own test data, not the program


def _candidate_args(node: ast.expr) -> list[Any] | None:
    """The evaluated arguments when `node` is ``candidate(...)`` (positional only), else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "candidate"):
        return None
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        raise Unconvertible("keyword or starred arguments")
    return [_value(a) for a in node.args]


def _wrapped(node: ast.expr, wrapper: str) -> ast.expr | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == wrapper
        and len(node.args) == 1
        and not node.keywords
    ):
        return node.args[0]
    return None


def _case(index: int, test: ast.expr, function: str) -> Case | None:
    """The case for one assert's test expression (None = vacuous), or Unconvertible."""
    call = f"{function}(*input_data)"
    name = f"check[{index}]"
    if isinstance(test, ast.Constant):
        if test.value:
            return None
        raise Unconvertible("assert of a false constant")
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        args = _candidate_args(test.operand)
        if args is not None:
            return Case(name, f"bool({call})", args, encode_expected(False))
        raise Unconvertible("negation of something other than a call")
    args = _candidate_args(test)
    if args is not None:
        return Case(name, f"bool({call})", args, encode_expected(True))
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Eq, ast.Is)):
            for wrapper in ("tuple", "list", "sorted", "set"):
                inner_l, inner_r = _wrapped(left, wrapper), _wrapped(right, wrapper)
                if inner_l is not None and inner_r is not None:
                    args = _candidate_args(inner_l)
                    if args is not None:
                        expected = _value(right)
                        return Case(name, f"{wrapper}({call})", args, encode_expected(expected))
            args = _candidate_args(left)
            if args is not None:
                expected = _value(right)
                if isinstance(op, ast.Is):
                    if expected not in (True, False, None):
                        raise Unconvertible("identity with a non-singleton")
                    return Case(name, f"{call} is {expected!r}", args, encode_expected(True))
                return Case(name, call, args, encode_expected(expected))
        if isinstance(op, (ast.Lt, ast.LtE)):
            inner = _wrapped(left, "abs")
            if inner is None and isinstance(left, ast.Call) and ast.unparse(left.func) == "math.fabs":
                inner = left.args[0] if len(left.args) == 1 else None
            if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Sub):
                tol = _value(right)
                for got, exp in ((inner.left, inner.right), (inner.right, inner.left)):
                    args = _candidate_args(got)
                    if args is not None:
                        target = float(_value(exp))
                        return Case(name, call, args, {"approx": target, "abs": float(tol), "rel": None})
    raise Unconvertible("not one of the convertible assert shapes")


def convert_check(test_source: str, function: str) -> Conversion:
    """Cases from the ``check`` function in `test_source` (see module doc); never raises for an
    unexpected shape (it is reported in `Conversion.unconvertible`)."""
    out = Conversion()
    try:
        tree = ast.parse(test_source)
    except SyntaxError as exc:
        out.unconvertible.append(("<test>", f"does not parse: {exc.msg}"))
        return out
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if not checks:
        out.unconvertible.append(("<test>", "no check(candidate) function"))
        return out
    for stmt in checks[0].body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a docstring or a bare string
        text = ast.unparse(stmt).splitlines()[0][:120]
        if not isinstance(stmt, ast.Assert):
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Name):
                continue  # a bare name such as `print`: no effect
            out.unconvertible.append((text, f"a {type(stmt).__name__} statement"))
            continue
        try:
            case = _case(len(out.cases), stmt.test, function)
        except Unconvertible as exc:
            out.unconvertible.append((text, str(exc)))
            continue
        except Exception as exc:  # noqa: BLE001 - upstream data that does not evaluate here
            out.unconvertible.append((text, f"{type(exc).__name__}: {str(exc)[:80]}"))
            continue
        if case is None:
            out.vacuous += 1
        else:
            out.cases.append(case)
    return out
