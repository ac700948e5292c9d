"""A miniF2F statement file, parsed: its prefix (imports, definitions, the theorem), the theorem's
name, the libraries it requires and the axioms it declares itself.

The file is cut right after the theorem's statement sentence (its ``Proof. Admitted.`` and
anything after it are dropped); the checker appends ``Proof.``, the script and ``Qed.``. The prefix
is data, but data from a folder anyone can point cm_gym at, so it is vetted like a script's header:
only declarations, notations, scopes and proofs of helper lemmas, never commands that touch files
or the process or switch checking off (`StatementError` names the sentence).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from cm_gym.core.types import CmGymError, Task
from cm_gym.domains.math.coqlex import (
    CoqSyntaxError,
    Sentence,
    first_word,
    split_sentences,
    strip_comments,
    words,
)

THEOREM_WORDS = ("Theorem", "Lemma", "Example", "Corollary", "Proposition", "Fact", "Remark")
DECLARE_WORDS = ("Axiom", "Axioms", "Parameter", "Parameters", "Variable", "Variables", "Hypothesis",
                 "Hypotheses", "Conjecture", "Context")  # fmt: skip
#: first words of the commands a statement prefix may contain
PREFIX_WORDS = frozenset(
    {"Require", "From", "Import", "Export", "Open", "Close", "Local", "Global", "Definition", "Fixpoint",
     "CoFixpoint", "Function", "Inductive", "CoInductive", "Record", "Structure", "Notation", "Infix",
     "Reserved", "Arguments", "Implicit", "Let", "Coercion", "Section", "End", "Set", "Unset", "Scheme",
     "Proof", "Qed", "Defined", "Admitted", "Delimit", "Bind", "Hint", "Create", "Opaque", "Transparent",
     *THEOREM_WORDS, *DECLARE_WORDS}
)  # fmt: skip
#: words that never belong in a statement (they weaken checking or reach outside Coq)
FORBIDDEN_IN_PREFIX = frozenset(
    {"Checking", "Load", "Declare", "Redirect", "Drop", "Cd", "LoadPath", "Extraction", "Extract",
     "Time", "Timeout", "Fail", "Succeed", "bypass_check", "ML", "Add"}
)  # fmt: skip
MAX_STATEMENT_CHARS = 50_000


class StatementError(CmGymError):
    """A statement file that is not one vetted theorem statement (see module doc)."""


@dataclass(frozen=True)
class Statement:
    """The parsed file. `prefix` is the comment-free text up to and including the theorem's
    statement sentence; `theorem` that sentence alone; `requires` the library names it loads;
    `declared` the axioms / parameters it declares itself (allowed in ``Print Assumptions``)."""

    name: str
    prefix: str
    theorem: str
    requires: tuple[str, ...] = ()
    declared: tuple[str, ...] = ()
    definitions: tuple[str, ...] = ()
    opened_scopes: tuple[str, ...] = field(default=())
    source: str = ""

    @property
    def statement_text(self) -> str:
        """The original text (comments kept) up to the end of the theorem sentence, for prompts."""
        return self.source

    @property
    def digest(self) -> str:
        """sha256 of the comment-free prefix (blanks collapsed): what a shipped proof was checked
        against, so a proof is never attached to another statement of the same name."""
        return hashlib.sha256(" ".join(self.prefix.split()).encode("utf-8")).hexdigest()[:16]


def parse_statement(text: str, name_hint: str = "") -> Statement:
    """Parse a statement file (see module doc); `name_hint` (the file stem) picks the theorem
    when the file states several."""
    if len(text) > MAX_STATEMENT_CHARS:
        raise StatementError(f"statement file too long ({len(text)} characters)")
    try:
        clean = strip_comments(text)
        sentences = split_sentences(_drop_tail(clean))
    except CoqSyntaxError as exc:
        raise StatementError(str(exc)) from exc
    theorems = [i for i, s in enumerate(sentences) if first_word(s.text) in THEOREM_WORDS]
    if not theorems:
        raise StatementError("no Theorem/Lemma sentence in the file")
    named = [i for i in theorems if _theorem_name(sentences[i]) == name_hint]
    index = named[0] if named else theorems[-1]
    kept = sentences[: index + 1]
    for s in kept:
        _vet_prefix_sentence(s)
    requires: list[str] = []
    declared: list[str] = []
    definitions: list[str] = []
    scopes: list[str] = []
    for s in kept:
        w = words(s.text)
        head = _skip_locality(w)
        if head and head[0] in ("Require", "From"):
            requires.extend(required_libraries(s.text))
        elif head and head[0] in DECLARE_WORDS:
            declared.extend(declared_names(s.text))
        elif (
            head and head[0] in ("Definition", "Fixpoint", "Function", "Let", "CoFixpoint") and len(head) > 1
        ):
            definitions.append(head[1])
        elif head[:2] == ["Open", "Scope"] and len(head) > 2:
            scopes.append(head[2])
    theorem = sentences[index]
    return Statement(
        name=_theorem_name(theorem),
        prefix="\n".join(s.text for s in kept),
        theorem=theorem.text,
        requires=tuple(requires),
        declared=tuple(declared),
        definitions=tuple(definitions),
        opened_scopes=tuple(scopes),
        source=text[: theorem.end].strip(),
    )


def _drop_tail(clean: str) -> str:
    """Everything up to the last complete sentence (a trailing ``Proof.`` without ``Admitted.`` or a
    cut-off line is not an error: the tail is dropped)."""
    cut = max(clean.rfind(". "), clean.rfind(".\n"), clean.rfind(".\t"))
    if clean.rstrip().endswith("."):
        return clean
    return clean[: cut + 1] if cut >= 0 else clean


def _theorem_name(s: Sentence) -> str:
    w = words(s.text)
    return w[1] if len(w) > 1 else ""


def _skip_locality(w: list[str]) -> list[str]:
    while w and w[0] in ("Local", "Global", "#", "Polymorphic", "Program"):
        w = w[1:]
    return w


def _vet_prefix_sentence(s: Sentence) -> None:
    if s.kind != "command":
        return
    w = words(s.text)
    bad = sorted(FORBIDDEN_IN_PREFIX.intersection(w))
    if bad or (w and w[0] == "#"):
        raise StatementError(
            f"the statement uses a forbidden command ({', '.join(bad) or '#[...]'}): {s.text[:80]!r}"
        )
    head = w[0] if w else ""
    if head[:1].isupper() and head not in PREFIX_WORDS:
        raise StatementError(f"the statement uses a command cm_gym does not allow: {s.text[:80]!r}")
    if '"' in s.text and head not in ("Notation", "Infix", "Reserved", "Local"):
        raise StatementError(f"a string in a statement command: {s.text[:80]!r}")


_LIB = re.compile(r"[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*")


def required_libraries(sentence: str) -> list[str]:
    """The library names of a ``[From P] Require [Import|Export] A B.`` sentence (``From P`` is
    prefixed: ``From Coq Require Import Lia`` → ``Coq.Lia``)."""
    w = _skip_locality(words(sentence))
    prefix = ""
    if w[:1] == ["From"] and len(w) > 2:
        prefix, w = w[1] + ".", w[2:]
    if w[:1] != ["Require"]:
        return []
    w = w[1:]
    if w[:1] in (["Import"], ["Export"]):
        w = w[1:]
    return [prefix + x for x in w if _LIB.fullmatch(x)]


def declared_names(sentence: str) -> list[str]:
    """Names declared by an ``Axiom``/``Parameter``/``Variable``… sentence (binder groups too)."""
    w = _skip_locality(words(sentence))[1:]
    names: list[str] = []
    pending: list[str] = []
    depth = 0
    for tok in w:
        if tok == "(":
            depth += 1
            pending = []
        elif tok == ")":
            depth -= 1
        elif tok == ":":
            names.extend(pending)
            pending = []
            if depth == 0:
                break
        elif _LIB.fullmatch(tok) and "." not in tok:
            pending.append(tok)
        else:
            pending = []
    return names


def statement_of(task: Task) -> Statement:
    """The parsed statement a math task carries in its meta (written by the loader)."""
    meta = task.meta
    return Statement(
        name=str(meta.get("theorem", "")),
        prefix=str(meta.get("prefix", "")),
        theorem=str(meta.get("theorem_sentence", "")),
        requires=tuple(meta.get("requires", ())),
        declared=tuple(meta.get("declared", ())),
    )
