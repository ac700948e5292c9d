"""Generated SMT encoding tasks (benchmark "SMT"): deterministic per seed, with look-alikes.

Families (satisfiability known by construction): ``bounds`` (tight integer bounds worded "at
least" / "more than" / ...), ``integrality`` (whole-number vs real-valued quantities), ``meetings``
(distinct start hours vs meetings that may share an hour), ``digits`` (all-different digit
puzzles) and ``bitvector`` (w-bit registers whose sum wraps around, signed vs unsigned order).
The reference script is one SMT-LIB command per line, so one line is one decision unit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.smt.problems import Problem, bv_width

SMT_PREFIX = "smtgen"
SCRIPT_HELP = (
    "Write an SMT-LIB v2 script: one command per line; allowed commands: set-logic, set-option "
    "(:produce-models), set-info, define-sort, declare-const, declare-fun, define-fun, assert, "
    "check-sat, get-model, get-value. Use the variable names given. Solved = the right sat/unsat "
    "verdict, and for sat a model that satisfies the problem."
)

LOWER = {">=": ("is at least", "is no less than"), ">": ("is more than", "exceeds")}
UPPER = {"<=": ("is at most", "is no more than"), "<": ("is less than", "is below")}


def _lin(coefs: list[int], names: list[str]) -> tuple[str, str]:
    terms = [(c, n) for c, n in zip(coefs, names, strict=True) if c]
    smt = [n if c == 1 else f"(* {c} {n})" for c, n in terms]
    text = " + ".join(n if c == 1 else f"{c}*{n}" for c, n in terms)
    return (smt[0] if len(smt) == 1 else "(+ " + " ".join(smt) + ")"), text


def _bound(
    rng: np.random.Generator, expr: str, text: str, value: int, lower: bool, slack: int = 0
) -> tuple[str, str]:
    """A constraint tight at `value` (off by `slack` to make it infeasible), worded at random."""
    table = LOWER if lower else UPPER
    op = str(rng.choice(list(table)))
    bound = value + slack if lower else value - slack
    if op == ">":
        bound -= 1
    elif op == "<":
        bound += 1
    word = str(rng.choice(table[op]))
    return f"({op} {expr} {bound})", f"{text} {word} {bound}"


def _bounds(rng: np.random.Generator, satisfiable: bool) -> Problem:
    names = ["x", "y", "z"][: int(rng.integers(2, 4))]
    sol = [int(v) for v in rng.integers(1, 10, size=len(names))]
    coefs = [int(c) for c in rng.integers(1, 4, size=len(names))]
    expr, text = _lin(coefs, names)
    total = sum(c * v for c, v in zip(coefs, sol, strict=True))
    cons = [_bound(rng, expr, text, total, True, 0 if satisfiable else 1)]
    cons += [_bound(rng, n, n, v, False) for n, v in zip(names, sol, strict=True)]
    order = [int(i) for i in rng.permutation(len(cons))]
    return Problem(
        "bounds",
        tuple((n, "Int") for n in names),
        tuple(cons[i] for i in order),
        "sat" if satisfiable else "unsat",
        "QF_LIA",
    )


def _integrality(rng: np.random.Generator, whole: bool, satisfiable: bool) -> Problem:
    k = int(rng.integers(2, 5))
    a = k * int(rng.integers(1, 6)) + int(rng.integers(1, k))  # not a multiple of k
    if whole:
        if satisfiable:
            cons = [
                (f"(>= (* {k} x) {a})", f"{k} times x is at least {a}"),
                (f"(<= (* {k} x) {a + k - 1})", f"{k} times x is at most {a + k - 1}"),
            ]
        else:
            cons = [(f"(= (* {k} x) {a})", f"{k} times x equals {a}")]
        prob = Problem(
            "integrality", (("x", "Int"),), tuple(cons), "sat" if satisfiable else "unsat", "QF_LIA"
        )
        return _with_note(prob, "x is a whole number (an integer count).")
    b = int(rng.integers(2, 9))
    cons = [(f"(= (* {k} x) {a})", f"{k} times x equals {a}"), (f"(= (+ x y) {b})", f"x + y equals {b}")]
    prob = Problem("integrality", (("x", "Real"), ("y", "Real")), tuple(cons), "sat", "QF_LRA")
    return _with_note(prob, "x and y are real-valued amounts (fractions allowed).")


def _with_note(problem: Problem, note: str) -> Problem:
    return Problem(
        problem.family,
        problem.variables,
        (("true", note), *problem.constraints),
        problem.expected,
        problem.logic,
    )


def _meetings(rng: np.random.Generator, distinct: bool, satisfiable: bool) -> Problem:
    n = int(rng.integers(3, 6))
    names = list("abcde"[:n])
    hours = n if distinct and satisfiable else n - 1
    cons = [
        (f"(and (<= 0 {m}) (<= {m} {hours - 1}))", f"meeting {m} starts at an hour in 0..{hours - 1}")
        for m in names
    ]
    if distinct:
        plant = (
            [int(h) for h in rng.permutation(n)]
            if satisfiable
            else [int(h) for h in rng.integers(0, hours, size=n)]
        )
        cons.append(("(distinct " + " ".join(names) + ")", "no two meetings start at the same hour"))
    else:
        plant = [int(h) for h in rng.integers(0, hours, size=n)]
    order = sorted(range(n), key=lambda i: plant[i])
    for _ in range(2):
        i, j = sorted(int(v) for v in rng.choice(n, size=2, replace=False))
        a, b = names[order[i]], names[order[j]]
        if plant[order[i]] < plant[order[j]]:
            cons.append((f"(< {a} {b})", f"meeting {a} starts before meeting {b}"))
        else:
            cons.append((f"(<= {a} {b})", f"meeting {a} starts no later than meeting {b}"))
    exp = "sat" if satisfiable else "unsat"
    prob = Problem("meetings", tuple((m, "Int") for m in names), tuple(dict.fromkeys(cons)), exp, "QF_LIA")
    note = "Start hours are integers." + (
        "" if distinct else " Meetings may share an hour (they run in parallel rooms)."
    )
    return _with_note(prob, note)


def _digits(rng: np.random.Generator) -> Problem:
    digits = [int(d) for d in rng.choice(np.arange(1, 10), size=4, replace=False)]
    names = ["a", "b", "c", "d"]
    cons = [(f"(and (<= 1 {n}) (<= {n} 9))", f"{n} is a digit from 1 to 9") for n in names]
    cons.append(("(distinct a b c d)", "the four digits are all different"))
    cons.append((f"(= (+ a b c d) {sum(digits)})", f"a + b + c + d equals {sum(digits)}"))
    cons.append((f"(= (+ a b) {digits[0] + digits[1]})", f"a + b equals {digits[0] + digits[1]}"))
    if rng.random() < 0.5:
        rel, word = ("<", "less than") if digits[0] < digits[2] else (">", "greater than")
        cons.append((f"({rel} a c)", f"a is {word} c"))
    return Problem("digits", tuple((n, "Int") for n in names), tuple(cons), "sat", "QF_LIA")


def _bitvector(rng: np.random.Generator, signed: bool, satisfiable: bool) -> Problem:
    w = int(rng.choice([8, 16]))
    half, full = 1 << (w - 1), 1 << w
    if signed:  # x is non-negative, y negative as two's complement: signed and unsigned order differ
        x0, y0 = int(rng.integers(1, half)), int(rng.integers(half, full))
    else:  # both in the upper half, so the sum wraps around
        x0, y0 = (int(v) for v in rng.integers(half, full, size=2))
    wrap = (x0 + y0) % full
    cons = [(f"(= (bv2nat (bvadd x y)) {wrap})", f"the {w}-bit sum x + y (wrapping around) equals {wrap}")]
    if signed:
        cons.append((f"(< (bv2nat x) {half})", f"x is below {half} as an unsigned number"))
        cons.append((f"(>= (bv2nat y) {half})", f"y is at least {half} as an unsigned number"))
        cons.append(("(bvslt y x)", "y is less than x as signed (two's complement) numbers"))
    else:
        cons.append((f"(>= (bv2nat x) {half})", f"x is at least {half} as an unsigned number"))
        cons.append((f"(>= (bv2nat y) {half})", f"y is at least {half} as an unsigned number"))
        a, b = ("x", "y") if x0 <= y0 else ("y", "x")
        cons.append(
            (
                f"({'bvult' if x0 != y0 else 'bvule'} {a} {b})",
                f"{a} is {'less than' if x0 != y0 else 'at most'} {b} as unsigned numbers",
            )
        )
    if rng.random() < 0.5:
        m = x0 & ~y0 & (full - 1)
        cons.append((f"(= (bv2nat (bvand x (bvnot y))) {m})", f"x AND NOT y equals {m}"))
    if not satisfiable:
        cons.append((f"(<= (bv2nat x) {half - 1})", f"x is at most {half - 1} as an unsigned number"))
    prob = Problem(
        "bitvector",
        (("x", f"BV{w}"), ("y", f"BV{w}")),
        tuple(cons),
        "sat" if satisfiable else "unsat",
        "QF_BV",
    )
    return _with_note(prob, f"x and y are {w}-bit registers; arithmetic wraps around modulo 2^{w}.")


def reference_script(problem: Problem) -> str:
    """A correct SMT-LIB script for `problem`, one command per line."""
    lines = [f"(set-logic {problem.logic})"]
    widths = {bv_width(s) for _, s in problem.variables} - {None}
    if widths:
        lines.append(f"(define-sort Word () (_ BitVec {widths.pop()}))")
    for name, sort in problem.variables:
        lines.append(f"(declare-const {name} {'Word' if bv_width(sort) else sort})")
    lines += [f"(assert {term})" for term, _ in problem.constraints if term != "true"]
    return "\n".join([*lines, "(check-sat)", "(get-model)"])


def statement(problem: Problem) -> str:
    """The problem in words (the task prompt)."""
    notes = [e for t, e in problem.constraints if t == "true"]
    rules = [e for t, e in problem.constraints if t != "true"]
    names = ", ".join(n for n, _ in problem.variables)
    head = f"Find values for {names} such that: " + "; ".join(rules) + "."
    tail = " Decide whether such values exist (report unsat when they do not)."
    return " ".join([*notes, head]) + tail


def _features(problem: Problem) -> dict[str, Any]:
    sorts = [s for _, s in problem.variables]
    text = " ".join(t for t, _ in problem.constraints)
    return {
        "kind": "encoding",
        "family": problem.family,
        "logic": problem.logic,
        "n_vars": len(sorts),
        "n_constraints": sum(1 for t, _ in problem.constraints if t != "true"),
        "whole_numbers": "Int" in sorts,
        "real_numbers": "Real" in sorts,
        "bit_width": next((bv_width(s) for s in sorts if bv_width(s)), 0),
        "uses_bitvectors": any(bv_width(s) for s in sorts),
        "has_distinct": "distinct" in text,
        "signed_compare": "bvs" in text,
        "has_nonlinear": False,
    }


def make_smt_task(task_id: str, problem: Problem) -> Task:
    """One encoding task for a problem (used by the generator and by tests)."""
    decl = "; ".join(
        f"{n}: {s if not bv_width(s) else f'(_ BitVec {bv_width(s)})'}" for n, s in problem.variables
    )
    return Task(
        task_id=task_id,
        domain="smt",
        prompt=statement(problem),
        env_id=f"{SMT_PREFIX}/{problem.family}",
        reference=reference_script(problem),
        context=f"variables: {decl}\nsuggested logic: {problem.logic}\n\n{SCRIPT_HELP}",
        family=problem.family,
        features=_features(problem),
        meta={"problem": problem.to_json(), "expected": problem.expected},
    )


def generate_smt_tasks(seed: int = 0) -> list[Task]:
    """The 310 generated SMT encoding tasks, in a fixed order, deterministic for `seed`."""
    plan: list[Callable[[np.random.Generator], Problem]] = []
    plan += [lambda r: _bounds(r, True)] * 64 + [lambda r: _bounds(r, False)] * 16
    plan += [lambda r: _integrality(r, True, True)] * 20 + [lambda r: _integrality(r, True, False)] * 10
    plan += [lambda r: _integrality(r, False, True)] * 30
    plan += [lambda r: _meetings(r, True, True)] * 30 + [lambda r: _meetings(r, True, False)] * 10
    plan += [lambda r: _meetings(r, False, True)] * 20
    plan += [_digits] * 40
    plan += [lambda r: _bitvector(r, False, True)] * 30 + [lambda r: _bitvector(r, True, True)] * 30
    plan += [lambda r: _bitvector(r, False, False)] * 10
    return [
        make_smt_task(f"{SMT_PREFIX}-{i:05d}", make(np.random.default_rng([seed, i])))
        for i, make in enumerate(plan)
    ]
