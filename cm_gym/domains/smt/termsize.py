"""Size vetting of SMT-LIB scripts by the terms they *expand* to, not by their text.

A short script can ask z3 for an enormous problem: bit-vectors made wide by literals, ``concat``,
``zero_extend`` / ``sign_extend``, ``repeat`` or ``int2bv``; multiplications and divisions whose
bit-blasted circuits grow with the square of the width; ``let`` bindings and ``define-fun`` chains
that use a term twice per level (2^n nodes once inlined); huge exponents; regular-expression loops
and string / sequence lengths in the millions. `measure` walks every command once, keeping per
defined name and per ``let`` variable the size of its expansion, its bit-width and its
multiplication cost, and refuses the script (`ScriptRefused`, naming the line and the limit)
before z3 sees it. The walk costs time linear in the script's text, however large the expansion.
What no syntactic bound can see (e.g. a slow quantifier instantiation) is caught by the checking
worker's wall-clock and memory bounds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cm_gym.domains.smt.errors import ScriptRefused
from cm_gym.domains.smt.sexpr import Located, Sexpr

MAX_BV_WIDTH = 512
MAX_EXPANDED_NODES = 1_000_000
#: sum over multiplications / divisions of width^2 (one 128-bit multiplier is 16384)
MAX_MULTIPLY_COST = 2 * 128 * 128
MAX_EXPONENT = 4096
MAX_LOOP = 1000
MAX_SEQ_LENGTH = 100_000
MAX_NUMERAL_DIGITS = 200

_MULTIPLY = ("bvmul", "bvudiv", "bvurem", "bvsdiv", "bvsrem", "bvsmod")
_SAME_WIDTH = (
    "bvadd", "bvsub", "bvneg", "bvnot", "bvand", "bvor", "bvxor", "bvnand", "bvnor", "bvxnor",
    "bvshl", "bvlshr", "bvashr", "bvcomp", *_MULTIPLY,
)  # fmt: skip
_SEQ_INDEX = ("str.at", "str.substr", "seq.extract", "seq.nth", "seq.at", "str.indexof", "seq.indexof")
_COMPARE = ("=", "<", "<=", ">", ">=", "distinct")
_LEN = ("str.len", "seq.len")
_NUMERAL = re.compile(r"\d+")
_BINDERS = ("forall", "exists", "lambda")


@dataclass(frozen=True)
class Size:
    """The expansion of a term: tree nodes, bit-width (None when not a bit-vector), the
    multiplication cost, and the integer value when the term is a plain numeral."""

    nodes: int
    width: int | None = None
    cost: int = 0
    value: int | None = None


ONE = Size(1)


@dataclass(frozen=True)
class _Definition:
    body: Size
    per_param: tuple[int, ...]  # how often each parameter occurs in the expanded body


class _Walker:
    def __init__(self) -> None:
        self.consts: dict[str, Size] = {}
        self.sorts: dict[str, Sexpr] = {}
        self.functions: dict[str, _Definition] = {}
        self.line = 0

    def refuse(self, what: str) -> ScriptRefused:
        return ScriptRefused(f"line {self.line}: {what}")

    # -- sorts ------------------------------------------------------------------------------
    def sort_width(self, sort: Sexpr) -> int | None:
        for _ in range(16):
            if isinstance(sort, str) and sort in self.sorts:
                sort = self.sorts[sort]
        if isinstance(sort, list) and len(sort) >= 3 and sort[0] == "_":
            if sort[1] == "BitVec" and len(sort) == 3:
                return self.width(self.index(sort[2]), "bit-vector sort")
            if sort[1] == "FloatingPoint" and len(sort) == 4:
                self.width(self.index(sort[2]) + self.index(sort[3]), "floating-point sort")
        if isinstance(sort, list):
            for sub in sort:
                if isinstance(sub, list):
                    self.sort_width(sub)
        return None

    def width(self, w: int, what: str) -> int:
        if w > MAX_BV_WIDTH:
            raise self.refuse(f"a {what} of {w} bits exceeds the limit of {MAX_BV_WIDTH}")
        return w

    def index(self, tok: Sexpr) -> int:
        if not isinstance(tok, str) or not _NUMERAL.fullmatch(tok):
            return 0
        if len(tok) > MAX_NUMERAL_DIGITS:
            raise self.refuse(f"a numeral with {len(tok)} digits exceeds the limit")
        return int(tok)

    # -- terms ------------------------------------------------------------------------------
    def atom(self, tok: str, env: dict[str, Size]) -> Size:
        if tok in env:
            return env[tok]
        if tok in self.consts:
            return self.consts[tok]
        if tok in self.functions and not self.functions[tok].per_param:
            return self.functions[tok].body
        if tok.startswith("#b"):
            return Size(1, self.width(len(tok) - 2, "bit-vector literal"))
        if tok.startswith("#x"):
            return Size(1, self.width(4 * (len(tok) - 2), "bit-vector literal"))
        digits = tok[2:] if tok.startswith("bv") else tok.split(".")[0]
        if digits.isdigit() and len(digits) > MAX_NUMERAL_DIGITS:
            raise self.refuse(
                f"a numeral with {len(digits)} digits exceeds the limit of {MAX_NUMERAL_DIGITS}"
            )
        return Size(1, value=int(tok)) if _NUMERAL.fullmatch(tok) else ONE

    def term(self, e: Sexpr, env: dict[str, Size]) -> Size:
        if isinstance(e, str):
            return self.atom(e, env)
        if not e:
            return ONE
        head = e[0]
        if head == "_" and len(e) >= 3:  # (_ bvN w) literal or a bare indexed identifier
            if isinstance(e[1], str) and e[1].startswith("bv") and e[1][2:].isdigit():
                self.atom(e[1], env)
                return Size(1, self.width(self.index(e[2]), "bit-vector literal"))
            return ONE
        if head == "let" and len(e) == 3 and isinstance(e[1], list):
            inner = dict(env)
            for binding in e[1]:
                if isinstance(binding, list) and len(binding) == 2 and isinstance(binding[0], str):
                    inner[binding[0]] = self.term(binding[1], env)
            return self.checked(self.term(e[2], inner))
        if head in _BINDERS and len(e) == 3 and isinstance(e[1], list):
            inner = dict(env)
            for var in e[1]:
                if isinstance(var, list) and len(var) == 2 and isinstance(var[0], str):
                    inner[var[0]] = Size(1, self.sort_width(var[1]))
            body = self.term(e[2], inner)
            return self.checked(Size(1 + body.nodes, None, body.cost))
        if head == "!" and len(e) >= 2:
            return self.term(e[1], env)
        args = [self.term(a, env) for a in e[1:]]
        return self.checked(self.apply(head, args, e, env))

    def apply(self, head: Sexpr, args: list[Size], e: list[Sexpr], env: dict[str, Size]) -> Size:
        nodes, cost = 1 + sum(a.nodes for a in args), sum(a.cost for a in args)
        first = args[0].width if args else None
        if isinstance(head, list):  # an indexed operator: ((_ name i ...) args)
            return Size(nodes, self.indexed(head, args), cost)
        if isinstance(head, str) and head in self.functions:
            d = self.functions[head]
            nodes = d.body.nodes + sum(n * (a.nodes - 1) for n, a in zip(d.per_param, args, strict=False))
            cost = d.body.cost + sum(n * a.cost for n, a in zip(d.per_param, args, strict=False))
            return Size(nodes, d.body.width, cost)
        if head in _MULTIPLY and first:
            cost += first * first
        if head == "concat":
            return Size(nodes, self.width(sum(a.width or 0 for a in args), "concatenation"), cost)
        if (
            head in ("^", "exp")
            and len(args) == 2
            and args[1].value is not None
            and args[1].value > MAX_EXPONENT
        ):
            raise self.refuse(f"an exponent of {args[1].value} exceeds the limit of {MAX_EXPONENT}")
        if head in _SEQ_INDEX and any((a.value or 0) > MAX_SEQ_LENGTH for a in args[1:]):
            raise self.refuse(f"a string/sequence position over {MAX_SEQ_LENGTH} in ({head} ...)")
        lengths = head in _COMPARE and any(isinstance(x, list) and x and x[0] in _LEN for x in e[1:])
        if lengths and any((a.value or 0) > MAX_SEQ_LENGTH for a in args):
            raise self.refuse(f"a string/sequence length over {MAX_SEQ_LENGTH} is asked for")
        if head in _SAME_WIDTH:
            return Size(nodes, first, cost)
        if head == "ite" and len(args) == 3:
            return Size(nodes, args[1].width, cost)
        return Size(nodes, None, cost)

    def indexed(self, op: list[Sexpr], args: list[Size]) -> int | None:
        name = op[1] if len(op) > 1 else ""
        idx = [self.index(i) for i in op[2:]]
        w = args[0].width if args else None
        if name in ("zero_extend", "sign_extend") and idx and w is not None:
            return self.width(w + idx[0], f"({name} {idx[0]}) result")
        if name == "repeat" and idx and w is not None:
            return self.width(w * idx[0], f"(repeat {idx[0]}) result")
        if name == "extract" and len(idx) == 2:
            return self.width(idx[0] - idx[1] + 1, "extract")
        if name in ("int2bv", "nat2bv") and idx:
            return self.width(idx[0], name)
        if name in ("rotate_left", "rotate_right"):
            return w
        if name in ("re.loop", "re.^") and any(i > MAX_LOOP for i in idx):
            raise self.refuse(f"a regular-expression loop count over {MAX_LOOP}")
        if name == "to_fp" and len(idx) == 2:
            self.width(idx[0] + idx[1], "floating-point sort")
        return None

    def checked(self, size: Size) -> Size:
        if size.nodes > MAX_EXPANDED_NODES:
            raise self.refuse(
                f"the term expands to {_big(size.nodes)} nodes (let/define-fun inlined); the limit is "
                f"{MAX_EXPANDED_NODES}"
            )
        if size.cost > MAX_MULTIPLY_COST:
            raise self.refuse(
                f"bit-vector multiplications/divisions of total width^2 {_big(size.cost)} exceed the limit "
                f"of {MAX_MULTIPLY_COST} (e.g. one {int(MAX_MULTIPLY_COST**0.5)}-bit multiplier)"
            )
        return size

    # -- commands ---------------------------------------------------------------------------
    def command(self, e: list[Sexpr]) -> None:
        head = e[0]
        if head == "define-sort" and len(e) == 4 and isinstance(e[1], str):
            self.sorts[e[1]] = e[3]
            self.sort_width(e[3])
        elif head == "declare-const" and len(e) == 3 and isinstance(e[1], str):
            self.consts[e[1]] = Size(1, self.sort_width(e[2]))
        elif head == "declare-fun" and len(e) == 4 and isinstance(e[1], str):
            for sort in e[2] if isinstance(e[2], list) else []:
                self.sort_width(sort)
            self.consts[e[1]] = Size(1, self.sort_width(e[3]))
        elif head == "define-fun" and len(e) == 5 and isinstance(e[1], str) and isinstance(e[2], list):
            self.define(e[1], e[2], e[3], e[4])
        elif head in ("assert", "get-value"):
            for arg in e[1:]:
                self.term(arg, {})

    def define(self, name: str, params: list[Sexpr], sort: Sexpr, body: Sexpr) -> None:
        env: dict[str, Size] = {}
        names: list[str] = []
        for p in params:
            if isinstance(p, list) and len(p) == 2 and isinstance(p[0], str):
                env[p[0]] = Size(1, self.sort_width(p[1]))
                names.append(p[0])
        base = self.term(body, env)
        per_param = []
        for p in names:  # occurrences of p once inlined: the growth per extra node of its argument
            probe = dict(env)
            probe[p] = Size(2, env[p].width)
            per_param.append(self.term(body, probe).nodes - base.nodes)
        width = self.sort_width(sort)
        self.functions[name] = _Definition(Size(base.nodes, width, base.cost), tuple(per_param))


def _big(n: int) -> str:
    return str(n) if n < 10**12 else f"about 10^{len(str(n)) - 1}"


def measure(commands: list[Located]) -> None:
    """Refuse a script whose expanded terms are too large (see the module docstring)."""
    walker = _Walker()
    for cmd in commands:
        walker.line = cmd.line
        if isinstance(cmd.expr, list) and cmd.expr and isinstance(cmd.expr[0], str):
            walker.command(cmd.expr)
