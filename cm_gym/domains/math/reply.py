"""A Coq proof script inside a reply's prose, and the canonical form of a script.

Two shapes: a restated theorem or a ``Proof.`` block ("Theorem t : … . Proof. intros. lia. Qed."),
taken from its ``Require``/``Import`` header (or the theorem, or ``Proof.``) through the first
``Qed.``/``Defined.``/``Admitted.``/``Abort.`` (to the end when cut off) — `extract_proof` then
reduces it to the script; or a bare run of script lines: header commands, lower-case tactic
sentences, bullets and braces ("- lia." yes, "- First, we…" no). Two scripts are the same when
their comment-free sentences are.
"""

from __future__ import annotations

from cm_gym.domains.reply import line_run, starts_sentence, word_at

HEADERS = ("Require", "From", "Import", "Export", "Open", "Local", "Set", "Unset")
THEOREMS = ("Theorem", "Lemma", "Example", "Corollary", "Proposition", "Fact", "Remark", "Goal")
ENDINGS = ("Qed.", "Defined.", "Admitted.", "Abort.")


def script_line(line: str) -> bool:
    """A header command, a tactic sentence, a bullet with one, a brace or ``Proof.``/``Qed.``."""
    s = line.strip()
    while s[:1] in ("-", "+", "*") and s[1:2] in (" ", "-", "+", "*", ""):
        s = s[1:].strip()  # bullets, possibly nested
        if not s:
            return True
    if not s:
        return False
    if s[0] in "{}[(" or s.startswith(ENDINGS) or s == "Proof.":
        return True
    word = word_at(s, 0)
    if word in HEADERS:
        return True
    if s[0].isdigit() or word == "all":
        return ":" in s[:8]  # a goal selector, "2: lia."
    return s[0].islower() and not starts_sentence(s)


def find_proof_block(text: str) -> str | None:
    """The restated theorem or ``Proof.`` block of `text` with its header lines, or None."""
    lines = text.split("\n")
    start = next(
        (
            i
            for i, ln in enumerate(lines)
            if word_at(ln.lstrip(), 0) in THEOREMS or ln.strip().startswith("Proof.")
        ),
        None,
    )
    if start is None:
        return None
    while start > 0 and word_at(lines[start - 1].lstrip(), 0) in HEADERS:
        start -= 1
    end = next((i + 1 for i in range(start, len(lines)) if any(e in lines[i] for e in ENDINGS)), len(lines))
    block = "\n".join(lines[start:end]).strip()
    for ending in ENDINGS:  # text after the ending on its line is not the proof's
        at = block.rfind(ending)
        if at != -1 and at + len(ending) < len(block) and "\n" not in block[at:]:
            block = block[: at + len(ending)]
    return block or None


def find_script(text: str) -> str | None:
    """A restated theorem or Proof. block, else the first run of script lines, else None."""
    return find_proof_block(text) or line_run(text, script_line, comment=("(*",))


def canonical(text: str) -> str:
    """The comment-free sentences, one per line (layout and comments never count); the
    collapsed text when it does not lex."""
    from cm_gym.domains.math.coqlex import CoqSyntaxError, split_sentences, strip_comments

    try:
        return "\n".join(" ".join(s.text.split()) for s in split_sentences(strip_comments(text)))
    except CoqSyntaxError:
        return " ".join(text.split())
