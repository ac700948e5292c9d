"""The SMT domain's simulated-LLM error model: systematic, feature-dependent slips.

Script slips: a strict comparison for inclusive wording and the reverse, ``Real`` declared for a
whole number and ``Int`` for a real amount, a missing ``distinct``, a register width too wide (the
sum no longer wraps at 2^w), the wrap-around sum written as a natural-number sum, and unsigned
order for a signed comparison. Configuration slips: a logic that misleads z3, an rlimit too low,
an rlimit over the allowance, an incomplete tactic, a non-deterministic combinator.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.base import ErrorModel, ErrorOperator
from cm_gym.domains.smt.edits import WRAP_SUM, config_values, is_config, set_config_value

Apply = Callable[[Task, str, np.random.Generator], str | None]
INCLUSIVE_WORDS = ("at least", "no less than", "at most", "no more than", "no later than")
STRICT_WORDS = ("more than", "exceeds", "less than", "below")


def _fam(task: Task) -> str:
    return task.family or str(task.features.get("family", ""))


def _enc(task: Task) -> bool:
    return task.features.get("kind") == "encoding"


def _count(task: Task, words: tuple[str, ...]) -> int:
    text = task.prompt.lower()
    return sum(text.count(w) for w in words)


def _random_line(pattern: str, repl: Callable[[re.Match[str]], str], prefix: str = "(assert") -> Apply:
    """Apply `repl` to one match of `pattern` in one (seeded random) line starting with `prefix`."""
    rx = re.compile(pattern)

    def apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
        lines = action.splitlines()
        sites = [
            (i, m) for i, ln in enumerate(lines) if ln.strip().startswith(prefix) for m in rx.finditer(ln)
        ]
        if not sites:
            return None
        i, m = sites[int(rng.integers(len(sites)))]
        lines[i] = lines[i][: m.start()] + repl(m) + lines[i][m.end() :]
        return "\n".join(lines)

    return apply


_TO_STRICT = {">=": ">", "<=": "<"}
_TO_INCL = {">": ">=", "<": "<="}


def _p_strict(task: Task) -> float:
    if not _enc(task) or _fam(task) not in ("bounds", "integrality", "meetings"):
        return 0.0
    return min(0.5, 0.15 * _count(task, INCLUSIVE_WORDS))


def _p_inclusive(task: Task) -> float:
    if not _enc(task) or _fam(task) not in ("bounds", "meetings"):
        return 0.0
    return min(0.5, 0.15 * _count(task, STRICT_WORDS))


def _p_real_for_int(task: Task) -> float:
    if not _enc(task) or not task.features.get("whole_numbers"):
        return 0.0
    return 0.4 if _fam(task) == "integrality" else 0.05


def _p_int_for_real(task: Task) -> float:
    return 0.45 if _enc(task) and task.features.get("real_numbers") else 0.0


def _p_missing_distinct(task: Task) -> float:
    if not _enc(task) or not task.features.get("has_distinct"):
        return 0.0
    return 0.3 + 0.05 * int(task.features.get("n_vars", 0))


def _p_width(task: Task) -> float:
    return (0.2 if int(task.features.get("bit_width", 0)) == 8 else 0.3) if _fam(task) == "bitvector" else 0.0


def _p_nowrap(task: Task) -> float:
    return 0.25 if _fam(task) == "bitvector" else 0.0


def _p_sign(task: Task) -> float:
    return 0.4 if _fam(task) == "bitvector" and task.features.get("signed_compare") else 0.0


def _sort_slip(old: str, new: str) -> Apply:
    return _random_line(rf"(?<=\s){old}(?=\s*\))", lambda m: new, prefix="(declare-const")


def _drop_distinct(task: Task, action: str, rng: np.random.Generator) -> str | None:
    lines = action.splitlines()
    kept = [ln for ln in lines if not ln.strip().startswith("(assert (distinct")]
    return "\n".join(kept) if len(kept) != len(lines) else None


def _widen(task: Task, action: str, rng: np.random.Generator) -> str | None:
    new, n = re.subn(r"\(_ BitVec (\d+)\)", lambda m: f"(_ BitVec {2 * int(m.group(1))})", action, count=1)
    return new if n else None


# -- configurations -----------------------------------------------------------------------------
def _cfg_p(task: Task, value: float) -> float:
    return value if task.features.get("kind") == "solver" else 0.0


def _set(key: str, value: Callable[[Task], str | None]) -> Apply:
    def apply(task: Task, action: str, rng: np.random.Generator) -> str | None:
        if not is_config(action):
            return None
        new = value(task)
        if new is None or config_values(action).get(key) == new:
            return None
        return set_config_value(action, key, new)

    return apply


MISLEADING_LOGIC = {"QF_LIA": "QF_BV", "QF_LRA": "QF_BV", "QF_BV": "QF_LRA"}


def _wrong_logic(task: Task, action: str, rng: np.random.Generator) -> str | None:
    out = _set("logic", lambda t: MISLEADING_LOGIC.get(str(t.features.get("logic"))))(task, action, rng)
    return None if out is None else set_config_value(out, "tactic", "default")


def _allowance(task: Task) -> int:
    return int(task.features.get("max_rlimit", 0) or 0)


OPERATORS: tuple[ErrorOperator, ...] = (
    ErrorOperator(
        "strict_for_inclusive",
        _p_strict,
        _random_line(r"(?<=\()(>=|<=)(?=\s)", lambda m: _TO_STRICT[m.group(1)]),
    ),
    ErrorOperator(
        "inclusive_for_strict",
        _p_inclusive,
        _random_line(r"(?<=\()(>|<)(?=\s)", lambda m: _TO_INCL[m.group(1)]),
    ),
    ErrorOperator("real_for_int", _p_real_for_int, _sort_slip("Int", "Real")),
    ErrorOperator("int_for_real", _p_int_for_real, _sort_slip("Real", "Int")),
    ErrorOperator("missing_distinct", _p_missing_distinct, _drop_distinct),
    ErrorOperator("bit_width_overflow", _p_width, _widen),
    ErrorOperator(
        "wrap_ignored",
        _p_nowrap,
        _random_line(WRAP_SUM.pattern, lambda m: f"(+ (bv2nat {m.group(1)}) (bv2nat {m.group(2)}))"),
    ),
    ErrorOperator(
        "unsigned_for_signed",
        _p_sign,
        _random_line(r"(?<=\()bvs(lt|le|gt|ge)(?=\s)", lambda m: f"bvu{m.group(1)}"),
    ),
    ErrorOperator("misleading_logic", lambda t: _cfg_p(t, 0.2), _wrong_logic),
    ErrorOperator(
        "rlimit_too_low",
        lambda t: _cfg_p(t, 0.3),
        _set("rlimit", lambda t: str(max(1, _allowance(t) // 50)) if _allowance(t) else None),
    ),
    ErrorOperator(
        "rlimit_over_allowance",
        lambda t: _cfg_p(t, 0.08),
        _set("rlimit", lambda t: str(_allowance(t) * 10) if _allowance(t) else None),
    ),
    ErrorOperator("incomplete_tactic", lambda t: _cfg_p(t, 0.12), _set("tactic", lambda t: "simplify")),
    ErrorOperator(
        "nondeterministic_tactic", lambda t: _cfg_p(t, 0.04), _set("tactic", lambda t: "(par-or smt qflia)")
    ),
)


def error_model() -> ErrorModel:
    """The SMT error model (probabilities depend on the task's family, features and wording)."""
    return ErrorModel(operators=OPERATORS)
