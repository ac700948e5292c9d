"""Coq's answer to ``Print Assumptions``, read exactly, and the verdict on what a proof relies on.

Coq 8.16 prints either ``Closed under the global context`` or sections, each a title line at
column 0 — ``Section Variables:``, ``Axioms:``, ``Transparent constants:``, ``Opaque constants:``,
``Theory:`` — followed by entries. An entry starts at column 0 (``name : type``, or ``name`` with
the type on the next lines); its continuation lines are indented, except that a section
variable's type may start at column 0 with ``:``. Unsafe definitions are entries of the
``Axioms:`` section of another shape (``f is assumed to be guarded.``, ``… positive.``, ``…
relies on an unsafe hierarchy.``); a collapsed universe hierarchy or an impredicative ``Set`` is a
``Theory:`` entry. Names are printed as Coq's *shortest* unambiguous name in the current context
(``classic``, ``Classical_Prop.classic`` or the full path, depending on what is imported).

So a printed name is never trusted by its look: the checker also asks Coq ``Locate Term <full
name>`` for every allowed axiom (`trust.ALLOWED_AXIOMS`, and the statement's own under
``task.``) in the same environment, right after ``Print Assumptions``; `read_locate` reads the
shortest name Coq gives each one. An axiom entry is allowed only when its printed name is the
shortest name of an allowed full name — the same function of Coq computes both, and a shortest
name denotes one object. Everything else — an unknown name, an unsafe entry, a ``Theory:`` line,
a section variable the statement does not declare, text that is not an entry — is disallowed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

CLOSED = "Closed under the global context"
TITLES = {
    "Section Variables:": "variable",
    "Axioms:": "axiom",
    "Transparent constants:": "transparent",
    "Opaque constants:": "opaque",
    "Theory:": "theory",
}
_SHORTER = re.compile(
    r"^Constant (\S+)(?: \(shorter name to refer to it in current context is (\S+)\))?$"
)  # fmt: skip


@dataclass(frozen=True)
class Assumption:
    """One entry: `kind` "axiom", "variable" (a section variable), "unsafe" (guard, positivity,
    universes), "theory", "transparent", "opaque" or "unrecognized"; `name` ("" when there is
    none); `text` the entry with blanks collapsed."""

    kind: str
    name: str
    text: str


def parse_assumptions(text: str) -> tuple[Assumption, ...]:
    """The entries of a ``Print Assumptions`` answer (see module doc); never raises. Empty for
    ``Closed under the global context``; an empty answer is one "unrecognized" entry."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    body = [line for line in lines if line.strip()]
    if not body:
        return (Assumption("unrecognized", "", "no Print Assumptions answer"),)
    if body[0].strip() == CLOSED and body[0] == body[0].lstrip():
        rest = " ".join(" ".join(body[1:]).split())
        return (Assumption("unrecognized", "", "after 'Closed': " + rest[:120]),) if rest else ()
    groups: list[tuple[str, list[str]]] = []
    section = ""
    for line in body:
        starts_entry = not line[0].isspace()
        if starts_entry and line.strip() in TITLES and line == line.strip():
            section = TITLES[line.strip()]
            continue
        continuation = not starts_entry or (section == "variable" and line.startswith(":"))
        if continuation and groups:
            groups[-1][1].append(line)
        else:
            groups.append((section if starts_entry else "", [line]))
    return tuple(_entry(section, parts) for section, parts in groups)


def _entry(section: str, parts: list[str]) -> Assumption:
    text = " ".join(" ".join(parts).split())
    words = text.split(" ")
    if section in ("axiom", "variable") and len(words) >= 3 and words[1] == ":":
        return Assumption(section, words[0], text)
    if section in ("axiom", "variable") and len(words) == 2 and words[1].startswith(":"):
        return Assumption(section, words[0], text)  # ``name :type`` (no blank after the colon)
    if section == "axiom" and (
        text.endswith(("is assumed to be guarded.", "is assumed to be positive."))
        or text.endswith("relies on an unsafe hierarchy.")
    ):
        return Assumption("unsafe", words[0], text)
    if section in ("theory", "transparent", "opaque"):
        return Assumption(section, words[0], text)
    return Assumption("unrecognized", "", text)


def read_locate(text: str, full_name: str) -> str:
    """The shortest name Coq gives the constant `full_name`, from its ``Locate Term`` answer;
    "" when Coq located no constant of exactly that name."""
    flat = " ".join(text.split())
    if not flat.startswith("Constant "):
        return ""
    for item in re.split(r" (?=Constant )", flat):
        m = _SHORTER.match(item)
        if m and m.group(1) == full_name:
            return m.group(2) or full_name
    return ""


@dataclass(frozen=True)
class AssumptionVerdict:
    """The proof's assumptions (printed names) and the ones it may not have (with why)."""

    assumptions: tuple[str, ...]
    disallowed: tuple[str, ...]


def judge_assumptions(
    entries: Iterable[Assumption], allowed: Mapping[str, str], variables: Iterable[str] = ()
) -> AssumptionVerdict:
    """Decide on `entries`: an axiom is allowed only when its printed name is a key of `allowed`
    (shortest name → allowed full name, from `read_locate`); a section variable only when the
    statement declares it (`variables`); anything else is disallowed."""
    declared = set(variables)
    names: list[str] = []
    bad: list[str] = []
    for e in entries:
        if e.kind == "axiom":
            names.append(allowed.get(e.name, e.name))
            if e.name not in allowed:
                bad.append(e.name)
        elif e.kind == "variable":
            names.append(e.name)
            if e.name not in declared:
                bad.append(f"section variable {e.name}")
        elif e.kind == "unsafe":
            bad.append(e.text[:120])
        elif e.name:
            bad.append(f"{e.kind}: {e.text[:120]}")
        else:
            bad.append(f"unexpected Print Assumptions output: {e.text[:120]}")
    return AssumptionVerdict(tuple(names), tuple(bad))
