"""A corpus of hostile SMT inputs (our own writing) for testing the SMT world model's bounds.

`SCRIPTS` are encoding actions a model could submit; every class of huge-term construction is
there (wide bit-vectors by literal, ``(_ bvN w)``, ``zero_extend``, ``sign_extend``, ``repeat``,
``concat``, ``int2bv``; multiplications inside ``repeat``; ``let`` and ``define-fun`` chains that
blow up when expanded; long numerals, exponents, regular-expression loops, string lengths) and the
expected containment: "refused" by the vetting before z3 runs, or "bounded" (z3 runs, and the
check ends within its wall-clock bound). `BENCHMARKS` are SMT-LIB files given as *data* (not
vetted: a dataset is trusted to be SMT-LIB, not to be small) that only the worker's bounds stop.
"""

from __future__ import annotations

from dataclasses import dataclass

from cm_gym.core.types import Task
from cm_gym.domains.smt.problems import Problem


@dataclass(frozen=True)
class Hostile:
    """One probe: its class (for the per-class counts), the text, and the expected containment."""

    name: str
    klass: str
    text: str
    expect: str  # "refused" | "bounded"


def _let_chain(levels: int) -> str:
    body, prev = "", "x"
    for i in range(levels):
        body += f"(let ((v{i} (+ {prev} {prev}))) "
        prev = f"v{i}"
    return f"(declare-const x Int)\n(assert {body}(> {prev} 0){')' * levels})\n(check-sat)"


def _define_chain(levels: int, op: str = "bvadd") -> str:
    lines = ["(declare-const x (_ BitVec 32))"]
    lines.append(f"(define-fun f0 ((y (_ BitVec 32))) (_ BitVec 32) ({op} y y))")
    lines += [
        f"(define-fun f{i} ((y (_ BitVec 32))) (_ BitVec 32) (f{i - 1} (f{i - 1} y)))"
        for i in range(1, levels)
    ]
    lines.append(f"(assert (= (f{levels - 1} x) x))\n(check-sat)")
    return "\n".join(lines)


_BV8 = "(declare-const x (_ BitVec 8))\n(declare-const y (_ BitVec 8))\n"

SCRIPTS: tuple[Hostile, ...] = (
    Hostile(
        "repeat-in-bvmul",
        "bit-width",
        _BV8 + "(assert (= (bvmul ((_ repeat 64) x) ((_ repeat 64) y)) ((_ repeat 64) x)))\n(check-sat)",
        "refused",
    ),
    Hostile(
        "zero-extend",
        "bit-width",
        _BV8 + "(assert (= ((_ zero_extend 100000) x) ((_ zero_extend 100000) y)))",
        "refused",
    ),
    Hostile(
        "sign-extend",
        "bit-width",
        _BV8 + "(assert (bvult ((_ sign_extend 4096) x) ((_ sign_extend 4096) y)))",
        "refused",
    ),
    Hostile(
        "repeat",
        "bit-width",
        _BV8 + "(assert (bvult ((_ repeat 1000000) x) ((_ repeat 1000000) y)))",
        "refused",
    ),
    Hostile(
        "concat",
        "bit-width",
        "(declare-const x (_ BitVec 300))\n(assert (= (concat x x) (concat x (bvnot x))))",
        "refused",
    ),
    Hostile(
        "int2bv",
        "bit-width",
        "(declare-const n Int)\n(assert (= ((_ int2bv 65536) n) ((_ int2bv 65536) 7)))",
        "refused",
    ),
    Hostile("bvN-literal", "bit-width", _BV8 + "(assert (= ((_ extract 7 0) (_ bv1 100000)) x))", "refused"),
    Hostile("hex-literal", "bit-width", _BV8 + f"(assert (= ((_ extract 7 0) #x{'f' * 1000}) x))", "refused"),
    Hostile(
        "wide-multiplier",
        "multiplication",
        "(declare-const x (_ BitVec 256))\n(declare-const y (_ BitVec 256))\n(assert (= (bvmul x y) #x"
        + "3" * 63
        + "5))\n(assert (bvugt x #x"
        + "0" * 63
        + "1))\n(assert (bvugt y #x"
        + "0" * 63
        + "1))",
        "refused",
    ),
    Hostile("let-chain", "expansion", _let_chain(40), "refused"),
    Hostile("define-fun-chain", "expansion", _define_chain(24), "refused"),
    Hostile("define-fun-multiply-chain", "expansion", _define_chain(12, "bvmul"), "refused"),
    Hostile("exponent", "numbers", "(declare-const x Int)\n(assert (= x (^ 3 100000000)))", "refused"),
    Hostile(
        "regex-loop",
        "strings",
        '(declare-const s String)\n(assert (str.in_re s ((_ re.loop 5000000 5000000) (str.to_re "ab"))))',
        "refused",
    ),
    Hostile(
        "string-length", "strings", "(declare-const s String)\n(assert (= (str.len s) 2000000000))", "refused"
    ),
    Hostile(
        "sequence-position",
        "strings",
        '(declare-const s String)\n(assert (= (str.at s 900000000) "a"))',
        "refused",
    ),
    Hostile(
        # factoring a 128-bit semiprime (two random 64-bit primes) without wrap-around: the
        # operands are zero-extended, so modular shortcuts (x * y = N mod 2^128) do not exist
        "factor-128",
        "time",
        "(declare-const x (_ BitVec 64))\n(declare-const y (_ BitVec 64))\n"
        "(assert (= (bvmul ((_ zero_extend 64) x) ((_ zero_extend 64) y)) #x77b99938b644be245dc8a9baf8a9ce79))\n"
        "(assert (bvugt x #x0000000000000001))\n"
        "(assert (bvugt y #x0000000000000001))\n(check-sat)",
        "bounded",
    ),
)

#: SMT-LIB *files* (solver tasks): the vetting does not apply, the worker's bounds do
BENCHMARKS: tuple[Hostile, ...] = (
    Hostile(
        "bit-blast-blowup",
        "time",
        "(set-logic QF_BV)\n(set-info :status sat)\n" + _BV8 + "(assert (bvult (bvmul ((_ repeat 4096) x) "
        "((_ repeat 4096) y)) ((_ repeat 4096) y)))\n(check-sat)\n",
        "bounded",
    ),
)


def hostile_task() -> Task:
    """An encoding task the scripts are submitted against (one bit-vector variable)."""
    from cm_gym.domains.smt.generated import make_smt_task

    problem = Problem("bitvector", (("x", "BV8"),), (("(bvugt x #x07)", "x is above 7"),), "sat", "QF_BV")
    return make_smt_task("smt-hostile", problem)
