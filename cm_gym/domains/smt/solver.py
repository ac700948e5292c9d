"""Run z3 deterministically: a fresh context per check, a resource limit (``rlimit``), never a
wall-clock timeout. Also the solver-configuration action of SMT-LIB tasks::

    logic: QF_LIA                  # any SMT-LIB logic name (z3's SolverFor where z3 has it), or auto
    tactic: (then simplify smt)    # default, a tactic name, or then / or-else / repeat of them
    rlimit: 2000000                # z3 resource units; must not exceed the task's allowance

Non-deterministic combinators (``par-or``, ``par-then``, ``try-for``) are refused, and so are the
built-in strategies that run ``try_for`` inside z3 (`WALL_CLOCK_TACTICS`: ``qflia``'s ILP model
finder, the ``qfnia`` / ``qfnra`` portfolios, which give up a sub-strategy after so many
milliseconds of wall clock, so that their answer and rlimit count depend on machine load). For the
same reason ``tactic: default`` on a logic whose z3 strategy holds such portfolios
(`wall_clock_logic`: QF_LIA, the non-linear logics, and ``auto``, where z3 picks the strategy by
probing the formula) is z3's SMT core (``SimpleSolver``) rather than ``SolverFor``; on the other
logics it is ``SolverFor(logic)`` as before (issue 25: measured load-independent).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from cm_gym.domains.smt.errors import ScriptError, SexprError, SmtConfigError, SmtConfigRefused
from cm_gym.domains.smt.logics import is_logic_name, solver_logic
from cm_gym.domains.smt.sexpr import Sexpr, parse_sexprs, render

if TYPE_CHECKING:
    import z3


TACTICS = (
    "smt",
    "simplify",
    "sat",
    "bit-blast",
    "solve-eqs",
    "propagate-values",
    "ctx-simplify",
    "elim-uncnstr",
    "qflia",  # listed so that a config naming it is refused with the reason, not as unknown
    "qflra",
    "qfbv",
    "qfidl",
    "qfnia",
    "qfnra",
    "nlsat",
    "lia2card",
    "purify-arith",
    "normalize-bounds",
    "max-bv-sharing",
    "aig",
    "tseitin-cnf",
    "elim-term-ite",
    "propagate-ineqs",
    "skip",
)
COMBINATORS = ("then", "or-else", "repeat")
#: z3 strategies with wall-clock ``try_for`` inside (see the module docstring): refused
WALL_CLOCK_TACTICS = frozenset({"qflia", "qfnia", "qfnra"})
REFUSED_COMBINATORS = ("par-or", "par-then", "try-for", "cond", "fail-if", "using-params")
CONFIG_KEYS = ("logic", "tactic", "rlimit")
MAX_RLIMIT = 200_000_000
MEMORY_MAX_MB = 2048
_memory_capped = False


def cap_memory(megabytes: int = MEMORY_MAX_MB) -> None:
    """Set z3's global ``memory_max_size`` once per process (a solver run cannot exhaust RAM)."""
    import z3  # on use (`cm_gym/domains/smt/__init__.py`)

    global _memory_capped
    if not _memory_capped:
        z3.set_param("memory_max_size", megabytes)
        _memory_capped = True


@dataclass(frozen=True)
class SmtConfig:
    """A parsed solver configuration."""

    logic: str = "auto"
    tactic: str = "default"
    rlimit: int = 1_000_000

    def render(self) -> str:
        """The configuration as action text (parses back to the same config)."""
        return f"logic: {self.logic}\ntactic: {self.tactic}\nrlimit: {self.rlimit}"


@dataclass
class RunResult:
    """A z3 run: verdict "sat" / "unsat" / "unknown", the reason for unknown, the resources used."""

    verdict: str
    reason: str
    rlimit_used: int
    solver: Any
    ctx: Any
    assertions: Any


