"""Compile the constraint language (see `language.py`) to CNF over a problem's signature.

A `Signature` names the index sets (integers, or integer tuples for relations such as edges) and
the Boolean arrays ``name[dim1][dim2]...``. Array cells get DIMACS ids 1..n in a fixed order;
cardinality constraints use python-sat's `CardEnc` and add auxiliary ids above them. An atom whose
index falls outside its dimension is the constant *false* (one extra variable forced false), so an
off-by-one shift changes the meaning instead of crashing. Grounding is bounded (`MAX_CLAUSES`,
`MAX_GROUNDINGS`): a runaway encoding is an `EncodingTooLarge`, never a hang.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from cm_gym.domains.sat.errors import EncodingError, EncodingTooLarge
from cm_gym.domains.sat.language import PAIR_HEADS, Binder, Cond, Constraint, Expr, Literal, parse_encoding

MAX_CLAUSES = 200_000
MAX_GROUNDINGS = 200_000

SetValues = tuple[int, ...] | tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Signature:
    """Index sets and Boolean arrays of a problem (what an encoding may talk about)."""

    sets: Mapping[str, SetValues]
    arrays: Mapping[str, tuple[str, ...]]

    def to_json(self) -> dict[str, object]:
        """JSON-serialisable form (tuples become lists)."""
        return {
            "sets": {
                k: [list(v) if isinstance(v, tuple) else v for v in vals] for k, vals in self.sets.items()
            },
            "arrays": {k: list(v) for k, v in self.arrays.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Signature:
        """Inverse of `to_json`."""
        sets_raw = data["sets"]
        arrays_raw = data["arrays"]
        assert isinstance(sets_raw, Mapping) and isinstance(arrays_raw, Mapping)
        sets = {
            k: tuple(tuple(v) if isinstance(v, list) else int(v) for v in vals)
            for k, vals in sets_raw.items()
        }
        return cls(sets=sets, arrays={k: tuple(v) for k, v in arrays_raw.items()})


@dataclass
class VarTable:
    """DIMACS ids of every array cell, and the reverse map for decoding a model."""

    signature: Signature
    base: dict[str, int] = field(default_factory=dict)
    positions: dict[str, dict[int, int]] = field(default_factory=dict)
    sizes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    n_vars: int = 0
    _cells: list[tuple[str, tuple[int, ...]]] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        sig = self.signature
        for name, values in sig.sets.items():
            if values and isinstance(values[0], int):
                self.positions[name] = {int(v): i for i, v in enumerate(values)}  # type: ignore[arg-type]
        next_id = 1
        for name, dims in sig.arrays.items():
            for d in dims:
                if d not in self.positions:
                    raise EncodingError(f"array {name} indexes {d!r}, which is not a set of integers")
            self.sizes[name] = tuple(len(sig.sets[d]) for d in dims)
            self.base[name] = next_id
            total = 1
            for size in self.sizes[name]:
                total *= size
            next_id += total
        self.n_vars = next_id - 1

    def var(self, name: str, values: tuple[int, ...]) -> int | None:
        """The id of ``name[values]`` or None when an index is outside its dimension."""
        dims = self.signature.arrays[name]
        offset = 0
        for d, size, v in zip(dims, self.sizes[name], values, strict=True):
            pos = self.positions[d].get(v)
            if pos is None:
                return None
            offset = offset * size + pos
        return self.base[name] + offset

    def cells(self) -> list[tuple[str, tuple[int, ...]]]:
        """(array, index values) of ids 1..n_vars, in id order (built once per table)."""
        if self._cells is None:
            out: list[tuple[str, tuple[int, ...]]] = []
            for name, dims in self.signature.arrays.items():
                domains = [self.signature.sets[d] for d in dims]
                out.extend((name, tuple(int(v) for v in values)) for values in itertools.product(*domains))  # type: ignore[arg-type]
            self._cells = out
        return self._cells

    def decode(self, model: list[int]) -> dict[str, frozenset[tuple[int, ...]]]:
        """The true cells of each array in a solver model (python-sat lists ids in order)."""
        cells = self.cells()
        found: dict[str, list[tuple[int, ...]]] = {name: [] for name in self.signature.arrays}
        head = (
            model[: self.n_vars]
            if len(model) >= self.n_vars and abs(model[self.n_vars - 1]) == self.n_vars
            else model
        )
        for lit in head:
            if 0 < lit <= self.n_vars:
                name, values = cells[lit - 1]
                found[name].append(values)
        return {name: frozenset(v) for name, v in found.items()}


@dataclass(frozen=True)
class LineStats:
    line: int
    text: str
    instances: int
    clauses: int


@dataclass(frozen=True)
class CompiledEncoding:
    """The CNF of an encoding: clauses over ids 1..top, array cells first."""

    clauses: list[list[int]]
    top: int
    table: VarTable
    lines: tuple[LineStats, ...]
    out_of_range: int


_CMP: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}


def _expr_fn(expr: Expr) -> Callable[[dict[str, int]], int]:
    """A closure evaluating a linear index expression (specialised for the common shapes)."""
    const, terms = expr.const, expr.terms
    if not terms:
        return lambda env: const
    if len(terms) == 1:
        coef, name = terms[0]
        if coef == 1:
            return (lambda env: env[name]) if const == 0 else (lambda env: env[name] + const)
        return lambda env: coef * env[name] + const
    return lambda env: const + sum(c * env[n] for c, n in terms)


def _cond_fn(cond: Cond) -> Callable[[dict[str, int]], bool]:
    lhs, rhs, op = _expr_fn(cond.lhs), _expr_fn(cond.rhs), _CMP[cond.op]
    return lambda env: op(lhs(env), rhs(env))


class _Compiler:
    def __init__(self, sig: Signature) -> None:
        self.sig = sig
        self.table = VarTable(sig)
        self.false_id = self.table.n_vars + 1
        self.top = self.false_id
        self.clauses: list[list[int]] = [[-self.false_id]]
        self.out_of_range = 0
        self.groundings = 0

    def _add(self, clauses: list[list[int]]) -> None:
        self.clauses.extend(clauses)
        if len(self.clauses) > MAX_CLAUSES:
            raise EncodingTooLarge(f"the encoding grounds to more than {MAX_CLAUSES} clauses")

    def _tick(self, line: int) -> None:
        self.groundings += 1
        if self.groundings > MAX_GROUNDINGS:
            raise EncodingTooLarge(f"the encoding grounds more than {MAX_GROUNDINGS} instances", line)

    def _bind(self, binders: tuple[Binder, ...], env: dict[str, int], line: int) -> Iterator[dict[str, int]]:
        if not binders:
            yield dict(env)
            return
        first, rest = binders[0], binders[1:]
        if first.set_name is not None:
            if first.set_name not in self.sig.sets:
                raise EncodingError(
                    f"unknown set {first.set_name!r}; known: {', '.join(self.sig.sets)}", line
                )
            values = self.sig.sets[first.set_name]
            if not values:
                return
            is_tuple = bool(values) and isinstance(values[0], tuple)
            if is_tuple != first.destructure or (
                is_tuple and len(values[0]) != len(first.names)  # type: ignore[arg-type]
            ):
                arity = len(values[0]) if is_tuple else 1  # type: ignore[arg-type]
                form = f"({', '.join('abcd'[:arity])})" if is_tuple else "v"
                raise EncodingError(
                    f"set {first.set_name} holds {arity}-tuples; bind it as {form} in ...", line
                )
            for value in values:
                binding = dict(zip(first.names, value, strict=True)) if is_tuple else {first.names[0]: value}
                yield from self._bind(rest, {**env, **binding}, line)  # type: ignore[dict-item]
        else:
            assert first.low is not None and first.high is not None
            lo, hi = self._eval(first.low, env, line), self._eval(first.high, env, line)
            for value in range(lo, hi + 1):
                yield from self._bind(rest, {**env, first.names[0]: value}, line)

    @staticmethod
    def _eval(expr: Expr, env: dict[str, int], line: int) -> int:
        missing = [v for v in expr.variables if v not in env]
        if missing:
            raise EncodingError(f"index variable {missing[0]!r} is not bound here", line)
        return expr.evaluate(env)

    def _literal_fn(self, lit: Literal, line: int) -> Callable[[dict[str, int]], int]:
        """A fast closure env -> signed DIMACS literal (out-of-range indices give the false id)."""
        atom = lit.atom
        dims = self.sig.arrays.get(atom.name)
        if dims is None:
            raise EncodingError(f"unknown array {atom.name!r}; known: {', '.join(self.sig.arrays)}", line)
        if len(atom.indices) != len(dims):
            raise EncodingError(f"{atom.name} takes {len(dims)} indices, got {len(atom.indices)}", line)
        parts = [
            (_expr_fn(e), self.table.positions[d], size)
            for e, d, size in zip(atom.indices, dims, self.table.sizes[atom.name], strict=True)
        ]
        base, sign, false_id = self.table.base[atom.name], -1 if lit.negated else 1, self.false_id

        def fn(env: dict[str, int]) -> int:
            offset = 0
            for index, positions, size in parts:
                pos = positions.get(index(env))
                if pos is None:
                    self.out_of_range += 1
                    return sign * false_id
                offset = offset * size + pos
            return sign * (base + offset)

        return fn

    def _group_vars(self, c: Constraint) -> list[tuple[str, str]]:
        """(variable, set) for each index variable the binders leave free, in order of appearance."""
        bound = {n for b in c.binders for n in b.names}
        out: dict[str, str] = {}
        for lit in c.literals:
            dims = self.sig.arrays.get(lit.atom.name, ())
            for expr, dim in zip(lit.atom.indices, dims, strict=False):
                for name in expr.variables:
                    if name not in bound and name not in out:
                        out[name] = dim
        return list(out.items())

    def compile_line(self, c: Constraint) -> LineStats:
        """Ground one constraint line and add its clauses."""
        group = self._group_vars(c)
        if group and c.head in PAIR_HEADS:
            shown = group[0][0] if not group[0][0].startswith("*") else "*"
            raise EncodingError(f"{c.head} needs every index bound by 'for'; {shown!r} is not", c.line)
        group_names = [g for g, _ in group]
        known = {n for b in c.binders for n in b.names} | set(group_names)
        for cond in c.conds:
            for v in cond.variables:
                if v not in known:
                    raise EncodingError(f"'where' uses {v!r}, which is not bound", c.line)
        outer = [_cond_fn(k) for k in c.conds if not set(group_names).intersection(k.variables)]
        inner = [_cond_fn(k) for k in c.conds if set(group_names).intersection(k.variables)]
        lit_fns = [self._literal_fn(lit, c.line) for lit in c.literals]
        domains = [self.sig.sets[d] for _, d in group]
        self._estimate(c, domains)
        before, instances = len(self.clauses), 0
        for env in self._bind(c.binders, {}, c.line):
            self._tick(c.line)
            if not all(cond(env) for cond in outer):
                continue
            lits: list[int] = []
            if not group:
                lits = [fn(env) for fn in lit_fns]
            else:
                for values in itertools.product(*domains):
                    self.groundings += 1
                    for name, value in zip(group_names, values, strict=True):
                        env[name] = value  # type: ignore[assignment]
                    if all(cond(env) for cond in inner):
                        lits.extend(fn(env) for fn in lit_fns)
                self._tick(c.line)
            instances += 1
            self._emit(c, list(dict.fromkeys(lits)))
        return LineStats(c.line, c.text, instances, len(self.clauses) - before)

    def _estimate(self, c: Constraint, domains: list[SetValues]) -> None:
        """Refuse up front when the binders and groups alone exceed the grounding limit."""
        size = 1
        for b in c.binders:
            if b.set_name is not None:
                size *= max(1, len(self.sig.sets.get(b.set_name, ())))
            elif b.low is not None and b.high is not None and not b.low.terms and not b.high.terms:
                size *= max(1, b.high.const - b.low.const + 1)
        for d in domains:
            size *= max(1, len(d))
        if self.groundings + size > MAX_GROUNDINGS:
            raise EncodingTooLarge(f"the encoding grounds more than {MAX_GROUNDINGS} instances", c.line)

    def _emit(self, c: Constraint, lits: list[int]) -> None:
        head, n = c.head, len(lits)
        if head == "clause":
            self._add([lits] if lits else [[self.false_id]])
        elif head == "not_both":
            self._add([[-lits[0], -lits[1]]] if n == 2 else [[-lits[0]]])
        elif head == "implies":
            self._add([[-lits[0], lits[1]]] if n == 2 else [[-lits[0], lits[0]]])
        else:
            k = 1 if head.endswith("_one") else int(c.k or 0)
            kind = head.removesuffix("_one")
            if kind in ("at_most", "exactly"):
                self._at_most(lits, k)
            if kind in ("at_least", "exactly"):
                self._at_least(lits, k)

    def _card(self, result: Any) -> None:
        self._add([list(cl) for cl in result.clauses])
        self.top = max(self.top, result.nv)

    def _guard(self, n: int, k: int) -> None:
        """Refuse a cardinality constraint whose sequential counter would be too large (the
        encoding has about 2·n·k clauses), before python-sat allocates it."""
        if len(self.clauses) + 2 * n * max(1, k) > MAX_CLAUSES:
            raise EncodingTooLarge(
                f"a cardinality bound of {k} over {n} literals needs more than {MAX_CLAUSES} clauses"
            )

    def _at_most(self, lits: list[int], k: int) -> None:
        if k >= len(lits):
            return
        if k == 0:
            self._add([[-lit] for lit in lits])
        elif k == 1 and len(lits) <= 6:
            self._add([[-a, -b] for a, b in itertools.combinations(lits, 2)])
        else:
            self._guard(len(lits), k)
            from pysat.card import CardEnc, EncType  # on use: `cm_gym/domains/smt/__init__.py` says why

            self._card(CardEnc.atmost(lits=lits, bound=k, top_id=self.top, encoding=EncType.seqcounter))

    def _at_least(self, lits: list[int], k: int) -> None:
        if k <= 0:
            return
        if k > len(lits):
            self._add([[self.false_id]])
        elif k == 1:
            self._add([list(lits)])
        elif k == len(lits):
            self._add([[lit] for lit in lits])
        else:
            self._guard(len(lits), len(lits) - k)
            from pysat.card import CardEnc, EncType  # on use: `cm_gym/domains/smt/__init__.py` says why

            self._card(CardEnc.atleast(lits=lits, bound=k, top_id=self.top, encoding=EncType.seqcounter))


def compile_encoding(text: str, signature: Signature) -> CompiledEncoding:
    """Parse and compile an encoding to CNF, or raise `EncodingError` naming the bad line."""
    constraints = parse_encoding(text)
    comp = _Compiler(signature)
    stats = tuple(comp.compile_line(c) for c in constraints)
    return CompiledEncoding(comp.clauses, comp.top, comp.table, stats, comp.out_of_range)
