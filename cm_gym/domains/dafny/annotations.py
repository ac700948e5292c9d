"""The Dafny action format: the task's program with proof annotations added, nothing else.

An action is the **full annotated program**: the task's (hints-removed) program, unchanged, plus
inserted annotations. What changed is decided on Dafny's own token stream (`tokens.py`: comments
and whitespace removed exactly as Dafny 2.3's scanner removes them, nested ``/* */`` and string /
character literals included), never on lines: every token of the program must appear in order,
and everything inserted must be one of
- ``assert EXPR;`` as a statement of its own (after ``;``, ``{``, ``}`` or ``=>``);
- ``invariant EXPR`` or ``decreases EXPR, ...`` in a loop header or a specification, i.e.
  directly before ``{`` or another specification clause.
Refused, with a reason (`AnnotationError`): any changed, moved or removed program token (so any
body change and any new statement, loop or declaration), ``assume``, attributes (``{:axiom}``,
``{:verify false}``, …), ``decreases *``, assignments, statement keywords inside an annotation,
an annotation without its ``;`` or followed by code it would swallow. One annotation is one
decision unit.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from cm_gym.domains.dafny.tokens import Token, tokenize
from cm_gym.types import CmGymError

KEYWORDS = ("invariant", "assert", "decreases")
_START = re.compile(r"^(invariant|assert|decreases)\b")
_FORBIDDEN_START = re.compile(
    r"^(var|if|while|for|return|method|function|lemma|predicate|class|datatype|codatatype|module|import|"
    r"requires|ensures|modifies|reads|assume|print|else|match|case|include|ghost|type|const|iterator|"
    r"constructor|twostate|abstract|trait|newtype)\b"
)
_FORBIDDEN = re.compile(r"\bassume\b|\{:\s*(verify|axiom|extern|imported|trusted|opaque|autocontracts)\b")
MAX_PROGRAM_CHARS = 200_000


class AnnotationError(CmGymError):
    """The action is not the task's program plus annotations."""


@dataclass(frozen=True)
class Annotation:
    """One inserted annotation: its text (lines joined by newlines), its first line's index in
    the action's lines (0-based) and, when known, its character span in the action."""

    text: str
    line: int
    span: tuple[int, int] | None = field(default=None, compare=False)

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


KEYWORDS_SET = frozenset(KEYWORDS)
#: tokens after which an assertion starts a statement of its own
_STATEMENT_BOUNDARY = frozenset({";", "{", "}", "=>", "then", "else", ":"})
#: tokens that may follow an invariant / decreases clause (the body or the next clause)
_SPEC_FOLLOW = frozenset({"{", "invariant", "decreases", "modifies", "requires", "ensures", "reads"})
#: words that never belong inside an annotation (statements, declarations, escapes)
_FORBIDDEN_WORDS = frozenset({
    "assume", "expect", "reveal", "calc", "var", "while", "for", "method", "function", "lemma",
    "predicate", "ghost", "return", "break", "print", "new", "modify", "label", "yield", "include",
    "import", "module", "class", "datatype", "codatatype", "requires", "ensures", "modifies", "reads",
    "by", "free", "static", "constructor", "iterator", "type", "const", "refines", "trait", "newtype",
    "twostate", "colemma", "copredicate", "inductive", "abstract", "opened", "export", "extends",
    "invariant", "decreases", "assert",
})  # fmt: skip
#: words that are fine right after "." (a function's .requires / .reads)
_MEMBER_WORDS = frozenset({"requires", "reads"})
#: words after which "{" opens a set/multiset display rather than a body
_OPERAND_WORDS = frozenset({"in", "then", "else", "multiset", "iset", "set", "invariant", "decreases",
                            "assert", "return"})  # fmt: skip
_OPEN, _CLOSE = "([{", ")]}"


def _opens_body(tokens: list[Token], k: int) -> bool:
    """Whether the "{" at `k` starts a block (it follows a complete expression) rather than a
    set display (it follows an operator or an operand-expecting keyword)."""
    prev = tokens[k - 1].text if k > 0 else ""
    if prev in _CLOSE or prev == "|":  # "|" mostly closes a cardinality |s|
        return True
    if prev == "*" and k > 1 and tokens[k - 2].text in ("decreases", ","):
        return True  # "decreases *" is complete (and refused later)
    if prev[:1].isalnum() or prev[:1] in "_'?\"@":
        return prev not in _OPERAND_WORDS
    return False


def _piece_end(tokens: list[Token], j: int) -> int:
    """End (exclusive) of the annotation that starts at keyword `tokens[j]`."""
    keyword = tokens[j].text
    depth = 0
    for k in range(j + 1, len(tokens)):
        text = tokens[k].text
        if depth == 0 and keyword != "assert" and tokens[k - 1].text != ".":
            if text in _SPEC_FOLLOW and (text != "{" or _opens_body(tokens, k)) or text in KEYWORDS_SET:
                return k
            if text == ";":
                return k + 1  # Dafny 2.3 accepts an optional ";" after a loop or method clause
            if text in ("}", ":=", ":|"):
                return k  # code follows: the clause ends here (and its place is then refused)
        if text in _OPEN or text == "{:":
            depth += 1
        elif text in _CLOSE:
            depth -= 1
            if depth < 0:
                return k
        elif text == ";" and depth == 0:
            return k + 1
    return len(tokens)


