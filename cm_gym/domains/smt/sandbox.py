"""The SMT-LIB script sandbox: only a whitelist of commands reaches z3.

Allowed: ``set-logic``, ``set-option`` (only ``:produce-models``, ``:produce-assignments``,
``:print-success``), ``set-info``, ``define-sort``, ``declare-const``, ``declare-fun``, ``define-fun``,
``assert``, one ``check-sat`` and, after it, ``get-model`` / ``get-value``. Everything else —
``exit``, ``reset``, ``push`` / ``pop``, ``include``, ``check-sat-assuming``, options that change
limits, recursive definitions, asserts after ``check-sat`` — is refused with a reason (a scored
`Outcome`, never an exception to the caller). Caps on the text (characters, tokens, nesting) and on
what its terms expand to (`termsize`: bit-widths however made, let/define-fun inlining,
multiplier sizes, exponents, loop counts, string lengths) keep a huge problem from reaching z3.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cm_gym.domains.smt.errors import ScriptError, ScriptRefused, SexprError
from cm_gym.domains.smt.sexpr import Sexpr, parse_sexprs, render
from cm_gym.domains.smt.termsize import MAX_BV_WIDTH, MAX_NUMERAL_DIGITS, measure

__all__ = ["MAX_BV_WIDTH", "MAX_NUMERAL_DIGITS", "VettedScript", "vet_script"]

MAX_SCRIPT_CHARS = 20_000
MAX_SCRIPT_TOKENS = 5_000

ALLOWED = (
    "set-logic",
    "set-option",
    "set-info",
    "define-sort",
    "declare-const",
    "declare-fun",
    "define-fun",
    "assert",
    "check-sat",
    "get-model",
    "get-value",
)
ALLOWED_OPTIONS = (":produce-models", ":produce-assignments", ":print-success")
REFUSAL_REASONS = {
    "exit": "(exit) is not allowed: the world model decides when the script ends",
    "reset": "(reset) is not allowed: the script must be one non-incremental problem",
    "reset-assertions": "(reset-assertions) is not allowed: the script must be one non-incremental problem",
    "push": "push/pop (incremental solving) is not allowed",
    "pop": "push/pop (incremental solving) is not allowed",
    "include": "(include) is not allowed: the script may not read files",
    "check-sat-assuming": "check-sat-assuming is not allowed: state the assumptions as assertions",
    "define-fun-rec": "recursive definitions are not allowed",
    "define-funs-rec": "recursive definitions are not allowed",
}
_BODY_COMMANDS = ("define-sort", "declare-const", "declare-fun", "define-fun", "assert")


@dataclass(frozen=True)
class VettedScript:
    """A script the sandbox accepted: the declaration/assertion body z3 will read, the logic it
    names, and the sort of each declared constant (aliases from ``define-sort`` resolved)."""

    body: str
    logic: str | None
    declared: dict[str, str] = field(default_factory=dict)
    n_asserts: int = 0


def _resolve(sort: Sexpr, aliases: dict[str, Sexpr]) -> str:
    for _ in range(10):
        if isinstance(sort, str) and sort in aliases:
            sort = aliases[sort]
        else:
            break
    return render(sort)


def vet_script(text: str) -> VettedScript:
    """Check `text` against the sandbox rules; `ScriptRefused` for forbidden content,
    `ScriptError` for malformed text."""
    if len(text) > MAX_SCRIPT_CHARS:
        raise ScriptRefused(f"the script has {len(text)} characters; the limit is {MAX_SCRIPT_CHARS}")
    try:
        commands = parse_sexprs(text, max_chars=MAX_SCRIPT_CHARS, max_tokens=MAX_SCRIPT_TOKENS)
    except SexprError as exc:
        if "tokens" in str(exc) or "deeper" in str(exc):
            raise ScriptRefused(f"the script is too large: {exc}") from None
        raise ScriptError(f"malformed SMT-LIB: {exc}") from None
    if not commands:
        raise ScriptError("the script has no commands")
    logic: str | None = None
    body: list[str] = []
    aliases: dict[str, Sexpr] = {}
    declared: dict[str, str] = {}
    seen_check = False
    n_asserts = 0
    for cmd in commands:
        expr, line = cmd.expr, cmd.line
        if not isinstance(expr, list) or not expr or not isinstance(expr[0], str):
            raise ScriptError(f"line {line}: expected a command such as (assert ...)")
        name = expr[0]
        if name in REFUSAL_REASONS:
            raise ScriptRefused(f"line {line}: {REFUSAL_REASONS[name]}")
        if name not in ALLOWED:
            raise ScriptRefused(
                f"line {line}: command {name!r} is not allowed; allowed: {', '.join(ALLOWED)}"
            )
        if name == "check-sat":
            if seen_check:
                raise ScriptRefused(f"line {line}: only one (check-sat) is allowed")
            seen_check = True
            continue
        if seen_check and name in _BODY_COMMANDS:
            raise ScriptRefused(
                f"line {line}: ({name} ...) after (check-sat) (incremental use) is not allowed"
            )
        if name == "set-option":
            if len(expr) < 2 or expr[1] not in ALLOWED_OPTIONS:
                shown = render(expr[1]) if len(expr) > 1 else ""
                raise ScriptRefused(
                    f"line {line}: option {shown!r} is not allowed; allowed: {', '.join(ALLOWED_OPTIONS)}"
                )
            continue
        if name == "set-logic":
            if len(expr) != 2 or not isinstance(expr[1], str):
                raise ScriptError(f"line {line}: (set-logic LOGIC) takes one symbol")
            logic = expr[1]
            continue
        if name in ("set-info", "get-model", "get-value"):
            continue
        if name == "define-sort" and len(expr) == 4 and isinstance(expr[1], str):
            aliases[expr[1]] = expr[3]
        if name == "declare-const" and len(expr) == 3 and isinstance(expr[1], str):
            declared[expr[1]] = _resolve(expr[2], aliases)
        if name == "declare-fun" and len(expr) == 4 and isinstance(expr[1], str) and expr[2] == []:
            declared[expr[1]] = _resolve(expr[3], aliases)
        if name == "assert":
            n_asserts += 1
        body.append(render(expr))
    measure(commands)
    return VettedScript("\n".join(body), logic, declared, n_asserts)
