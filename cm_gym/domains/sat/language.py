"""The SAT domain's declarative constraint language: tokenizer, parser and syntax tree.

One line is one constraint family (one decision unit)::

    exactly_one color[v][*] for v in V
    not_both color[u][c] color[v][c] for (u, v) in E, c in C
    at_most_one q[r][c] for d in -3..3 where r - c == d
    at_most 2 x[*][t] for t in T
    clause -x[i][t] x[j][t+1] for (i, j) in PREC, t in 0..3

Heads: ``clause`` (disjunction), ``not_both a b``, ``implies a b``, ``at_least_one``,
``at_most_one``, ``exactly_one``, ``at_least K``, ``at_most K``, ``exactly K``. A literal is an atom
``name[index]...`` optionally negated by ``-``, ``~``, ``!`` or ``not``. An index is ``*`` or a linear
expression over integers and index variables (``c``, ``c+1``, ``r-c``). Variables bound by ``for``
range over a named set, a pair set (``(u, v) in E``) or an inclusive range ``a..b``; index variables
that ``for`` does not bind (and ``*``) are *group* variables: they range over the array dimension
they index, and a cardinality head or ``clause`` counts over the whole group. ``where`` filters with
comparisons (``==  !=  <  <=  >  >=``) joined by ``,`` or ``and``. ``#`` starts a comment.

Parsing is a hand-written recursive descent over a fixed token set: nothing is ever evaluated as
Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cm_gym.domains.sat.errors import EncodingError

MAX_LINES = 40
MAX_LINE_CHARS = 400

CARD_HEADS = ("at_least_one", "at_most_one", "exactly_one")
K_HEADS = ("at_least", "at_most", "exactly")
PAIR_HEADS = ("not_both", "implies")
HEADS = ("clause",) + PAIR_HEADS + CARD_HEADS + K_HEADS
CMP_OPS = ("==", "!=", "<=", ">=", "<", ">")

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(\.\.|==|!=|<=|>=|[\[\](),*+\-<>~!]))")


@dataclass(frozen=True)
class Expr:
    """A linear integer expression: ``const + sum(coef * var)``."""

    const: int = 0
    terms: tuple[tuple[int, str], ...] = ()

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(name for _, name in self.terms)

    def plain_var(self) -> str | None:
        """The variable name when the expression is exactly one variable, else None."""
        if self.const == 0 and len(self.terms) == 1 and self.terms[0][0] == 1:
            return self.terms[0][1]
        return None

    def evaluate(self, env: dict[str, int]) -> int:
        """The value under `env` (every variable must be bound)."""
        return self.const + sum(coef * env[name] for coef, name in self.terms)


@dataclass(frozen=True)
class Atom:
    """``name[i][j]...``; an index of ``*`` is stored as a fresh group variable ``*n``."""

    name: str
    indices: tuple[Expr, ...]


@dataclass(frozen=True)
class Literal:
    negated: bool
    atom: Atom


@dataclass(frozen=True)
class Binder:
    """``v in SET``, ``(u, v) in SET`` or ``d in lo..hi``."""

    names: tuple[str, ...]
    set_name: str | None = None
    low: Expr | None = None
    high: Expr | None = None
    destructure: bool = False


@dataclass(frozen=True)
class Cond:
    lhs: Expr
    op: str
    rhs: Expr

    @property
    def variables(self) -> tuple[str, ...]:
        return self.lhs.variables + self.rhs.variables

    def holds(self, env: dict[str, int]) -> bool:
        """Whether the comparison holds under `env`."""
        a, b = self.lhs.evaluate(env), self.rhs.evaluate(env)
        return {
            "==": a == b,
            "!=": a != b,
            "<=": a <= b,
            ">=": a >= b,
            "<": a < b,
            ">": a > b,
        }[self.op]


@dataclass(frozen=True)
class Constraint:
    """One parsed line: a head, its literals, ``for`` binders and ``where`` conditions."""

    head: str
    k: int | None
    literals: tuple[Literal, ...]
    binders: tuple[Binder, ...]
    conds: tuple[Cond, ...]
    line: int
    text: str


class _Parser:
    def __init__(self, text: str, line: int) -> None:
        self.line = line
        self.toks: list[str] = []
        pos = 0
        stripped = text.rstrip()
        while pos < len(stripped):
            m = _TOKEN.match(stripped, pos)
            if m is None or m.end() == pos:
                raise EncodingError(f"unexpected character {stripped[pos:].strip()[:1]!r}", line)
            self.toks.append(m.group(m.lastindex or 0))
            pos = m.end()
        self.i = 0

    def peek(self, offset: int = 0) -> str | None:
        j = self.i + offset
        return self.toks[j] if j < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None:
            raise EncodingError(
                f"unexpected end of line{f', expected {expected!r}' if expected else ''}", self.line
            )
        if expected is not None and tok != expected:
            raise EncodingError(f"expected {expected!r}, found {tok!r}", self.line)
        self.i += 1
        return tok

    def ident(self, what: str) -> str:
        tok = self.take()
        if not re.fullmatch(r"[A-Za-z_]\w*", tok):
            raise EncodingError(f"expected {what}, found {tok!r}", self.line)
        return tok

    # expr := ['-'] term (('+'|'-') term)*     term := INT | IDENT
    def expr(self) -> Expr:
        const, terms = 0, []
        sign = 1
        if self.peek() == "-":
            self.take()
            sign = -1
        while True:
            tok = self.take()
            if tok.isdigit():
                const += sign * int(tok)
            elif re.fullmatch(r"[A-Za-z_]\w*", tok) and tok not in ("for", "where", "in", "and"):
                terms.append((sign, tok))
            else:
                raise EncodingError(f"expected a number or an index variable, found {tok!r}", self.line)
            if self.peek() in ("+", "-"):
                sign = 1 if self.take() == "+" else -1
                continue
            break
        merged: dict[str, int] = {}
        for coef, name in terms:
            merged[name] = merged.get(name, 0) + coef
        return Expr(const, tuple((c, n) for n, c in merged.items() if c != 0))


def _parse_line(text: str, line: int, star_counter: list[int]) -> Constraint:
    p = _Parser(text, line)
    head = p.take()
    if head not in HEADS:
        raise EncodingError(f"unknown constraint {head!r}; use one of: {', '.join(HEADS)}", line)
    k: int | None = None
    if head in K_HEADS:
        tok = p.take()
        if not tok.isdigit():
            raise EncodingError(f"{head} needs a number, e.g. '{head} 2 x[*]'", line)
        k = int(tok)
    literals: list[Literal] = []
    while p.peek() not in (None, "for", "where"):
        negated = False
        if p.peek() in ("-", "~", "!", "not"):
            p.take()
            negated = True
        name = p.ident("an atom such as x[i][j]")
        indices: list[Expr] = []
        while p.peek() == "[":
            p.take("[")
            if p.peek() == "*":
                p.take()
                indices.append(Expr(0, ((1, f"*{star_counter[0]}"),)))
                star_counter[0] += 1
            else:
                indices.append(p.expr())
            p.take("]")
        if not indices:
            raise EncodingError(f"atom {name!r} has no index; write {name}[i]", line)
        literals.append(Literal(negated, Atom(name, tuple(indices))))
        if p.peek() == ",":
            p.take()
    if not literals:
        raise EncodingError(f"{head} has no literals", line)
    if head in PAIR_HEADS and len(literals) != 2:
        raise EncodingError(f"{head} takes exactly two literals, got {len(literals)}", line)
    binders: list[Binder] = []
    if p.peek() == "for":
        p.take()
        while True:
            binders.append(_binder(p))
            if p.peek() != ",":
                break
            p.take()
    conds: list[Cond] = []
    if p.peek() == "where":
        p.take()
        while True:
            lhs = p.expr()
            op = p.take()
            if op not in CMP_OPS:
                raise EncodingError(f"expected a comparison ({' '.join(CMP_OPS)}), found {op!r}", line)
            conds.append(Cond(lhs, op, p.expr()))
            if p.peek() not in (",", "and"):
                break
            p.take()
    if p.peek() is not None:
        raise EncodingError(f"unexpected {p.peek()!r} after the constraint", line)
    return Constraint(head, k, tuple(literals), tuple(binders), tuple(conds), line, text.strip())


def _binder(p: _Parser) -> Binder:
    if p.peek() == "(":
        p.take("(")
        names = [p.ident("an index variable")]
        while p.peek() == ",":
            p.take()
            names.append(p.ident("an index variable"))
        p.take(")")
        destructure = True
    else:
        names, destructure = [p.ident("an index variable")], False
    p.take("in")
    # a set name is an identifier not followed by '..' and not part of an expression
    tok = p.peek()
    if tok is not None and re.fullmatch(r"[A-Za-z_]\w*", tok) and p.peek(1) in (None, ",", "where"):
        p.take()
        return Binder(tuple(names), set_name=tok, destructure=destructure)
    low = p.expr()
    p.take("..")
    high = p.expr()
    if destructure:
        raise EncodingError("a range binds one variable, not a tuple", p.line)
    return Binder(tuple(names), low=low, high=high)


def parse_encoding(text: str) -> list[Constraint]:
    """Parse an encoding (one constraint per non-blank line; ``#`` comments) or raise
    `EncodingError` naming the first bad line."""
    lines = text.splitlines()
    constraints: list[Constraint] = []
    star_counter = [0]
    for number, raw in enumerate(lines, start=1):
        body = raw.split("#", 1)[0].strip()
        if not body:
            continue
        if len(raw) > MAX_LINE_CHARS:
            raise EncodingError(f"line longer than {MAX_LINE_CHARS} characters", number)
        constraints.append(_parse_line(body, number, star_counter))
        if len(constraints) > MAX_LINES:
            raise EncodingError(f"more than {MAX_LINES} constraint lines", number)
    if not constraints:
        raise EncodingError("the encoding has no constraint lines")
    return constraints


def head_text(head: str, k: int | None) -> str:
    """The head as written (``at_most 2`` or ``exactly_one``)."""
    return f"{head} {k}" if k is not None else head