@lru_cache(maxsize=4096)  # pure; actions repeat (drafts, revisions, every check of a folder)
def parse_config(text: str) -> SmtConfig:
    """Parse a configuration action (`SmtConfigError` / `SmtConfigRefused` on bad input)."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z_]+)\s*[:=]\s*(.+)", line)
        if m is None:
            raise SmtConfigError(f"line {number}: expected 'key: value', got {line[:60]!r}")
        key = m.group(1).lower()
        if key not in CONFIG_KEYS:
            raise SmtConfigError(f"line {number}: unknown key {key!r}; keys: {', '.join(CONFIG_KEYS)}")
        if key in values:
            raise SmtConfigError(f"line {number}: {key!r} given twice")
        values[key] = m.group(2).strip()
    if "rlimit" not in values:
        raise SmtConfigError("a configuration needs 'rlimit:' (z3 resource units)")
    logic = values.get("logic", "auto")
    if not is_logic_name(logic):
        raise SmtConfigError(
            f"unknown logic {logic!r}: give auto or an SMT-LIB logic name (QF_LIA, QF_BV, AUFLIA, LRA, ...)"
        )
    raw_limit = values["rlimit"].replace("_", "").replace(",", "")
    if not raw_limit.isdigit() or int(raw_limit) <= 0:
        raise SmtConfigError(f"rlimit must be a positive integer, got {values['rlimit']!r}")
    rlimit = int(raw_limit)
    if rlimit > MAX_RLIMIT:
        raise SmtConfigRefused(f"rlimit {rlimit} exceeds the sandbox maximum of {MAX_RLIMIT}")
    tactic = values.get("tactic", "default").strip()
    if tactic != "default":
        _tactic_tree(tactic)  # validate now
    return SmtConfig(logic, tactic, rlimit)


def _tactic_tree(text: str) -> Sexpr:
    try:
        exprs = parse_sexprs(f"({text})", max_chars=2000, max_tokens=200)
    except SexprError as exc:
        raise SmtConfigError(f"malformed tactic {text!r}: {exc}") from None
    items = exprs[0].expr
    if not isinstance(items, list) or len(items) != 1:
        raise SmtConfigError(f"tactic must be one expression, got {text!r}")
    _validate_tactic(items[0])
    return items[0]


def _validate_tactic(t: Sexpr) -> None:
    if isinstance(t, str):
        if t in WALL_CLOCK_TACTICS:
            raise SmtConfigRefused(
                f"tactic {t!r} runs sub-strategies under wall-clock time limits inside z3, so its answer "
                "would depend on machine load; use smt, nlsat or a then / or-else of deterministic tactics"
            )
        if t not in TACTICS:
            raise SmtConfigError(f"unknown tactic {t!r}; choose from {', '.join(TACTICS)}")
        return
    if not t or not isinstance(t[0], str):
        raise SmtConfigError(f"malformed tactic {render(t)!r}")
    if t[0] in REFUSED_COMBINATORS:
        raise SmtConfigRefused(f"tactic combinator {t[0]!r} is not allowed (non-deterministic or wall-clock)")
    if t[0] not in COMBINATORS:
        raise SmtConfigError(f"unknown combinator {t[0]!r}; use {', '.join(COMBINATORS)}")
    if (t[0] == "repeat" and len(t) != 2) or (t[0] != "repeat" and len(t) < 3):
        raise SmtConfigError(f"wrong number of arguments in {render(t)!r}")
    for sub in t[1:]:
        _validate_tactic(sub)


def _build_tactic(t: Sexpr, ctx: z3.Context) -> z3.Tactic:
    import z3  # on use (`cm_gym/domains/smt/__init__.py`)

    if isinstance(t, str):
        return z3.Tactic(t, ctx=ctx)
    subs = [_build_tactic(s, ctx) for s in t[1:]]
    if t[0] == "then":
        return z3.Then(*subs, ctx=ctx)
    if t[0] == "or-else":
        return z3.OrElse(*subs, ctx=ctx)
    return z3.Repeat(subs[0], ctx=ctx)


def wall_clock_logic(logic: str) -> bool:
    """Whether z3's own strategy for `logic` (what ``tactic: default`` would run) holds
    sub-strategies under wall-clock limits: QF_LIA (``qflia``), the non-linear integer and real
    logics, and ``auto`` (z3 then probes the formula and may pick one of those)."""
    name = solver_logic(logic)
    return name in ("auto", "QF_LIA") or any(part in name for part in ("NIA", "NRA", "NIRA"))


def make_solver(config: SmtConfig, ctx: z3.Context) -> z3.Solver:
    """The z3 solver a configuration asks for (in `ctx`), with its resource limit set."""
    import z3  # on use (`cm_gym/domains/smt/__init__.py`)

    if config.tactic != "default":
        solver = _build_tactic(_tactic_tree(config.tactic), ctx).solver()
    elif wall_clock_logic(config.logic):
        solver = z3.SimpleSolver(ctx=ctx)  # the SMT core: no strategy portfolio, no timers
    else:
        solver = z3.SolverFor(solver_logic(config.logic), ctx=ctx)
    solver.set("rlimit", config.rlimit)
    return solver


def run(text: str, config: SmtConfig) -> RunResult:
    """Parse SMT-LIB `text` into a fresh context and check it under `config` (deterministic)."""
    import z3  # on use (`cm_gym/domains/smt/__init__.py`)

    cap_memory()
    ctx = z3.Context()
    try:
        assertions = z3.parse_smt2_string(text, ctx=ctx)
    except z3.Z3Exception as exc:
        raise ScriptError(f"z3 rejected the script: {_z3_message(exc)}") from None
    solver = make_solver(config, ctx)
    solver.add(assertions)
    answer = solver.check()
    stats = solver.statistics()
    try:
        used = int(stats.get_key_value("rlimit count"))
    except z3.Z3Exception:
        used = 0
    verdict = str(answer)
    reason = solver.reason_unknown() if verdict == "unknown" else ""
    return RunResult(verdict, reason, used, solver, ctx, assertions)


def hit_limit(result: RunResult) -> bool:
    """True when an "unknown" came from the resource limit (or cancellation), not incompleteness."""
    reason = result.reason.lower()
    return result.verdict == "unknown" and ("resource" in reason or "limit" in reason or "cancel" in reason)


def _z3_message(exc: z3.Z3Exception) -> str:
    value = exc.value if hasattr(exc, "value") else str(exc)
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return " ".join(text.split())[:300]


def const_for(name: str, sort: str, ctx: z3.Context) -> z3.ExprRef | None:
    """The z3 constant `name` of an SMT-LIB sort text (Int, Real, Bool, (_ BitVec w)), or None."""
    import z3  # on use (`cm_gym/domains/smt/__init__.py`)

    if sort == "Int":
        return z3.Int(name, ctx)
    if sort == "Real":
        return z3.Real(name, ctx)
    if sort == "Bool":
        return z3.Bool(name, ctx)
    m = re.fullmatch(r"\(_ BitVec (\d+)\)", sort)
    return z3.BitVec(name, int(m.group(1)), ctx) if m else None


def python_value(value: z3.ExprRef) -> int | Fraction | bool | None:
    """A model value as a Python int / Fraction / bool (None for irrational or other values)."""
    import z3  # on use (`cm_gym/domains/smt/__init__.py`)

    if z3.is_int_value(value) or z3.is_bv_value(value):
        return int(value.as_long())
    if z3.is_rational_value(value):
        return Fraction(value.numerator_as_long(), value.denominator_as_long())
    if z3.is_true(value) or z3.is_false(value):
        return z3.is_true(value)
    return None
