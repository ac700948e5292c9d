"""The clause-level rules of the Dafny action format (`annotations.py`): where an inserted
invariant, decreases clause or assertion ends and may stand, what it may contain, and how an
inserted ghost statement (`ghost.py`) lines up with the program's tokens."""

from __future__ import annotations

from cm_gym.core.types import CmGymError
from cm_gym.domains.dafny.ghost import ALLOWED_ATTRIBUTES, GhostError, GhostParser
from cm_gym.domains.dafny.tokens import Token

KEYWORDS = ("invariant", "assert", "decreases")


class AnnotationError(CmGymError):
    """The action is not the task's program plus annotations."""


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


def _check_body(tokens: list[Token], j: int, end: int, star_ok: bool = False) -> None:
    """Refuse an inserted annotation ``tokens[j:end]`` whose content is not an allowed form
    (`star_ok`: a ``decreases *`` is allowed here, see the module doc)."""
    keyword, body = tokens[j].text, tokens[j + 1 : end]
    where = f"inserted {keyword} at line {tokens[j].line + 1}"
    for k, tok in enumerate(body):
        text = tok.text
        if text in _FORBIDDEN_WORDS and not (text in _MEMBER_WORDS and k > 0 and body[k - 1].text == "."):
            raise AnnotationError(f"{where} uses a forbidden construct: {text!r}")
        attribute = text == "{:" or (text == "{" and k + 1 < len(body) and body[k + 1].text == ":")
        name = body[k + 1].text if text == "{:" and k + 1 < len(body) else ""
        if text in (":=", ":|") or (attribute and name not in ALLOWED_ATTRIBUTES):
            raise AnnotationError(f"{where} uses a forbidden construct: {text!r} (attributes, assignments)")
        if text == ";" and k != len(body) - 1:
            raise AnnotationError(f"{where} uses a forbidden construct: ';' inside the annotation")
    if keyword == "assert" and (not body or body[-1].text != ";"):
        raise AnnotationError(f"{where} does not end with ';' of its own")
    if body and body[-1].text == ";":
        body = body[:-1]
    if not body:
        raise AnnotationError(f"{where} is empty")
    if keyword == "decreases" and _has_star_element(body) and not (star_ok and _in_loop_header(tokens, j)):
        raise AnnotationError(f"{where} uses a forbidden construct: 'decreases *' (no termination check)")


def _in_loop_header(tokens: list[Token], j: int) -> bool:
    """Whether the clause at `j` belongs to a loop's header (not a method's specification)."""
    depth = 0
    for m in range(j - 1, -1, -1):
        text = tokens[m].text
        if text in _CLOSE:
            depth += 1
        elif text in _OPEN or text == "{:":
            if depth == 0:
                return False
            depth -= 1
        elif depth == 0 and text in ("while", "for"):
            return True
        elif depth == 0 and text in ("method", "lemma", "function", "predicate", "constructor", "iterator"):
            return False
    return False


def _declares_star(tokens: list[Token]) -> bool:
    """Whether the program itself has a ``decreases *`` (a method declared possibly
    non-terminating, or a loop of one)."""
    return any(
        tok.text == "decreases" and _has_star_element(tokens[k + 1 : _piece_end(tokens, k)])
        for k, tok in enumerate(tokens)
    )


def _ghost_assert(tokens: list[Token], j: int) -> bool:
    """Whether the assertion at `j` is labelled or proved ``by`` a block (`ghost.py` parses it)."""
    if j + 2 < len(tokens) and tokens[j + 2].text == ":" and tokens[j + 1].text[:1].isalnum():
        return True
    depth = 0
    for k in range(j + 1, len(tokens)):
        text = tokens[k].text
        if depth == 0 and text in (";", "}"):
            return False
        if depth == 0 and text == "by":
            return True
        depth += text in _OPEN or text == "{:"
        depth -= text in _CLOSE
        if depth < 0:
            return False
    return False


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


def _ghost_end(ghost: GhostParser, j: int) -> int:
    try:
        return ghost.statement(j)
    except GhostError as exc:
        raise AnnotationError(str(exc)) from exc


def _program_statement(ghost: GhostParser, a_toks: list[Token], j: int, p_toks: list[Token], i: int) -> bool:
    """Whether the statement at action token `j` is the program's own statement at `i` (the same
    tokens), not an inserted one."""
    if i >= len(p_toks) or p_toks[i].text != a_toks[j].text:
        return False
    try:
        end = ghost.statement(j)
        p_end = GhostParser(p_toks, ghost.lemmas).statement(i)
    except GhostError:
        return True  # not a ghost statement on one side: match token by token
    own = [t.text for t in p_toks[i:p_end]]
    if [t.text for t in a_toks[j:end]] == own:
        return True  # the program's own statement (greedy, also when it repeats)
    # the same start, another statement: inserted when the program's own follows it whole;
    # otherwise the action keeps the program's statement with annotations inside (e.g. in a calc)
    return [t.text for t in a_toks[end : end + len(own)]] != own


def _absorbed(a_toks: list[Token], j: int, end: int, p_text: list[str], i: int) -> int:
    """How many of the program's next tokens (from `i`) the inserted statement ``a_toks[j:end]``
    takes back: DafnyBench's hint removal sometimes left part of an ``assert … by { … }`` in the
    program (the continuation lines of its expression and its block, or the lemma calls of its
    block). Either the statement ends with the program's next tokens (`_adopted`), or one of its
    blocks holds a run of them made of whole statements. What the statement holds was parsed as
    ghost (`ghost.py`), program parts included, so nothing compiled moves into it; a run the
    action also keeps right after the statement is the program's own, not taken back."""
    adopted = _adopted(a_toks, j, end, p_text, i)
    if adopted and a_toks[end - adopted].line != a_toks[end - adopted - 1].line:
        return adopted  # whole lines, as the hint removal removed them
    best = 0
    depth = 0
    for s in range(j, end):
        text = a_toks[s].text
        if depth > 0 and a_toks[s - 1].text in ("{", ";", "}") and i < len(p_text) and text == p_text[i]:
            k = whole = rel = 0
            while s + k < end and i + k < len(p_text) and a_toks[s + k].text == p_text[i + k]:
                t = a_toks[s + k].text
                rel += (t in _OPEN or t == "{:") - (t in _CLOSE)
                if rel < 0:
                    break
                k += 1
                if rel == 0 and t in (";", "}"):
                    whole = k
            best = max(best, whole)
        depth += text in _OPEN or text == "{:"
        depth -= text in _CLOSE
    if best and [t.text for t in a_toks[end : end + best]] == p_text[i : i + best]:
        return 0
    return best
