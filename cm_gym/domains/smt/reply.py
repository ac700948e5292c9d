"""An SMT action inside a reply's prose, and the canonical form of an SMT action.

The action is an SMT-LIB v2 script (``(declare-const …)``, ``(assert …)``, ``(check-sat)``) or
``key: value`` lines of a z3 configuration (``logic``, ``tactic``, ``rlimit``). The recogniser
collects every top-level s-expression whose head is an SMT-LIB command, in order, skipping the
prose between them ("First declare the variables: (declare-const x Int) …"); a command cut off
at the end of the reply runs to the end (the world model reports the missing ``)``). One pass over
the text, strings ``"…"``, quoted symbols ``|…|`` and ``;`` comments respected. Two scripts are the
same when they hold the same multiset of commands (each normalised by the s-expression reader).
"""

from __future__ import annotations

from cm_gym.domains.reply import line_run
from cm_gym.domains.smt.solver import CONFIG_KEYS

COMMANDS = frozenset(
    [
        "assert",
        "check-sat",
        "check-sat-assuming",
        "declare-const",
        "declare-datatype",
        "declare-datatypes",
        "declare-fun",
        "declare-sort",
        "define-const",
        "define-fun",
        "define-fun-rec",
        "define-funs-rec",
        "define-sort",
        "echo",
        "exit",
        "get-assertions",
        "get-assignment",
        "get-info",
        "get-model",
        "get-option",
        "get-proof",
        "get-unsat-assumptions",
        "get-unsat-core",
        "get-value",
        "pop",
        "push",
        "reset",
        "reset-assertions",
        "set-info",
        "set-logic",
        "set-option",
        "minimize",
        "maximize",
    ]
)


def _head(text: str, i: int) -> str:
    """The command word after the ``(`` at `i` (letters, digits, ``-``)."""
    j = i + 1
    while j < len(text) and text[j] in " \t":
        j += 1
    k = j
    while k < len(text) and (text[k].isalnum() or text[k] == "-"):
        k += 1
    return text[j:k]


def _sexpr_end(text: str, i: int) -> int:
    """The end (exclusive) of the balanced s-expression opening at `i`, or len(text) if cut."""
    depth, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == ";":
            nl = text.find("\n", i)
            i = n if nl == -1 else nl
            continue
        if ch in '"|':
            close = text.find(ch, i + 1)
            while ch == '"' and close != -1 and text.startswith('""', close):
                close = text.find('"', close + 2)
            i = n if close == -1 else close + 1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def find_script(text: str) -> str | None:
    """The SMT-LIB commands stated in `text`, one per line, or None."""
    found: list[str] = []
    i = text.find("(")
    while i != -1:
        if _head(text, i) in COMMANDS:
            end = _sexpr_end(text, i)
            found.append(text[i:end].strip())
            i = text.find("(", end)
        else:
            i = text.find("(", i + 1)
    return "\n".join(found) if found else None


def config_line(line: str) -> bool:
    key, sep, value = line.split("#", 1)[0].partition(":")
    return bool(sep) and key.strip().lower() in CONFIG_KEYS and bool(value.strip())


def find_action(text: str) -> str | None:
    """An SMT-LIB script in `text`, else a run of configuration lines, else None."""
    return find_script(text) or line_run(text, config_line, comment=("#",))


def canonical(text: str) -> str:
    """The sorted commands, each rendered by the s-expression reader (whitespace, comments and
    order never count); a configuration's sorted ``key: value`` lines; the collapsed text when
    neither reads."""
    from cm_gym.domains.smt.errors import SexprError
    from cm_gym.domains.smt.sexpr import parse_sexprs, render

    lines = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln]
    if lines and all(config_line(ln) for ln in lines):
        pairs = sorted(
            (k.strip().lower(), " ".join(v.split())) for k, _, v in (ln.partition(":") for ln in lines)
        )
        return "\n".join(f"{k}: {v}" for k, v in pairs)
    try:
        return "\n".join(sorted(render(located.expr) for located in parse_sexprs(text)))
    except SexprError:
        return " ".join(text.split())
