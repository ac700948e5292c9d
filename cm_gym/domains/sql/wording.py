"""What a question's *wording* asks for: inclusive vs strict bounds, distinctness, sort direction,
aggregates, missing values. Read only from the question text (never from a reference query), so
task features and condition predicates built on it leak nothing a reader of the question lacks.

Matching is case-insensitive on word boundaries. Inclusive phrases are matched (and blanked out)
before strict ones, so "no more than" is an inclusive upper bound and not a strict "more than",
and "on or after" is not a strict "after".
"""

from __future__ import annotations

import functools
import re

LOWER_INCLUSIVE = (
    "at least", "no fewer than", "no less than", "not less than", "or more", "or older",
    "or higher", "or greater", "or later", "on or after", "no earlier than", "no younger than",
    "greater than or equal to", "a minimum of",
)  # fmt: skip
LOWER_STRICT = (
    "more than", "greater than", "strictly above", "strictly more than", "over", "above",
    "exceeding", "higher than", "older than", "after", "later than",
)  # fmt: skip
UPPER_INCLUSIVE = (
    "at most", "no more than", "not more than", "no greater than", "or less", "or fewer",
    "or younger", "or lower", "or earlier", "on or before", "no later than", "no older than",
    "up to", "less than or equal to", "a maximum of",
)  # fmt: skip
UPPER_STRICT = (
    "less than", "fewer than", "under", "below", "lower than", "younger than", "strictly below",
    "strictly less than", "before", "earlier than", "smaller than",
)  # fmt: skip

UNIQUE_PHRASES = (
    "distinct", "different", "unique", "without duplicates", "no duplicates", "each only once",
    "only once", "listed once",
)  # fmt: skip
REPEAT_PHRASES = (
    "with repeats", "including duplicates", "duplicates included", "repeats allowed",
    "one row per", "counting repeats", "including repeats",
)  # fmt: skip

DESC_PHRASES = (
    "descending", "highest first", "largest first", "biggest first", "oldest first",
    "most recent first", "newest first", "latest first", "from highest to lowest",
    "from largest to smallest", "from most to least", "from oldest to youngest",
    "from newest to oldest", "from latest to earliest", "decreasing",
)  # fmt: skip
ASC_PHRASES = (
    "ascending", "lowest first", "smallest first", "youngest first", "earliest first",
    "oldest date first", "from lowest to highest", "from smallest to largest",
    "from least to most", "from youngest to oldest", "from oldest to newest",
    "from earliest to latest", "increasing", "alphabetical", "alphabetically",
)  # fmt: skip
DESC_SUPERLATIVES = (
    "highest", "largest", "biggest", "greatest", "most", "oldest", "latest", "newest",
    "most recent", "top", "highest-paid", "best", "longest", "heaviest", "tallest",
)  # fmt: skip
ASC_SUPERLATIVES = (
    "lowest", "smallest", "fewest", "youngest", "earliest", "bottom", "cheapest",
    "lowest-paid", "worst", "shortest", "lightest",
)  # fmt: skip

AGG_WORDS: dict[str, tuple[str, ...]] = {
    "COUNT": ("how many", "number of", "count"),
    "SUM": ("total", "sum", "combined", "altogether"),
    "AVG": ("average", "mean"),
    "MAX": ("highest", "maximum", "largest", "greatest", "biggest"),
    "MIN": ("lowest", "minimum", "smallest", "cheapest"),
}

NULL_ABSENT = re.compile(
    r"\b(no|without|missing|lacks?|lacking|unknown|not yet|never|did not|didn't|have not|has not|do not|does not|don't|doesn't|"
    r"haven't|hasn't|not been|not recorded|not on file|is empty|are empty)\b"
)
NULL_PRESENT = re.compile(
    r"\b(has an?|have an?|with an?|recorded|known|already|have been|has been|received|on file|"
    r"filled in|non-empty|some)\b"
)
_NUMBER = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|(?<![\w.-])-?\d+(?:\.\d+)?(?![\w-])")
_TOP_K = re.compile(
    r"\b(top|first|bottom|last)\s+(\d+|one|two|three|four|five|six|seven|eight|nine|ten)\b"
    r"|\bthe\s+(\d+|two|three|four|five|six|seven|eight|nine|ten)\s+(\w+\s+){0,3}?(with the\s+)?"
    r"(highest|lowest|largest|smallest|oldest|youngest|most|fewest|earliest|latest|cheapest)"
)


@functools.lru_cache(maxsize=512)
def _pattern(phrase: str) -> re.Pattern[str]:
    return re.compile(r"\b" + r"\s+".join(re.escape(w) for w in phrase.split()) + r"\b")


def mentions(text: str, phrase: str) -> bool:
    """Case-insensitive word-boundary match (the semantics of the generic `mentions_any`)."""
    return _pattern(phrase.lower()).search(text.lower()) is not None


def mentions_any(text: str, phrases: tuple[str, ...] | list[str]) -> bool:
    """`mentions` of any phrase, with the text lowered once (not once per phrase)."""
    low = text.lower()
    return any(_pattern(p.lower()).search(low) is not None for p in phrases)


def found(text: str, phrases: tuple[str, ...] | list[str]) -> list[str]:
    """The phrases of `phrases` that occur in `text`."""
    return [p for p in phrases if mentions(text, p)]


def _blank(text: str, phrases: tuple[str, ...]) -> tuple[str, bool]:
    hit = False
    for phrase in _longest_first(phrases):
        text, n = _pattern(phrase).subn(" # ", text)
        hit = hit or n > 0
    return text, hit


