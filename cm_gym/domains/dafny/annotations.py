"""The Dafny action format: the task's program with proof annotations added, nothing else.

An action is the **full annotated program**: the task's (hints-removed) program, unchanged, plus
inserted annotations. What changed is decided on Dafny's own token stream (`tokens.py`: comments
and whitespace removed exactly as Dafny 2.3's scanner removes them, nested ``/* */`` and string /
character literals included), never on lines: every token of the program must appear in order,
and everything inserted must be one of
- ``assert EXPR;`` as a statement of its own (after ``;``, ``{``, ``}`` or ``=>``);
- ``invariant EXPR`` or ``decreases EXPR, ...`` in a loop header or a specification, i.e.
  directly before ``{`` or another specification clause; ``decreases *`` only in a loop header,
  and only when the program itself declares ``decreases *`` (Dafny then checks that the loop's
  method is declared possibly non-terminating: no termination claim is dropped);
- a ghost statement a proof author writes (`ghost.py`): ``assert … by { … }``, a labelled
  assertion, ``calc``, ``reveal``, ``ghost var``, ``forall`` with a body, a call of a lemma the
  program declares with a body. None of them changes compiled code.
Refused, with a reason (`AnnotationError`): any changed, moved or removed program token (so any
body change and any new statement, loop or declaration), ``assume``, attributes other than the
prover hints ``{:trigger}``, ``{:nowarn}``, ``{:autotriggers}``, ``{:induction}`` (so
``{:axiom}``, ``{:verify false}``, …), any other ``decreases *``, assignments, statement keywords
inside an annotation, an annotation without its ``;`` or followed by code it would swallow. One
annotation is one decision unit.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from cm_gym.domains.dafny.clauses import (
    _STATEMENT_BOUNDARY,
    KEYWORDS_SET,
    AnnotationError,
    _absorbed,
    _adopted,
    _check_body,
    _check_place,
    _declares_star,
    _ghost_assert,
    _ghost_end,
    _piece_end,
    _program_statement,
)
from cm_gym.domains.dafny.clauses import KEYWORDS as KEYWORDS  # re-exported
from cm_gym.domains.dafny.ghost import GhostParser, program_lemmas
from cm_gym.domains.dafny.tokens import Token, tokenize

_START = re.compile(r"^(invariant|assert|decreases|calc|reveal|ghost|forall)\b")
_FORBIDDEN_START = re.compile(
    r"^(var|if|while|for|return|method|function|lemma|predicate|class|datatype|codatatype|module|import|"
    r"requires|ensures|modifies|reads|assume|print|else|match|case|include|ghost|type|const|iterator|"
    r"constructor|twostate|abstract|trait|newtype)\b"
)
_FORBIDDEN = re.compile(r"\bassume\b|\{:\s*(verify|axiom|extern|imported|trusted|opaque|autocontracts)\b")
MAX_PROGRAM_CHARS = 200_000


@dataclass(frozen=True)
class Annotation:
    """One inserted annotation: its text (lines joined by newlines), its first line's index in
    the action's lines (0-based) and, when known, its character span in the action."""

    text: str
    line: int
    span: tuple[int, int] | None = field(default=None, compare=False)
    absorbed: int = field(default=0, compare=False)  # program tokens the statement took back

    @property
    def keyword(self) -> str:
        m = _START.match(self.text)
        return m.group(1) if m else ""


def norm(line: str) -> str:
    """A program line for comparison: no trailing ``//`` comment, whitespace collapsed."""
    if "//" in line and '"' not in line:
        line = line.split("//", 1)[0]
    return " ".join(line.split())


_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)


def strip_block_comments(text: str) -> str:
    """`text` with ``/* ... */`` comments blanked (their newlines kept, so line numbers hold)."""
    return _BLOCK_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _significant(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if norm(line)]


def _piece_text(action: str, tokens: list[Token]) -> str:
    """The annotation's source text, comments left out, its lines stripped and joined."""
    lines: dict[int, list[Token]] = {}
    for tok in tokens:
        lines.setdefault(tok.line, []).append(tok)
    return "\n".join(action[toks[0].start : toks[-1].end].strip() for _, toks in sorted(lines.items()))


