"""Machine-checkable applicability conditions c (SPEC §5) and their small grammar.

Text form: predicates joined by `` AND ``; each predicate is ``kind(arg, arg, ...)`` where an arg is
a double-quoted string (JSON escapes; single quotes are tolerated), a bare number or a bare
identifier. ``none`` or empty text means *always applicable*. Example::

    mentions_any("at least", "no fewer than") AND mentions_none("strictly")

The parser is hand-written (no ``eval``). Generic kinds are built in (`GENERIC_PREDICATES`); a
domain adds its own through `Domain.condition_predicates()`. `Condition.holds(task)` needs no LLM.
The canonical text (predicates de-duplicated and sorted, every arg a JSON string) round-trips:
``parse_condition(c.text, preds) == c``.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cm_gym.core.types import CmGymError, Task
from cm_gym.domains.base import PredicateFn

logger = logging.getLogger(__name__)


class ConditionParseError(CmGymError):
    """A condition's text does not follow the grammar or names an unknown predicate kind."""


_NONE_WORDS = frozenset({"", "none", "always", "n/a"})
_KIND = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BARE = re.compile(r"-?[A-Za-z0-9_.][A-Za-z0-9_.:/+-]*")
_AND = re.compile(r"\s*(?:and\b|&&)\s*", re.IGNORECASE)
_JSON = json.JSONDecoder()


@functools.lru_cache(maxsize=4096)
def _phrase_regex(phrase: str) -> re.Pattern[str]:
    words = phrase.strip().split()
    body = r"\s+".join(re.escape(w) for w in words) if words else re.escape(phrase)
    return re.compile(r"(?<!\w)" + body + r"(?!\w)", re.IGNORECASE)


def mentions(text: str, phrase: str) -> bool:
    """Case-insensitive, word-boundary, whitespace-tolerant phrase search."""
    return bool(_phrase_regex(phrase).search(text))


def _feature_matches(actual: Any, expected: str) -> bool:
    if isinstance(actual, bool):
        return expected.strip().lower() == ("true" if actual else "false")
    if isinstance(actual, (int, float)):
        try:
            return float(expected) == float(actual)
        except ValueError:
            return False
    if actual is None:
        return expected.strip().lower() in ("none", "null")
    return str(actual) == expected


@functools.lru_cache(maxsize=4096)
def _any_phrase_regex(phrases: tuple[str, ...]) -> re.Pattern[str]:
    """One search for ``any(mentions(text, p) for p in phrases)``: the phrases' bodies as
    alternatives between the same word boundaries (a search tries every alternative at every
    position, so it matches exactly where one of the phrases alone would)."""
    bodies = []
    for phrase in phrases:
        words = phrase.strip().split()
        bodies.append(r"\s+".join(re.escape(w) for w in words) if words else re.escape(phrase))
    return re.compile(r"(?<!\w)(?:" + "|".join(bodies) + r")(?!\w)", re.IGNORECASE)


def _mentions_any_of(text: str, phrases: tuple[str, ...]) -> bool:
    """Whether `text` mentions any of `phrases` (`mentions` each; one regex search)."""
    return bool(phrases) and bool(_any_phrase_regex(tuple(phrases)).search(text))


def _mentions_any(task: Task, args: tuple[str, ...]) -> bool:
    return _mentions_any_of(task.prompt, args)


def _mentions_none(task: Task, args: tuple[str, ...]) -> bool:
    return not _mentions_any_of(task.prompt, args)


def _same_env(task: Task, args: tuple[str, ...]) -> bool:
    return task.env_id == args[0]


def _different_env(task: Task, args: tuple[str, ...]) -> bool:
    return task.env_id != args[0]


def _feature_equals(task: Task, args: tuple[str, ...]) -> bool:
    return args[0] in task.features and _feature_matches(task.features[args[0]], args[1])


def _feature_in(task: Task, args: tuple[str, ...]) -> bool:
    if args[0] not in task.features:
        return False
    return any(_feature_matches(task.features[args[0]], v) for v in args[1:])


def _family_is(task: Task, args: tuple[str, ...]) -> bool:
    return task.family == args[0]


