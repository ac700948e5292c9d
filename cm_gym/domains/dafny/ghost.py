"""Ghost statements a proof author inserts: what the Dafny action format accepts besides loop
invariants, decreases clauses and plain assertions (`annotations.py`).

Accepted as a statement of its own (each one decision unit), on Dafny's token stream:

- ``assert [label:] EXPR by { BLOCK }`` (and a labelled ``assert L: EXPR;``);
- ``calc [op] { line; [op] [{ BLOCK }] line; ... }``;
- ``reveal NAME, ...;`` (an assertion label or an opaque function: it only adds a known fact);
- ``ghost var x [: T] := EXPR;``;
- ``forall x | RANGE ensures EXPR { BLOCK }`` (with a body: one without is an unproved axiom);
- a call ``Lemma(args);`` of a lemma (or ghost method) the task's program declares: the
  program's own lemmas, axioms included, are the task's trusted base, which an action cannot
  change; it cannot declare new ones.

A BLOCK (the proof of a ``by``, a calc hint, a ``forall`` body) holds the same statements plus
``var x := EXPR;`` and ``if EXPR { BLOCK } [else ...]``; everything there is ghost, which Dafny
itself enforces. Never accepted anywhere in them: ``assume``, ``expect``, loops (a loop without a
body is assumed), assignments to anything but the block's own new variables, declarations,
``decreases *``, and any attribute but `ALLOWED_ATTRIBUTES` (``{:trigger}``, ``{:nowarn}``,
``{:autotriggers}``, ``{:induction}``: they steer the prover, they assume nothing). None of these
forms changes compiled code.
"""

from __future__ import annotations

from cm_gym.core.types import CmGymError
from cm_gym.domains.dafny.tokens import Token


class GhostError(CmGymError):
    """An inserted statement that is not an accepted ghost statement (the reason says why)."""


#: attributes that only steer the prover (triggers, warnings, induction): sound anywhere
ALLOWED_ATTRIBUTES = frozenset({"trigger", "nowarn", "autotriggers", "induction"})
#: words that start an accepted inserted statement (a lemma call starts with the lemma's name)
STARTS = frozenset({"assert", "calc", "reveal", "ghost", "forall"})
#: words never allowed inside an inserted expression
EXPR_FORBIDDEN = frozenset({
    "assume", "expect", "var", "new", "modify", "print", "method", "function", "lemma", "predicate",
    "while", "for", "return", "break", "continue", "calc", "label", "yield", "include", "import", "module",
    "class", "datatype", "codatatype", "ghost", "reveal", "by", "free", "static", "constructor",
    "iterator", "type", "const", "refines", "trait", "newtype", "twostate", "colemma", "copredicate",
    "inductive", "abstract", "opened", "export", "extends", "invariant", "decreases", "assert",
    "requires", "ensures", "modifies", "reads",
})  # fmt: skip
_MEMBER_WORDS = frozenset({"requires", "reads"})  # fine after "." (a function's .requires)
CALC_OPS = frozenset({"==", "!=", "<", "<=", ">", ">=", "==>", "<==", "<==>", "!!", "in", "!in"})
_OPEN, _CLOSE = "([{", ")]}"
_OPERAND_WORDS = frozenset({"in", "then", "else", "multiset", "iset", "set", "return", "ensures", "|"})


def _opens_body(tokens: list[Token], k: int) -> bool:
    """Whether the "{" at `k` starts a block (it follows a complete expression) rather than a set
    display (it follows an operator or an operand-expecting word)."""
    prev = tokens[k - 1].text if k > 0 else ""
    if prev in _CLOSE:
        return True
    if prev[:1].isalnum() or prev[:1] in "_'?\"@":
        return prev not in _OPERAND_WORDS
    return False


