"""Sound checks of a ``sat`` model: is every assertion true in it?

`model.eval(assertion, model_completion=True)` settles quantifier-free assertions, but leaves a
closed formula wherever a quantifier remains. Such a formula is *decided* by z3 under the model, on
its own resource budget: its negation unsatisfiable means the assertion is true in the model, the
formula itself unsatisfiable means it is false. Elements of uninterpreted sorts become fresh
constants with the model's finite universe as an axiom (``∀x. x = e1 ∨ … ∨ x = en``, the ei
distinct), so a quantifier ranges over the model's universe and not over an unbounded one. Only an
assertion shown false makes an answer wrong; one that neither check settles is *undecided*.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cm_gym.domains.smt.logics import solver_logic

if TYPE_CHECKING:
    import z3


#: total z3 resource units one model check may spend, and the most one decision may take
MODEL_CHECK_RLIMIT = 8_000_000
CALL_RLIMIT = 2_000_000


@dataclass(frozen=True)
class ModelCheck:
    """How many assertions the model makes true, false, or leaves undecided."""

    true: int
    false: int
    undecided: int
    rlimit_used: int = 0

    @property
    def verdict(self) -> str:
        """ "false" when any assertion is false, else "undecided" when any is, else "true"."""
        return "false" if self.false else "undecided" if self.undecided else "true"


def _count(ctx: z3.Context) -> int:
    import z3  # on use (`cm_gym/domains/smt/__init__.py`)

    try:
        return int(z3.Solver(ctx=ctx).statistics().get_key_value("rlimit count"))
    except z3.Z3Exception:
        return 0


class _Decider:
    """Decides closed formulas in one context under a shared resource budget."""

    def __init__(self, ctx: z3.Context, axioms: list[z3.BoolRef], logic: str, budget: int) -> None:
        self.ctx, self.axioms, self.remaining = ctx, axioms, budget
        self.logics = ["auto"] + ([solver_logic(logic)] if solver_logic(logic) != "auto" else [])

    def _unsat(self, formula: z3.BoolRef, logic: str) -> bool:
        import z3  # on use (`cm_gym/domains/smt/__init__.py`)

        if self.remaining <= 0:
            return False
        solver = z3.Solver(ctx=self.ctx) if logic == "auto" else z3.SolverFor(logic, ctx=self.ctx)
        limit = min(CALL_RLIMIT, self.remaining)
        solver.set("rlimit", limit)
        solver.add(*self.axioms)
        solver.add(formula)
        before = _count(self.ctx)
        try:
            answer = solver.check()
        except z3.Z3Exception:
            answer = z3.unknown
        self.remaining -= max(1, min(limit, _count(self.ctx) - before))
        return answer == z3.unsat

    def decide(self, formula: z3.BoolRef) -> bool | None:
        """True / False when z3 settles `formula` under the axioms, None when it cannot."""
        import z3  # on use (`cm_gym/domains/smt/__init__.py`)

        for logic in self.logics:
            if self._unsat(z3.Not(formula), logic):
                return True
        for logic in self.logics:
            if self._unsat(formula, logic):
                return False
        return None


def _universe(model: z3.ModelRef, ctx: z3.Context) -> tuple[list[tuple[z3.ExprRef, z3.ExprRef]], list]:
    """Substitutions (universe element → fresh constant) and the finite-universe axioms."""
    import z3  # on use (`cm_gym/domains/smt/__init__.py`)

    subs: list[tuple[z3.ExprRef, z3.ExprRef]] = []
    axioms: list[z3.BoolRef] = []
    for sort in model.sorts():
        elements = model.get_universe(sort) or []
        if not elements:
            continue
        fresh = [z3.Const(f"cm!universe!{len(subs) + i}", sort) for i in range(len(elements))]
        subs.extend(zip(elements, fresh, strict=True))
        x = z3.Const("cm!universe!x", sort)
        axioms.append(z3.ForAll([x], z3.Or([x == e for e in fresh])))
        if len(fresh) > 1:
            axioms.append(z3.Distinct(*fresh))
    return subs, axioms


def decide_model(
    model: z3.ModelRef,
    assertions: Sequence[z3.BoolRef],
    ctx: z3.Context,
    *,
    logic: str = "auto",
    rlimit: int = MODEL_CHECK_RLIMIT,
) -> ModelCheck:
    """Evaluate every assertion in `model`; decide the closed formulas left over (see module doc).
    `logic` adds z3's solver for that logic as a second decision procedure."""
    import z3  # on use (`cm_gym/domains/smt/__init__.py`)

    true = false = 0
    open_: list[z3.BoolRef] = []
    for assertion in assertions:
        value = model.eval(assertion, model_completion=True)
        if z3.is_true(value):
            true += 1
        elif z3.is_false(value):
            false += 1
        else:
            open_.append(value)
    if not open_ or false:
        return ModelCheck(true, false, len(open_))
    subs, axioms = _universe(model, ctx)
    if subs:
        open_ = [z3.substitute(v, *subs) for v in open_]
    decider = _Decider(ctx, axioms, logic, rlimit)
    if len(open_) > 1 and decider.decide(z3.And(*open_)) is True:  # usually one call settles all
        return ModelCheck(true + len(open_), 0, 0, rlimit - decider.remaining)
    undecided = 0
    for value in open_:
        answer = decider.decide(value)
        if answer is None:
            undecided += 1
        elif answer:
            true += 1
        else:
            false += 1
            break  # one false assertion settles the verdict
    return ModelCheck(true, false, undecided, rlimit - decider.remaining)