def _unterminated(program: str) -> bool:
    found: list[str] = []
    tokenize(program, found)
    return bool(found)


def extract_annotations(program: str, action: str) -> list[Annotation]:
    """The annotations `action` adds to `program`; raises `AnnotationError` (see module doc).
    Linear in the length of both texts."""
    if len(action) > MAX_PROGRAM_CHARS:
        raise AnnotationError(f"action too long ({len(action)} characters)")
    issues: list[str] = []
    p_toks, a_toks = tokenize(program), tokenize(action, issues)
    if issues and not _unterminated(program):
        raise AnnotationError(f"{issues[0]}: it would hide the rest of the program")
    p_text = [t.text for t in p_toks]
    annotations: list[Annotation] = []
    ghost = GhostParser(a_toks, program_lemmas(p_toks))
    star_ok = _declares_star(p_toks)
    i = j = 0
    while j < len(a_toks):
        tok = a_toks[j]
        at_boundary = j == 0 or a_toks[j - 1].text in _STATEMENT_BOUNDARY
        ghost_start = at_boundary and (_ghost_assert(a_toks, j) if tok.text == "assert" else ghost.starts(j))
        if ghost_start and not _program_statement(ghost, a_toks, j, p_toks, i):
            end = _ghost_end(ghost, j)
            absorbed = _absorbed(a_toks, j, end, p_text, i)
            annotations.append(_annotation(action, a_toks, j, end, absorbed))
            i, j = i + absorbed, end
            continue
        if tok.text in KEYWORDS_SET:
            end = _piece_end(a_toks, j)
            if i < len(p_toks) and p_text[i] == tok.text:
                p_end = _piece_end(p_toks, i)
                if p_text[i:p_end] == [t.text for t in a_toks[j:end]]:
                    i, j = p_end, end  # the program's own annotation, unchanged
                    continue
            run = [(j, end)]  # consecutive inserted annotations: contents first, then places
            adopted = _adopted(a_toks, j, end, p_text, i)
            while not adopted and end < len(a_toks) and a_toks[end].text in KEYWORDS_SET:
                if i < len(p_toks) and p_text[i] == a_toks[end].text:
                    break
                if a_toks[end].text == "assert" and _ghost_assert(a_toks, end):
                    break  # a ghost statement of its own (next round)
                run.append((end, _piece_end(a_toks, end)))
                end = run[-1][1]
                adopted = _adopted(a_toks, run[-1][0], end, p_text, i)
            i += adopted
            for a, b in run:
                _check_body(a_toks, a, b, star_ok)
            for a, b in run:
                _check_place(a_toks, a, b)
                piece = a_toks[a:b]
                own = piece[: len(piece) - adopted] if b == end else piece  # the inserted tokens
                annotations.append(
                    Annotation(_piece_text(action, piece), piece[0].line, (own[0].start, own[-1].end))
                )
            j = end
            continue
        if i < len(p_toks) and p_text[i] == tok.text:
            i, j = i + 1, j + 1
            continue
        if tok.text in ("assume", "expect", "{:"):
            raise AnnotationError(f"line {tok.line + 1} uses a forbidden construct: {tok.text!r}")
        if i < len(p_toks):
            raise AnnotationError(
                f"found {tok.text[:40]!r} at line {tok.line + 1} where the program has {p_text[i][:40]!r} "
                f"(program line {p_toks[i].line + 1}): it is not an annotation (invariant / assert / "
                "decreases), and program lines may not be changed or removed"
            )
        raise AnnotationError(
            f"text after the end of the program at line {tok.line + 1} is not an annotation"
        )
    if i < len(p_toks):
        raise AnnotationError(
            f"program line {p_toks[i].line + 1} was changed or removed ({p_text[i][:40]!r} is missing); "
            "only annotations may be added"
        )
    return annotations


def _annotation(action: str, tokens: list[Token], j: int, end: int, absorbed: int = 0) -> Annotation:
    piece = tokens[j:end]
    return Annotation(_piece_text(action, piece), piece[0].line, (piece[0].start, piece[-1].end), absorbed)