#: Built-in kinds, usable in every domain.
GENERIC_PREDICATES: Mapping[str, PredicateFn] = {
    "mentions_any": _mentions_any,
    "mentions_none": _mentions_none,
    "same_env": _same_env,
    "different_env": _different_env,
    "feature_equals": _feature_equals,
    "feature_in": _feature_in,
    "family_is": _family_is,
}

#: (min, max) number of args of each generic kind (None = unbounded).
GENERIC_ARITY: Mapping[str, tuple[int, int | None]] = {
    "mentions_any": (1, None),
    "mentions_none": (1, None),
    "same_env": (1, 1),
    "different_env": (1, 1),
    "feature_equals": (2, 2),
    "feature_in": (2, None),
    "family_is": (1, 1),
}

_GENERIC_SIGNATURES = (
    'mentions_any("phrase", ...) - the task text contains at least one phrase',
    'mentions_none("phrase", ...) - the task text contains none of the phrases',
    'same_env("env_id") / different_env("env_id") - the task runs in (another than) this environment',
    'feature_equals("key", "value") / feature_in("key", "v1", "v2", ...) - a task feature',
    'family_is("family") - the task belongs to this template family',
)


def all_predicates(domain_predicates: Mapping[str, PredicateFn] | None = None) -> dict[str, PredicateFn]:
    """Generic kinds plus a domain's kinds (a domain kind may not shadow a generic one)."""
    merged = dict(GENERIC_PREDICATES)
    for kind, fn in (domain_predicates or {}).items():
        if kind in GENERIC_PREDICATES:
            logger.warning("domain predicate %r shadows a generic kind; the generic one is kept", kind)
            continue
        merged[kind] = fn
    return merged


def describe_predicates(domain_predicates: Mapping[str, PredicateFn] | None = None) -> str:
    """The predicate kinds as text for the DISTIL_RECORD prompt's `predicate_kinds` field."""
    lines = list(_GENERIC_SIGNATURES)
    for kind, fn in sorted((domain_predicates or {}).items()):
        if kind in GENERIC_PREDICATES:
            continue
        doc = (getattr(fn, "__doc__", None) or "").strip().splitlines()
        lines.append(f"{kind}(...)" + (f" - {doc[0]}" if doc else ""))
    return "\n".join(lines)


@dataclass(frozen=True, order=True)
class Predicate:
    """One typed predicate `kind(args...)`; args are always strings."""

    kind: str
    args: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return f"{self.kind}({', '.join(json.dumps(a, ensure_ascii=False) for a in self.args)})"


@dataclass(frozen=True)
class Condition:
    """A conjunction of predicates; empty = always applicable. Built by `parse_condition`, which
    binds each kind to its function (the bound functions are not part of equality)."""

    predicates: tuple[Predicate, ...] = ()
    fns: tuple[PredicateFn, ...] = field(default=(), compare=False, repr=False)

    @property
    def text(self) -> str:
        """Canonical text ("" when empty)."""
        return " AND ".join(p.text for p in self.predicates)

    @property
    def is_empty(self) -> bool:
        return not self.predicates

    def holds(self, task: Task) -> bool:
        """True iff every predicate holds for `task` (no LLM). A predicate that raises is logged
        and counted as false, so a buggy predicate makes a record ineligible rather than crashing."""
        if len(self.fns) != len(self.predicates):
            raise ValueError("condition is not bound to predicate functions: build it with parse_condition")
        for pred, fn in zip(self.predicates, self.fns, strict=True):
            try:
                if not fn(task, pred.args):
                    return False
            except Exception:  # noqa: BLE001 - documented fallback: ineligible
                logger.warning(
                    "condition predicate %s raised on task %s", pred.text, task.task_id, exc_info=True
                )
                return False
        return True

    def __str__(self) -> str:
        return self.text or "none"


EMPTY = Condition()