def program_lemmas(tokens: list[Token]) -> frozenset[str]:
    """Names of the lemmas (and ghost methods) `tokens` declares: the ones an inserted call may
    use (see the module doc)."""
    out: set[str] = set()
    n = len(tokens)
    for k, tok in enumerate(tokens):
        if tok.text in ("lemma", "colemma") or (
            tok.text == "method" and k > 0 and tokens[k - 1].text == "ghost"
        ):
            j = k + 1
            while j < n and tokens[j].text == "{:":
                j = _skip_group(tokens, j)
            if j < n and (tokens[j].text[:1].isalpha() or tokens[j].text[:1] == "_"):
                out.add(tokens[j].text)
    return frozenset(out)


def _skip_group(tokens: list[Token], k: int) -> int:
    """Index after the bracket group opened at `k`."""
    depth = 0
    for m in range(k, len(tokens)):
        text = tokens[m].text
        if text in _OPEN or text == "{:":
            depth += 1
        elif text in _CLOSE:
            depth -= 1
            if depth == 0:
                return m + 1
    return len(tokens)


class GhostParser:
    """Parses one inserted ghost statement of `tokens` (see module doc); `lemmas`: the program's
    callable lemmas (`program_lemmas`)."""

    def __init__(self, tokens: list[Token], lemmas: frozenset[str]) -> None:
        self.t, self.lemmas = tokens, lemmas

    def _text(self, k: int) -> str:
        return self.t[k].text if k < len(self.t) else ""

    def _fail(self, k: int, why: str) -> GhostError:
        line = self.t[min(k, len(self.t) - 1)].line + 1 if self.t else 0
        return GhostError(f"inserted statement at line {line} {why}")

    def starts(self, k: int) -> bool:
        """Whether `k` can start an accepted statement (a keyword, or a lemma's name)."""
        return self._text(k) in STARTS or self._call_name_end(k) is not None

    # -- statements ------------------------------------------------------------------------
    def statement(self, k: int, *, in_block: bool = False) -> int:
        """End (exclusive) of the statement at `k`; raises `GhostError`."""
        text = self._text(k)
        if text == "assert":
            return self._assert(k)
        if text == "calc":
            return self._calc(k)
        if text == "reveal":
            return self._reveal(k)
        if text == "ghost" and self._text(k + 1) == "var":
            return self._var(k + 2)
        if text == "var" and in_block:
            return self._var(k + 1)
        if text == "forall":
            return self._forall(k)
        if text == "if" and in_block:
            return self._if(k)
        end = self._call_name_end(k)
        if end is not None:
            close = end + 1 if self._text(end + 1) == ")" else self.expression(end + 1, (")",))
            if self._text(close + 1) != ";":
                raise self._fail(k, "(a lemma call) does not end with ';'")
            return close + 2
        if text in ("assume", "expect", "while", "for") or text.startswith("{:"):
            raise self._fail(k, f"uses a forbidden construct: {text!r}")
        raise self._fail(
            k,
            f"starts with {text[:30]!r}: not a proof annotation (assert, assert … by, calc, reveal, "
            "ghost var, forall with a body, or a call of a lemma the program declares with a body)",
        )

    def _call_name_end(self, k: int) -> int | None:
        """Index of the "(" after a dotted name starting at `k` whose last part is a lemma."""
        if not self._text(k)[:1].isalpha() and self._text(k)[:1] != "_":
            return None
        j = k
        while self._text(j + 1) == "." and self._text(j + 2)[:1].isalpha():
            j += 2
        if self._text(j) in self.lemmas and self._text(j + 1) == "(":
            return j + 1
        return None

    def _assert(self, k: int) -> int:
        j = k + 1
        if self._text(j + 1) == ":" and (self._text(j)[:1].isalnum() or self._text(j)[:1] == "_"):
            j += 2  # a label
        stop = self.expression(j, (";", "by"))
        if self._text(stop) == ";":
            return stop + 1
        if self._text(stop + 1) != "{":
            raise self._fail(k, "(assert … by) is not followed by a block")
        return self.block(stop + 1)

    def _reveal(self, k: int) -> int:
        j = k + 1
        while self._text(j) != ";":
            text = self._text(j)
            if not text or not (text[:1].isalnum() or text[:1] in "_'" or text in (",", ".", "(", ")")):
                raise self._fail(k, f"(reveal) names something that is not a label or function: {text!r}")
            j += 1
        if j == k + 1:
            raise self._fail(k, "(reveal) names nothing")
        return j + 1

    def _var(self, k: int) -> int:
        j = k
        while True:
            if not (self._text(j)[:1].isalpha() or self._text(j)[:1] == "_"):
                raise self._fail(k, "(a ghost variable) has no name")
            j += 1
            if self._text(j) == ",":
                j += 1
                continue
            break
        if self._text(j) == ":":
            while self._text(j) != ":=":
                if self._text(j) in ("", ";", "{", "{:", ":|"):
                    raise self._fail(k, "(a ghost variable) needs an initial value (':=')")
                j += 1
        if self._text(j) != ":=":
            raise self._fail(k, "(a ghost variable) needs an initial value (':=')")
        stop = self.expression(j + 1, (";",))
        return stop + 1

    def _forall(self, k: int) -> int:
        stop = self.expression(k + 1, ("ensures", "{"), body=True)
        while self._text(stop) == "ensures":
            stop = self.expression(stop + 1, ("ensures", "{"), body=True)
        if self._text(stop) != "{":
            raise self._fail(k, "(a forall statement) has no body: it would be an unproved axiom")
        return self.block(stop)

    def _if(self, k: int) -> int:
        stop = self.expression(k + 1, ("{",), body=True)
        end = self.block(stop)
        if self._text(end) == "else":
            if self._text(end + 1) == "if":
                return self._if(end + 1)
            return self.block(end + 1)
        return end

    def _calc(self, k: int) -> int:
        j = k + 1
        while self._text(j) in CALC_OPS:
            j += 1
        if self._text(j) != "{":
            raise self._fail(k, "(calc) is not followed by its steps in braces")
        j += 1
        while True:
            text = self._text(j)
            prev = self._text(j - 1)
            if text == "":
                raise self._fail(k, "(calc) is not closed")
            if text == "}":
                return j + 1
            if text == "{" and (
                prev in (";", "}", "{") or (prev in CALC_OPS and self._text(j - 2) in (";", "}"))
            ):
                j = self.block(j)
            elif text in CALC_OPS and prev in (";", "}"):
                j += 1
            else:
                j = self.expression(j, (";",)) + 1

    def block(self, k: int) -> int:
        """End (exclusive) of the ghost block whose "{" is at `k`."""
        if self._text(k) != "{":
            raise self._fail(k, "expects a block '{ … }'")
        j = k + 1
        while self._text(j) != "}":
            if self._text(j) == "":
                raise self._fail(k, "opens a block that is never closed")
            j = self.statement(j, in_block=True)
        return j + 1

    # -- expressions -----------------------------------------------------------------------
    def expression(self, k: int, stops: tuple[str, ...], *, body: bool = False) -> int:
        """Index of the first of `stops` at bracket depth 0 from `k` (with `body`, "{" stops only
        where it opens a block), checking that the expression holds nothing forbidden."""
        depth = 0
        j = k
        while True:
            text = self._text(j)
            if text == "":
                raise self._fail(k, f"does not end (expected {' or '.join(repr(s) for s in stops)})")
            if depth == 0 and text in stops and (text != "{" or not body or _opens_body(self.t, j)):
                if j == k:
                    raise self._fail(k, "has an empty expression")
                return j
            if text in EXPR_FORBIDDEN and not (text in _MEMBER_WORDS and self._text(j - 1) == "."):
                raise self._fail(k, f"uses a forbidden construct: {text!r}")
            if text in (":=", ":|") or (text == ";" and depth > 0):
                raise self._fail(k, f"uses a forbidden construct: {text!r}")
            if text == "{:" or (text == "{" and self._text(j + 1) == ":"):
                name = self._text(j + 1) if text == "{:" else self._text(j + 2)
                if name not in ALLOWED_ATTRIBUTES:
                    raise self._fail(k, f"uses a forbidden construct: attribute {{:{name}}}")
            if text in _OPEN or text == "{:":
                depth += 1
            elif text in _CLOSE:
                depth -= 1
                if depth < 0:
                    raise self._fail(k, f"has an unbalanced {text!r}")
            j += 1