def ground_truth_hints(program: str, ground_truth: str) -> list[Annotation]:
    """The hints of a ground-truth file relative to its hints-removed program (same format)."""
    return extract_annotations(program, ground_truth)


def _span_ok(action: str, ann: Annotation) -> bool:
    if ann.span is None or not (0 <= ann.span[0] < ann.span[1] <= len(action)):
        return False
    return action[ann.span[0] : ann.span[1]].split(None, 1)[:1] == ann.text.split(None, 1)[:1]


def remove_annotation(action: str, ann: Annotation) -> str:
    """`action` without `ann` (its exact span when known; a line left blank goes too). An
    annotation that took program text back into it (`Annotation.absorbed`) cannot be removed
    alone: `action` is returned unchanged."""
    if ann.absorbed:
        return action
    if _span_ok(action, ann):
        a, b = ann.span  # type: ignore[misc]
        start = action.rfind("\n", 0, a) + 1
        stop = action.find("\n", b)
        stop = len(action) if stop < 0 else stop
        if not (action[start:a] + action[b:stop]).strip():
            return action[:start] + action[stop + 1 :] if stop < len(action) else action[:start]
        return action[:a] + action[b:]
    lines = action.splitlines()
    n = len(ann.text.splitlines())
    end = ann.line
    seen = 0
    while end < len(lines) and seen < n:
        if lines[end].strip() and not lines[end].strip().startswith("//"):
            seen += 1
        end += 1
    return "\n".join(lines[: ann.line] + lines[end:]) + "\n"


def replace_annotation(action: str, ann: Annotation, new_text: str) -> str:
    """`action` with `ann` replaced by `new_text` (indentation kept)."""
    lines = action.splitlines()
    indent = lines[ann.line][: len(lines[ann.line]) - len(lines[ann.line].lstrip())]
    removed = remove_annotation(action, ann).splitlines()
    new_lines = [indent + t for t in new_text.splitlines()]
    return "\n".join(removed[: ann.line] + new_lines + removed[ann.line :]) + "\n"


def insert_after(action: str, line_index: int, text: str) -> str:
    """`action` with annotation `text` inserted after line `line_index` (indented one level
    deeper than that line when it opens a block, else like the next line)."""
    lines = action.splitlines()
    base = lines[line_index]
    indent = base[: len(base) - len(base.lstrip())]
    nxt = lines[line_index + 1] if line_index + 1 < len(lines) else ""
    nxt_indent = nxt[: len(nxt) - len(nxt.lstrip())]
    if len(nxt_indent) > len(indent):
        indent = nxt_indent
    else:
        indent += "  "
    new = [indent + t for t in text.splitlines()]
    return "\n".join(lines[: line_index + 1] + new + lines[line_index + 1 :]) + "\n"


def annotation_changes(a_minus: str, a_plus: str) -> tuple[list[Annotation], list[Annotation]]:
    """(added, removed) annotations between two versions of *any* program (lines positioned in
    a⁺ and a⁻ respectively); works across tasks, unlike `extract_annotations`."""
    minus = strip_block_comments(a_minus).splitlines()
    plus = strip_block_comments(a_plus).splitlines()
    matcher = difflib.SequenceMatcher(a=[norm(x) for x in minus], b=[norm(x) for x in plus], autojunk=False)
    added: list[Annotation] = []
    removed: list[Annotation] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        removed.extend(_group(minus, range(i1, i2)))
        added.extend(_group(plus, range(j1, j2)))
    return added, removed


def _group(lines: list[str], indices: range) -> list[Annotation]:
    out: list[Annotation] = []
    current: list[str] = []
    start = -1
    for k in indices:
        text = norm(lines[k])
        if not text:
            continue
        if _START.match(text):
            if current:
                out.append(Annotation("\n".join(current), start))
            current, start = [text], k
        elif current and not _FORBIDDEN_START.match(text):
            current.append(text)
        else:
            if current:
                out.append(Annotation("\n".join(current), start))
            current = []
    if current:
        out.append(Annotation("\n".join(current), start))
    return out
