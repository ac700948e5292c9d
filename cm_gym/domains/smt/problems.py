"""SMT problems and their independent checker.

A problem is JSON: typed variables (``Int``, ``Real``, ``Bool`` or ``BV<w>``), constraints as SMT-LIB
terms over them, and the expected verdict. The checker never asks z3: it evaluates each constraint
in Python (exact rationals; bit-vectors modulo 2^w with the problem's widths) on the model values
the solver returned, and adds one sort check per whole-number or bit-vector variable (a value must
be integral, or fit in w bits). U = fraction of those checks that hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from cm_gym.domains.smt.errors import SmtError
from cm_gym.domains.smt.sexpr import Sexpr, parse_sexprs

Value = bool | Fraction | tuple[int, int]  # bit-vectors are (value, width)
Checks = list[tuple[str, bool]]


class EvalError(SmtError):
    """A problem term the checker cannot evaluate (a bug in a generated problem)."""


@dataclass(frozen=True)
class Problem:
    """A generated SMT problem: variables with sorts, constraint terms with their wording."""

    family: str
    variables: tuple[tuple[str, str], ...]
    constraints: tuple[tuple[str, str], ...]  # (SMT-LIB term, English)
    expected: str
    logic: str

    def to_json(self) -> dict[str, Any]:
        """JSON form stored in ``task.meta["problem"]``."""
        return {
            "family": self.family,
            "variables": [list(v) for v in self.variables],
            "constraints": [list(c) for c in self.constraints],
            "expected": self.expected,
            "logic": self.logic,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Problem:
        """Inverse of `to_json`."""
        return cls(
            data["family"],
            tuple((str(n), str(s)) for n, s in data["variables"]),
            tuple((str(t), str(e)) for t, e in data["constraints"]),
            str(data["expected"]),
            str(data["logic"]),
        )

    def sorts(self) -> dict[str, str]:
        """Variable name -> sort name."""
        return dict(self.variables)


def bv_width(sort: str) -> int | None:
    """The width of a ``BV<w>`` sort name (None for other sorts)."""
    return int(sort[2:]) if sort.startswith("BV") and sort[2:].isdigit() else None


def _num(tok: str) -> Fraction | None:
    try:
        return Fraction(tok)
    except (ValueError, ZeroDivisionError):
        return None


def _bv_literal(tok: str) -> tuple[int, int] | None:
    if tok.startswith("#x"):
        return int(tok[2:], 16), 4 * (len(tok) - 2)
    if tok.startswith("#b"):
        return int(tok[2:], 2), len(tok) - 2
    return None


def _signed(v: tuple[int, int]) -> int:
    value, width = v
    return value - (1 << width) if value >> (width - 1) else value


_BV_ARITH = {
    "bvadd": lambda a, b: a + b,
    "bvsub": lambda a, b: a - b,
    "bvmul": lambda a, b: a * b,
    "bvand": lambda a, b: a & b,
    "bvor": lambda a, b: a | b,
    "bvxor": lambda a, b: a ^ b,
    "bvshl": lambda a, b: a << b if b < 4096 else 0,
    "bvlshr": lambda a, b: a >> b,
    "bvudiv": lambda a, b: a // b if b else -1,
    "bvurem": lambda a, b: a % b if b else a,
}
_BV_CMP = {
    "bvult": (False, lambda a, b: a < b),
    "bvule": (False, lambda a, b: a <= b),
    "bvugt": (False, lambda a, b: a > b),
    "bvuge": (False, lambda a, b: a >= b),
    "bvslt": (True, lambda a, b: a < b),
    "bvsle": (True, lambda a, b: a <= b),
    "bvsgt": (True, lambda a, b: a > b),
    "bvsge": (True, lambda a, b: a >= b),
}
_CMP = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def evaluate(term: Sexpr, env: Mapping[str, Value]) -> Value:
    """Evaluate a problem term (integer/real arithmetic, Booleans, bit-vectors) in `env`."""
    if isinstance(term, str):
        if term in env:
            return env[term]
        if term in ("true", "false"):
            return term == "true"
        bv = _bv_literal(term)
        if bv is not None:
            return bv
        n = _num(term)
        if n is None:
            raise EvalError(f"unknown symbol {term!r}")
        return n
    if not term:
        raise EvalError("empty application")
    head = term[0]
    if isinstance(head, list):
        if len(head) == 3 and head[0] == "_" and isinstance(head[1], str) and head[1].startswith("bv"):
            raise EvalError("indexed function application is not supported")
        raise EvalError(f"unsupported head {head!r}")
    if head == "_" and len(term) == 3 and isinstance(term[1], str) and term[1].startswith("bv"):
        width = int(str(term[2]))
        return int(term[1][2:]) % (1 << width), width
    args = [evaluate(a, env) for a in term[1:]]
    return _apply(head, args)


def _apply(head: str, args: Sequence[Value]) -> Value:
    if head in ("+", "*", "-", "/"):
        nums = [_as_num(a) for a in args]
        if head == "+":
            return sum(nums, Fraction(0))
        if head == "*":
            out = Fraction(1)
            for n in nums:
                out *= n
            return out
        if head == "-":
            return -nums[0] if len(nums) == 1 else nums[0] - sum(nums[1:], Fraction(0))
        return nums[0] / nums[1] if nums[1] != 0 else Fraction(0)
    if head in ("div", "mod"):
        a, b = (_as_num(x) for x in args)
        if b == 0:
            return Fraction(0)
        q = (a // b) if b > 0 else -(a // -b)
        if a - q * b < 0:
            q = q - 1 if b > 0 else q + 1
        return Fraction(q) if head == "div" else a - q * b
    if head == "abs":
        return abs(_as_num(args[0]))
    if head in _CMP:
        nums = [_as_num(a) for a in args]
        return all(_CMP[head](x, y) for x, y in zip(nums, nums[1:], strict=False))
    if head == "=":
        return all(_same(x, y) for x, y in zip(args, args[1:], strict=False))
    if head == "distinct":
        return all(not _same(args[i], args[j]) for i in range(len(args)) for j in range(i + 1, len(args)))
    if head == "and":
        return all(_as_bool(a) for a in args)
    if head == "or":
        return any(_as_bool(a) for a in args)
    if head == "not":
        return not _as_bool(args[0])
    if head == "=>":
        return (not _as_bool(args[0])) or _as_bool(args[1])
    if head == "ite":
        return args[1] if _as_bool(args[0]) else args[2]
    if head == "bv2nat":
        return Fraction(_as_bv(args[0])[0])
    if head in _BV_ARITH:
        (a, w), (b, _) = _as_bv(args[0]), _as_bv(args[1])
        out = _BV_ARITH[head](a, b)
        for extra in args[2:]:
            out = _BV_ARITH[head](out % (1 << w), _as_bv(extra)[0])
        return out % (1 << w), w
    if head in ("bvnot", "bvneg"):
        a, w = _as_bv(args[0])
        return ((~a) if head == "bvnot" else -a) % (1 << w), w
    if head in _BV_CMP:
        signed, fn = _BV_CMP[head]
        x, y = _as_bv(args[0]), _as_bv(args[1])
        return fn(_signed(x), _signed(y)) if signed else fn(x[0], y[0])
    raise EvalError(f"unsupported operator {head!r}")


def _as_num(v: Value) -> Fraction:
    if isinstance(v, Fraction):
        return v
    raise EvalError(f"expected a number, got {v!r}")


def _as_bool(v: Value) -> bool:
    if isinstance(v, bool):
        return v
    raise EvalError(f"expected a Boolean, got {v!r}")


def _as_bv(v: Value) -> tuple[int, int]:
    if isinstance(v, tuple):
        return v
    raise EvalError(f"expected a bit-vector, got {v!r}")


def _same(a: Value, b: Value) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return a[0] == b[0]
    return a == b


def parse_term(text: str) -> Sexpr:
    """One SMT-LIB term from text (the constraint strings stored in problems)."""
    exprs = parse_sexprs(f"({text})")
    return exprs[0].expr[0]  # type: ignore[index]


def check_model(problem: Problem, values: Mapping[str, Any]) -> Checks:
    """Score model `values` (name → int | Fraction | bool, None when absent) against `problem`."""
    env: dict[str, Value] = {}
    out: Checks = []
    for name, sort in problem.variables:
        raw = values.get(name)
        width = bv_width(sort)
        if raw is None:
            out.append((f"{name} has no value in the model (not declared under that name?)", False))
            continue
        if sort == "Bool":
            env[name] = bool(raw)
            continue
        if isinstance(raw, bool):
            out.append((f"{name} must be a number, got a Boolean", False))
            continue
        number = Fraction(raw)
        if width is not None:
            fits = number.denominator == 1 and 0 <= number < (1 << width)
            out.append((f"{name} = {number} must fit in {width} bits", fits))
            env[name] = (int(number) % (1 << width), width)
        else:
            if sort == "Int":
                out.append((f"{name} = {number} must be a whole number", number.denominator == 1))
            env[name] = number
    for term, english in problem.constraints:
        if term == "true":
            continue
        try:
            ok = _as_bool(evaluate(parse_term(term), env))
        except EvalError as exc:
            if any(n not in env for n, _ in problem.variables):
                ok = False
            else:
                raise EvalError(f"constraint {term!r}: {exc}") from exc
        out.append((english, ok))
    return out