def _parse_arg(text: str, pos: int) -> tuple[str, int]:
    ch = text[pos]
    if ch == '"':
        try:
            value, end = _JSON.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise ConditionParseError(f"bad string at column {pos + 1}: {exc.msg}") from None
        return str(value), end
    if ch == "'":
        end = text.find("'", pos + 1)
        if end < 0:
            raise ConditionParseError(f"unterminated string at column {pos + 1}")
        return text[pos + 1 : end], end + 1
    m = _BARE.match(text, pos)
    if not m:
        raise ConditionParseError(f"expected an argument at column {pos + 1}: {text[pos : pos + 20]!r}")
    return m.group(0), m.end()


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def parse_syntax(text: str) -> tuple[Predicate, ...]:
    """Parse the grammar only (kinds unchecked): canonical, sorted, de-duplicated predicates."""
    src = (text or "").strip()
    if src.lower() in _NONE_WORDS:
        return ()
    preds: list[Predicate] = []
    pos = 0
    while True:
        pos = _skip_ws(src, pos)
        m = _KIND.match(src, pos)
        if not m:
            raise ConditionParseError(f"expected a predicate kind at column {pos + 1} in {src!r}")
        kind, pos = m.group(0), _skip_ws(src, m.end())
        if pos >= len(src) or src[pos] != "(":
            raise ConditionParseError(f"expected '(' after {kind!r} in {src!r}")
        pos = _skip_ws(src, pos + 1)
        args: list[str] = []
        if pos < len(src) and src[pos] == ")":
            pos += 1
        else:
            while True:
                if pos >= len(src):
                    raise ConditionParseError(f"unclosed '(' in {src!r}")
                arg, pos = _parse_arg(src, pos)
                args.append(arg)
                pos = _skip_ws(src, pos)
                if pos < len(src) and src[pos] == ",":
                    pos = _skip_ws(src, pos + 1)
                    continue
                if pos < len(src) and src[pos] == ")":
                    pos += 1
                    break
                raise ConditionParseError(f"expected ',' or ')' at column {pos + 1} in {src!r}")
        preds.append(Predicate(kind, tuple(args)))
        if _skip_ws(src, pos) >= len(src):
            break
        sep = _AND.match(src, pos)
        if not sep:
            raise ConditionParseError(f"expected AND at column {pos + 1} in {src!r}")
        pos = sep.end()
    return tuple(sorted(set(preds)))


def parse_condition(text: str, predicates: Mapping[str, PredicateFn] | None = None) -> Condition:
    """Parse `text` against the generic kinds plus `predicates` (a domain's kinds).

    Raises `ConditionParseError` on a syntax error, an unknown kind or a wrong number of args.
    """
    preds = parse_syntax(text)
    known = all_predicates(predicates)
    fns: list[PredicateFn] = []
    for p in preds:
        fn = known.get(p.kind)
        if fn is None:
            raise ConditionParseError(
                f"unknown predicate kind {p.kind!r} (known: {', '.join(sorted(known))})"
            )
        lo, hi = GENERIC_ARITY.get(p.kind, (0, None))
        if len(p.args) < lo or (hi is not None and len(p.args) > hi):
            raise ConditionParseError(
                f"{p.kind} takes {lo}..{hi if hi is not None else 'n'} args, got {len(p.args)}"
            )
        fns.append(fn)
    return Condition(preds, tuple(fns))


def parse_condition_or_none(text: str, predicates: Mapping[str, PredicateFn] | None = None) -> Condition:
    """`parse_condition`, but an unparseable condition becomes the empty one ("none"), logged."""
    try:
        return parse_condition(text, predicates)
    except ConditionParseError as exc:
        logger.warning("unparseable condition %r stored as 'none': %s", text, exc)
        return EMPTY


@functools.lru_cache(maxsize=8192)
def _predicate_set(text: str) -> frozenset[Predicate]:
    try:
        return frozenset(parse_syntax(text))
    except ConditionParseError:
        return frozenset()


def condition_overlap(a: str, b: str) -> float:
    """How much two conditions' applicability overlaps, in [0, 1]: 1.0 when identical or when either
    is empty (an empty condition applies everywhere), else the Jaccard index of their predicate sets.
    Unparseable text counts as empty (as stores keep it)."""
    pa, pb = _predicate_set(a), _predicate_set(b)
    if not pa or not pb or pa == pb:
        return 1.0
    return len(pa & pb) / len(pa | pb)