def _check_body(tokens: list[Token], j: int, end: int) -> None:
    """Refuse an inserted annotation ``tokens[j:end]`` whose content is not an allowed form."""
    keyword, body = tokens[j].text, tokens[j + 1 : end]
    where = f"inserted {keyword} at line {tokens[j].line + 1}"
    for k, tok in enumerate(body):
        text = tok.text
        if text in _FORBIDDEN_WORDS and not (text in _MEMBER_WORDS and k > 0 and body[k - 1].text == "."):
            raise AnnotationError(f"{where} uses a forbidden construct: {text!r}")
        if text in ("{:", ":=", ":|") or (text == "{" and k + 1 < len(body) and body[k + 1].text == ":"):
            raise AnnotationError(f"{where} uses a forbidden construct: {text!r} (attributes, assignments)")
        if text == ";" and k != len(body) - 1:
            raise AnnotationError(f"{where} uses a forbidden construct: ';' inside the annotation")
    if keyword == "assert" and (not body or body[-1].text != ";"):
        raise AnnotationError(f"{where} does not end with ';' of its own")
    if body and body[-1].text == ";":
        body = body[:-1]
    if not body:
        raise AnnotationError(f"{where} is empty")
    if keyword == "decreases" and _has_star_element(body):
        raise AnnotationError(f"{where} uses a forbidden construct: 'decreases *' (no termination check)")


def _check_place(tokens: list[Token], j: int, end: int) -> None:
    """Refuse an inserted annotation that is not where its kind may stand (see module doc)."""
    keyword = tokens[j].text
    where = f"inserted {keyword} at line {tokens[j].line + 1}"
    if keyword == "assert":
        before = tokens[j - 1] if j > 0 else None
        if before is not None and before.text not in _STATEMENT_BOUNDARY:
            raise AnnotationError(f"{where} is not a statement of its own (it follows {before.text!r})")
        return
    after = tokens[end] if end < len(tokens) else None
    if after is None or after.text not in _SPEC_FOLLOW:
        follow = "the end of the program" if after is None else repr(after.text)
        raise AnnotationError(
            f"{where} is not an annotation (invariant / assert / decreases) in a loop header or "
            f"specification: it is followed by {follow}"
        )


def _has_star_element(body: list[Token]) -> bool:
    depth, element = 0, []
    for tok in [*body, Token(",", -1, -1)]:
        if depth == 0 and tok.text == ",":
            if [t.text for t in element] == ["*"]:
                return True
            element = []
            continue
        depth += tok.text in _OPEN
        depth -= tok.text in _CLOSE
        element.append(tok)
    return False


def _adopted(tokens: list[Token], j: int, end: int, p_text: list[str], i: int) -> int:
    """How many of the program's next tokens (from `i`) the annotation ``tokens[j:end]`` ends
    with: the longest suffix of its expression that is a prefix of the program's rest. DafnyBench's
    hint removal sometimes left the continuation lines of a multi-line annotation in the
    program; an annotation may take such text as its tail. Linear (KMP prefix function)."""
    body = [t.text for t in tokens[j + 1 : end]]
    if not body or i >= len(p_text):
        return 0
    pattern = p_text[i : i + len(body)]
    seq = [*pattern, None, *body]
    pi = [0] * len(seq)
    for k in range(1, len(seq)):
        m = pi[k - 1]
        while m and seq[k] != seq[m]:
            m = pi[m - 1]
        pi[k] = m + 1 if seq[k] == seq[m] else 0
    return pi[-1]


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
    i = j = 0
    while j < len(a_toks):
        tok = a_toks[j]
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
                run.append((end, _piece_end(a_toks, end)))
                end = run[-1][1]
                adopted = _adopted(a_toks, run[-1][0], end, p_text, i)
            i += adopted
            for a, b in run:
                _check_body(a_toks, a, b)
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


def ground_truth_hints(program: str, ground_truth: str) -> list[Annotation]:
    """The hints of a ground-truth file relative to its hints-removed program (same format)."""
    return extract_annotations(program, ground_truth)


def _span_ok(action: str, ann: Annotation) -> bool:
    if ann.span is None or not (0 <= ann.span[0] < ann.span[1] <= len(action)):
        return False
    return action[ann.span[0] : ann.span[1]].split(None, 1)[:1] == ann.text.split(None, 1)[:1]


def remove_annotation(action: str, ann: Annotation) -> str:
    """`action` without `ann` (its exact span when known; a line left blank goes too)."""
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
