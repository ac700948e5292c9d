"""Evaluator options from the command line (``--evaluator-option KEY=VALUE``), checked by type and
range against the evaluator they configure, and split into the harmless ones and those that weaken
a guard (issue 33).

Every domain's ``make_evaluator(**options)`` takes keyword arguments: budgets, limits, timeouts,
worker counts, isolation switches. They are read from the evaluator itself (`check_options`): the
parameters of its class and the values a default instance holds, so a new domain needs no table
here. The rules, in order:

- the name must be a parameter of the evaluator; the value a single JSON value (a list or an
  object is refused: no evaluator option is a container, and ``limits`` objects cannot come from
  a command line), of the parameter's kind (a bool is not a number, a float not an int), and a
  number must be finite and positive (``rlimit=0`` means *no* limit to z3; a negative budget makes
  every honest action "infrastructure");
- a number more than `ABSURD_FACTOR` times its default (``workers=100000``, ``budget_s=1e300``)
  is refused outright;
- a guard is *weakened* by a number above its default (every option but `LOWER_IS_WEAKER` is a
  budget, a limit, a timeout or a resource count), by a number whose default is derived per task
  or machine (it cannot be compared, so it counts as weakening), by a bool switched away from its
  default (``isolated=false``, ``partial_credit=true``), by a string outside the option's safe
  values (``isolation=none``), or by a null that replaces a value. Weakening options are refused
  unless the caller allows them (``--unsafe-evaluator-options``), and then recorded in the results;
- options that only add checks (`STRENGTHENING`: SQL's ``instances``, ``verdict_on_instances``)
  and labels (`LABELS`: ``instance_seed``) are type- and range-checked but never weakening; a
  default of 0 ("off") scales the absurd-value check as 1.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cm_gym.core.types import CmGymError

#: a number this many times its default is nonsense, refused even with unsafe options allowed
ABSURD_FACTOR = 1000
#: numeric options where a *smaller* value is the weaker check (fewer digits compared)
LOWER_IS_WEAKER = frozenset({"digits"})
#: options that add checks (SQL's database variants and verdicts on them): a value away from the
#: default never weakens a guard, it only costs more (the range checks still apply)
STRENGTHENING = frozenset({"instances", "verdict_on_instances"})
#: integer options that name rather than bound (a seed): any non-negative integer, never weakening
LABELS = frozenset({"instance_seed"})
#: string options → the values that keep every guard (None: any value the evaluator accepts)
SAFE_STRINGS: Mapping[str, frozenset[str] | None] = {
    "isolation": frozenset({"auto", "worker"}),
    "encoding_solver": None,
}
#: options whose effective default the evaluator holds under another attribute path
DEFAULT_ATTRIBUTES: Mapping[str, str] = {
    "hang_guard_s": "budget_s",
    "cpu_s": "verifier.limits.cpu_s",
}


class EvaluatorOptionError(CmGymError, ValueError):
    """An evaluator option of the wrong name, type or range, or one that weakens a guard."""


@dataclass(frozen=True)
class OptionReport:
    """The outcome of `check_options`: the options, and one line per option that weakens a guard."""

    options: dict[str, Any]
    weakening: tuple[str, ...]


def _attribute(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _default(evaluator: Any, name: str, param: inspect.Parameter) -> Any:
    """What the evaluator uses when `name` is not given: its attribute of that name when it holds
    a value of the parameter's kind, else the parameter's declared default."""
    declared = param.default if param.default is not inspect.Parameter.empty else None
    held = _attribute(evaluator, DEFAULT_ATTRIBUTES.get(name, name))
    numeric = isinstance(held, (int, float)) and not isinstance(held, bool)
    if numeric and (
        declared is None or (isinstance(declared, (int, float)) and not isinstance(declared, bool))
    ):
        return held
    return declared


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return (
        "a list"
        if isinstance(value, list)
        else "an object"
        if isinstance(value, dict)
        else type(value).__name__
    )


def _check_number(name: str, value: Any, default: Any) -> str | None:
    """Type and range of a numeric option; the weakening line, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EvaluatorOptionError(f"{name} must be a number, got {_kind(value)} ({value!r})")
    if isinstance(default, int) and not isinstance(default, bool) and not isinstance(value, int):
        raise EvaluatorOptionError(f"{name} must be an integer, got {value!r}")
    if not math.isfinite(value):
        raise EvaluatorOptionError(f"{name} must be a finite number, got {value!r}")
    if value <= 0:
        raise EvaluatorOptionError(f"{name} must be positive, got {value!r}")
    if default is None:
        return f"{name}={value!r} replaces a default derived per task or machine (cannot be compared)"
    if value > ABSURD_FACTOR * (default or 1):  # a default of 0 is "off": scale 1
        raise EvaluatorOptionError(
            f"{name}={value!r} is more than {ABSURD_FACTOR} times its default {default!r}: refused"
        )
    if name in LOWER_IS_WEAKER:
        return f"{name}={value!r} is below its default {default!r}" if value < default else None
    return f"{name}={value!r} is above its default {default!r}" if value > default else None


def _check_one(name: str, value: Any, default: Any) -> str | None:
    """Type and range of one option; the line saying how it weakens a guard, or None."""
    if isinstance(value, (list, dict)):
        raise EvaluatorOptionError(f"{name} must be a single value, got {_kind(value)}")
    if name in LABELS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise EvaluatorOptionError(f"{name} must be a non-negative integer, got {value!r}")
        return None
    if name in STRENGTHENING and value is not None:
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise EvaluatorOptionError(f"{name} must be true or false, got {_kind(value)} ({value!r})")
            return None
        if value != default:
            _check_number(name, value, default)  # type and range; more checks are never weaker
        return None
    if value is None:
        return None if default is None else f"{name}=null drops its default {default!r}"
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise EvaluatorOptionError(f"{name} must be true or false, got {_kind(value)} ({value!r})")
        return None if value == default else f"{name}={str(value).lower()} switches a guard from its default"
    if isinstance(default, str) or (isinstance(value, str) and name in SAFE_STRINGS):
        if not isinstance(value, str):
            raise EvaluatorOptionError(f"{name} must be a string, got {_kind(value)} ({value!r})")
        safe = SAFE_STRINGS.get(name, frozenset({default}))
        return None if safe is None or value in safe else f"{name}={value!r} leaves its safe values"
    if isinstance(value, str):
        if isinstance(default, (int, float)):
            raise EvaluatorOptionError(f"{name} must be a number, got a string ({value[:40]!r})")
        return f"{name}={value[:40]!r} (a string option with no known safe values)"
    return _check_number(name, value, default)


def check_options(evaluator: Any, options: Mapping[str, Any]) -> OptionReport:
    """Check `options` against `evaluator` (an instance built with no options): each a parameter of
    its class, of the right type and range (`EvaluatorOptionError` otherwise, naming the option);
    the report lists the options that weaken a guard (see the module doc)."""
    try:
        params = inspect.signature(type(evaluator).__init__).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin-backed evaluator class
        params = {}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    known = [n for n, p in params.items() if n != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD]
    weakening: list[str] = []
    for name, value in options.items():
        if name not in params or name == "self":
            if takes_any:
                weakening.append(f"{name}={value!r} (an option the evaluator does not declare)")
                continue
            raise EvaluatorOptionError(
                f"{type(evaluator).__name__} does not take option {name!r} (it takes: {', '.join(known) or 'none'})"
            )
        line = _check_one(name, value, _default(evaluator, name, params[name]))
        if line is not None:
            weakening.append(line)
    return OptionReport(dict(options), tuple(weakening))
