"""The math action format: a proof script, vetted by tokenising Coq's syntax.

A script is optional ``Require Import`` sentences naming standard-library modules, then tactic
sentences (one decision unit each), bullets (``-``, ``+``, ``*``) and focusing braces. A leading
``Proof.`` and a trailing ``Qed.`` / ``Defined.`` are tolerated and dropped (models write them).
Comments are dropped; the checker runs the vetted, comment-free sentences only.

Refused (`ScriptError`, one message naming the sentence and the fix):

- any vernacular command in the tactic part: a sentence must start with a lower-case tactic name
  (or ``(`` / ``[``), optionally after a goal selector (``all:``, ``2:``, ``1-3:``, ``[h]:``, ``!:``;
  not ``par:``, which forks workers). Coq's commands are capitalised, so ``Load``, ``Declare ML
  Module``, ``Redirect``, ``Drop``, ``Cd``, ``Add LoadPath``, ``Extraction``, ``Time``/``Timeout``/
  ``Fail``, ``Set``/``Unset``, ``Axiom``/``Parameter``, ``Admitted``/``Abort``/``Qed`` in the
  middle, ``Section``/``Module``/``End``, ``Ltac`` definitions, ``#[…]`` attributes are all refused;
- tactics that give up or play with time or the process: ``admit``, ``give_up``, ``timeout``,
  ``time``, ``native_compute``, the ``*_no_check`` family, Ltac profiling and timers;
- string literals (no tactic in an arithmetic proof needs one; printing could imitate output);
- header commands after the first tactic; a header may hold only ``[From Coq] Require [Import|
  Export] M…`` (every M resolved against the installed standard library by the checker and
  refused unless that full name is on the fixed list of `trust`: no ``Coq.Compat.AdmitAxiom``),
  ``Import``/``Export M…`` and ``[Local] Open Scope s``. The checker runs the header *inside* the
  proof, after ``Proof.``, so nothing a script loads can change how the statement was read;
- more than `MAX_SCRIPT_CHARS` characters or `MAX_SENTENCES` sentences; unterminated comments;
  control characters (NUL …).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cm_gym.core.types import CmGymError
from cm_gym.domains.math.coqlex import (
    CoqSyntaxError,
    Sentence,
    first_word,
    identifiers,
    split_sentences,
    strip_comments,
    words,
)

MAX_SCRIPT_CHARS = 8_000
MAX_SENTENCES = 120
MAX_SENTENCE_CHARS = 2_000
FORBIDDEN_TACTICS = frozenset(
    {"admit", "give_up", "timeout", "time", "time_constr", "native_compute", "native_cast_no_check",
     "vm_cast_no_check", "exact_no_check", "change_no_check", "restart_timer", "finish_timing",
     "profiling", "optimize_heap", "infoH"}
)  # fmt: skip
_SELECTOR = re.compile(
    r"^\s*(all|!|\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*|\[\s*[A-Za-z_][\w']*\s*\]|par)\s*:(?!=)\s*"
)
_HEADER_HEADS = ("Require", "From", "Import", "Export", "Open", "Local")
_NAME = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*")
_ENDINGS = ("Qed.", "Defined.")


class ScriptError(CmGymError):
    """A proof script cm_gym will not run (see module doc)."""


@dataclass(frozen=True)
class HeaderCommand:
    """A vetted header sentence: `kind` "require" (``Require [mode] names``), "import"
    (``mode names`` with mode Import/Export) or "scope" (``Open Scope name``)."""

    kind: str
    mode: str
    names: tuple[str, ...]

    def render(self, names: tuple[str, ...] | None = None) -> str:
        """The sentence, optionally with other (e.g. fully qualified) names."""
        listed = " ".join(names or self.names)
        if self.kind == "scope":
            return f"Open Scope {listed}."
        if self.kind == "import":
            return f"{self.mode} {listed}."
        return f"Require {self.mode + ' ' if self.mode else ''}{listed}."


@dataclass(frozen=True)
class ProofScript:
    """A vetted script: its header commands and its proof sentences."""

    header: tuple[HeaderCommand, ...]
    sentences: tuple[Sentence, ...]

    @property
    def requires(self) -> tuple[str, ...]:
        """Every library name the header requires (as written)."""
        return tuple(n for h in self.header if h.kind == "require" for n in h.names)

    @property
    def tactics(self) -> tuple[str, ...]:
        """The tactic sentences (bullets and braces left out)."""
        return tuple(s.text for s in self.sentences if s.kind == "command")

    def lines(self) -> list[tuple[str, list[int]]]:
        """The canonical lines and the (0-based) sentences on each: header lines first, then one
        sentence per line (a bullet shares the line of the sentence it opens)."""
        out: list[tuple[str, list[int]]] = [(h.render(), []) for h in self.header]
        pending, members = "", []
        for i, s in enumerate(self.sentences):
            members.append(i)
            if s.kind == "bullet":
                pending += s.text + " "
                continue
            out.append((pending + s.text, members))
            pending, members = "", []
        if pending:
            out.append((pending.strip(), members))
        return out

    def text(self) -> str:
        """The canonical script (see `lines`)."""
        return "\n".join(line for line, _ in self.lines())

    def line_of(self, sentence: int) -> tuple[int, str]:
        """(1-based line number, line text) of the 0-based `sentence` in the canonical script."""
        for number, (line, members) in enumerate(self.lines(), start=1):
            if sentence in members:
                return number, line
        return 0, ""


def parse_script(text: str) -> ProofScript:
    """Vet and split `text` (see module doc); `ScriptError` on anything refused."""
    if len(text) > MAX_SCRIPT_CHARS:
        raise ScriptError(f"proof script too long ({len(text)} > {MAX_SCRIPT_CHARS} characters)")
    control = next((c for c in text if ord(c) < 32 and c not in "\n\t\r" or ord(c) == 127), None)
    if control is not None:
        raise ScriptError(f"control character {ord(control):#04x} in the script; send plain text")
    try:
        clean = strip_comments(text)
        if '"' in clean:
            raise ScriptError("string literals are not allowed in proof scripts; remove the quoted text")
        sentences = split_sentences(clean)
    except CoqSyntaxError as exc:
        raise ScriptError(f"the script is not a sequence of Coq sentences: {exc}") from exc
    if len(sentences) > MAX_SENTENCES:
        raise ScriptError(f"too many sentences ({len(sentences)} > {MAX_SENTENCES})")
    header: list[HeaderCommand] = []
    body: list[Sentence] = []
    for i, s in enumerate(sentences):
        if len(s.text) > MAX_SENTENCE_CHARS:
            raise ScriptError(f"sentence {i + 1} is too long ({len(s.text)} characters)")
        head = first_word(s.text)
        if s.kind == "command" and head in _HEADER_HEADS:
            if body:
                raise ScriptError(
                    f"`{head}` must come before the first tactic (sentence {i + 1}: {s.text[:60]!r})"
                )
            header.append(_header_command(s.text))
            continue
        if s.kind == "command" and s.text == "Proof." and not body:
            continue
        if s.kind == "command" and s.text in _ENDINGS and i == len(sentences) - 1:
            continue
        if s.kind == "command":
            _vet_tactic(s.text, i + 1)
        body.append(s)
    if not body:
        raise ScriptError("the script has no tactic; write the proof's tactics, one sentence per line")
    return ProofScript(tuple(header), tuple(body))


def _header_command(sentence: str) -> HeaderCommand:
    """A vetted header sentence: ``[From Coq] Require [Import|Export] M…``, ``Import``/``Export
    M…`` or ``[Local] Open Scope s``."""
    w = words(sentence)
    if w[-1:] != ["."]:
        raise ScriptError(f"not a complete sentence: {sentence[:80]!r}")
    w = w[:-1]
    if w[:1] == ["Local"]:
        w = w[1:]
        if w[:2] != ["Open", "Scope"]:
            raise ScriptError(f"only `Local Open Scope` may follow `Local`: {sentence[:80]!r}")
    if w[:2] == ["Open", "Scope"]:
        if len(w) != 3 or not _NAME.fullmatch(w[2]):
            raise ScriptError(f"`Open Scope` takes one scope name: {sentence[:80]!r}")
        return HeaderCommand("scope", "", (w[2],))
    prefix = ""
    if w[:1] == ["From"]:
        if len(w) < 3 or w[1] != "Coq":
            raise ScriptError(
                f"only `From Coq Require …` may be used (standard library only): {sentence[:80]!r}"
            )
        prefix, w = "Coq.", w[2:]
    mode = ""
    if w[:1] == ["Require"]:
        w = w[1:]
        kind = "require"
    elif prefix:
        raise ScriptError(f"`From Coq` must be followed by `Require`: {sentence[:80]!r}")
    else:
        kind = "import"
    if w[:1] in (["Import"], ["Export"]):
        mode, w = w[0], w[1:]
    elif kind == "import":
        raise ScriptError(f"not a header command: {sentence[:80]!r}")
    if not w or any(not _NAME.fullmatch(x) for x in w):
        raise ScriptError(f"`{sentence.split()[0]}` may only list module names: {sentence[:80]!r}")
    return HeaderCommand(kind, mode, tuple(prefix + x for x in w))


def tactic_body(sentence: str) -> str:
    """A tactic sentence without its goal selector and final period."""
    m = _SELECTOR.match(sentence)
    rest = sentence[m.end() :] if m else sentence
    return rest.strip().removesuffix(".").strip()


def selector(sentence: str) -> str:
    """The goal selector of a tactic sentence (``all``, ``2`` …) or ""."""
    m = _SELECTOR.match(sentence)
    return " ".join(m.group(1).split()) if m else ""


def _vet_tactic(sentence: str, index: int) -> None:
    sel = selector(sentence)
    if sel == "par":
        raise ScriptError(f"sentence {index}: the `par:` selector is not allowed (it forks workers)")
    body = tactic_body(sentence)
    head = first_word(body)
    if not head or not (head[0].islower() or head in ("(", "[")):
        raise ScriptError(
            f"sentence {index} is not a tactic ({sentence[:60]!r}): a script is `Require Import` lines, "
            "then tactics only — vernacular commands (Set, Load, Axiom, Admitted, …) are refused"
        )
    bad = sorted(FORBIDDEN_TACTICS.intersection(identifiers(body)))
    if bad:
        raise ScriptError(f"sentence {index} uses a forbidden tactic ({', '.join(bad)}): {sentence[:60]!r}")
    if "#[" in body or "#" in words(body)[:1]:
        raise ScriptError(f"sentence {index}: attributes are not allowed: {sentence[:60]!r}")


_THEOREM_HEADS = ("Theorem", "Lemma", "Example", "Corollary", "Proposition", "Fact", "Remark", "Goal")


def extract_proof(text: str) -> str:
    """A model's reply that restates the theorem (``Theorem t : … . Proof. tactics Qed.``) as a
    script: the header commands before the theorem, then the sentences between ``Proof.`` and
    ``Qed.``/``Defined.``. The restated statement is dropped, never checked (the task's own
    statement is). Text without a theorem sentence, or that does not lex, is returned unchanged
    (vetting then says what is wrong)."""
    try:
        sentences = split_sentences(strip_comments(text))
    except CoqSyntaxError:
        return text
    heads = [first_word(s.text) if s.kind == "command" else "" for s in sentences]
    theorem = next((i for i, h in enumerate(heads) if h in _THEOREM_HEADS), None)
    if theorem is None:
        return text
    start = next((i for i in range(theorem + 1, len(sentences)) if sentences[i].text == "Proof."), None)
    if start is None:
        return text
    end = next((i for i in range(start + 1, len(sentences)) if sentences[i].text in _ENDINGS), len(sentences))
    header = [s.text for s, h in zip(sentences[:theorem], heads, strict=False) if h in _HEADER_HEADS]
    body = [s.text for s in sentences[start + 1 : end]]
    return "\n".join(header + body)
