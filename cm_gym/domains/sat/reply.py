"""A SAT action inside a reply's prose, and the canonical form of a SAT action.

The action is constraint lines of the encoding language (a line starts with a constraint head:
``exactly_one``, ``not_both``, ``clause``, …) or ``key: value`` lines of a solver configuration
(``solver``, ``phase``, ``preprocess``, ``budget``) — not DIMACS, which no SAT task takes. The
recogniser returns the first run of such lines (``#`` comments and blank lines inside it kept).
Two actions are the same when they hold the same set of constraint lines (a CNF conjunction does
not depend on its order; whitespace and comments never count) or the same configuration.
"""

from __future__ import annotations

from cm_gym.domains.reply import line_run, word_at
from cm_gym.domains.sat.language import HEADS
from cm_gym.domains.sat.solver import CONFIG_KEYS

_HEADS = frozenset(HEADS)


def config_pair(line: str) -> tuple[str, str] | None:
    """``(key, value)`` of a ``key: value`` (or ``key = value``) line with a configuration key."""
    body = line.split("#", 1)[0]
    for sep in (":", "="):
        key, found, value = body.partition(sep)
        if found and key.strip().lower() in CONFIG_KEYS and value.strip() and len(value.split()) == 1:
            return key.strip().lower(), value.strip().lower()
    return None


def action_line(line: str) -> bool:
    """A constraint line of the encoding language or a configuration line."""
    s = line.strip()
    return word_at(s, 0) in _HEADS or config_pair(s) is not None


def find_action(text: str) -> str | None:
    """The first run of constraint or configuration lines in `text`, or None."""
    return line_run(text, action_line, comment=("#",))


def canonical(text: str) -> str:
    """Sorted, de-duplicated constraint lines (comments dropped, whitespace collapsed), or the
    sorted ``key: value`` pairs of a configuration."""
    lines = [" ".join(line.split("#", 1)[0].split()) for line in text.splitlines()]
    lines = [line for line in lines if line]
    pairs = [config_pair(line) for line in lines]
    if lines and all(p is not None for p in pairs):
        return "\n".join(f"{k}: {v}" for k, v in sorted(dict(p for p in pairs if p).items()))
    return "\n".join(sorted(set(lines)))