@functools.lru_cache(maxsize=256)
def _longest_first(phrases: tuple[str, ...]) -> tuple[str, ...]:
    """`phrases` longest first (a stable sort: equal lengths keep their order), per phrase set."""
    return tuple(sorted(phrases, key=len, reverse=True))


@functools.lru_cache(maxsize=8192)
def boundary_sides(question: str) -> tuple[frozenset[str], frozenset[str]]:
    """(sides with an inclusive bound, sides with a strict bound); sides are "lower"/"upper"."""
    text = question.lower()
    inclusive: set[str] = set()
    text, lo = _blank(text, LOWER_INCLUSIVE)
    text, up = _blank(text, UPPER_INCLUSIVE)
    inclusive |= {"lower"} if lo else set()
    inclusive |= {"upper"} if up else set()
    strict: set[str] = set()
    text, lo_s = _blank(text, tuple(p for p in LOWER_STRICT if p not in ("over", "after")))
    text, up_s = _blank(text, tuple(p for p in UPPER_STRICT if p != "before"))
    # bare "over" / "after" / "before" count only when a number or date follows them
    lo_s = lo_s or re.search(r"\b(over|after)\s+(the\s+)?(age\s+of\s+)?[-\d$]", text) is not None
    up_s = up_s or re.search(r"\bbefore\s+[\d']", text) is not None
    strict |= {"lower"} if lo_s else set()
    strict |= {"upper"} if up_s else set()
    return frozenset(inclusive), frozenset(strict)


def boundary_kind(question: str) -> tuple[str | None, str | None]:
    """("inclusive" | "strict" | "mixed" | None, "lower" | "upper" | "both" | None)."""
    inclusive, strict = boundary_sides(question)
    sides = inclusive | strict
    side = None if not sides else ("both" if len(sides) == 2 else next(iter(sides)))
    if inclusive and strict:
        return "mixed", side
    if inclusive:
        return "inclusive", side
    if strict:
        return "strict", side
    return None, side


def inclusive_wording(question: str, side: str = "any") -> bool:
    """The question asks for an inclusive bound on `side` ("lower", "upper" or "any") and no
    strict bound on that side."""
    inclusive, strict = boundary_sides(question)
    sides = {"lower", "upper"} if side == "any" else {side}
    return any(s in inclusive and s not in strict for s in sides)


def strict_wording(question: str, side: str = "any") -> bool:
    """The question asks for a strict bound on `side` and no inclusive bound on that side."""
    inclusive, strict = boundary_sides(question)
    sides = {"lower", "upper"} if side == "any" else {side}
    return any(s in strict and s not in inclusive for s in sides)


@functools.lru_cache(maxsize=8192)
def _without_bounds(question: str) -> str:
    """The lowered question with its inclusive-bound phrases blanked (memoised: the order, top-k,
    aggregate and null wordings each start from it, for every condition checked on a task)."""
    text, _ = _blank(question.lower(), LOWER_INCLUSIVE + UPPER_INCLUSIVE)
    return text


def mentions_unique(question: str) -> bool:
    """Distinct values are asked for ("distinct", "different", "unique", "without duplicates")."""
    return mentions_any(question, UNIQUE_PHRASES) and not mentions_repeats(question)


def mentions_repeats(question: str) -> bool:
    """Repeats are explicitly wanted ("with repeats", "one row per ...", "including duplicates")."""
    return mentions_any(question, REPEAT_PHRASES)


@functools.lru_cache(maxsize=8192)
def order_wording(question: str) -> str | None:
    """ "asc" / "desc" when the wording fixes a sort direction (explicit phrases first, then
    superlatives such as "the 3 highest"), else None. Memoised (a pure function of the
    question): every record whose condition names an order is checked against each task."""
    text = _without_bounds(question)
    desc, asc = mentions_any(text, DESC_PHRASES), mentions_any(text, ASC_PHRASES)
    if desc != asc:
        return "desc" if desc else "asc"
    if desc and asc:
        return None
    sup_desc, sup_asc = mentions_any(text, DESC_SUPERLATIVES), mentions_any(text, ASC_SUPERLATIVES)
    if sup_desc != sup_asc:
        return "desc" if sup_desc else "asc"
    return None


@functools.lru_cache(maxsize=8192)
def asks_top_k(question: str) -> bool:
    """The question asks for the first/top N rows by some ranking (memoised, as `order_wording`)."""
    return _TOP_K.search(_without_bounds(question)) is not None


def agg_wording(question: str) -> list[str]:
    """Aggregate functions the wording asks for, e.g. ["AVG"] for "average salary"."""
    text = _without_bounds(question)
    return [fn for fn, words in AGG_WORDS.items() if mentions_any(text, words)]


@functools.lru_cache(maxsize=8192)
def null_wording(question: str) -> str | None:
    """ "null" when the wording asks for missing values ("without a manager"), "not_null" when it
    asks for present ones ("has a bonus"), else None (memoised, as `order_wording`)."""
    text, _ = _blank(_without_bounds(question), UNIQUE_PHRASES + REPEAT_PHRASES)
    if NULL_ABSENT.search(text):
        return "null"
    if NULL_PRESENT.search(text):
        return "not_null"
    return None


def mentions_number(question: str) -> bool:
    """A numeric or date literal occurs in the question."""
    return _NUMBER.search(question) is not None


def numbers(question: str) -> list[str]:
    """Numeric and date literals of the question, in order."""
    return _NUMBER.findall(question)
