"""Proof scripts as lines, for edits, slips and record transfer: the header (``Require Import`` …)
and the tactic lines (one sentence each, a bullet on the line of the sentence it opens), in the
canonical form `ProofScript.text` writes. Unparseable text (a model's junk) falls back to its
non-blank lines, so edits never raise."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cm_gym.domains.math.script import ScriptError, parse_script, tactic_body

#: decision procedures a proof ends with (the units a "swap the procedure" edit changes)
DECISION_PROCEDURES = ("lia", "nia", "lra", "nra", "psatz", "field", "ring", "auto", "easy", "trivial",
                       "reflexivity", "tauto", "intuition", "congruence", "assumption")  # fmt: skip
#: the decision procedures of each domain of quantification, most often right first (the edits'
#: swaps; the portfolio candidates of these names measure the wrong-procedure slip)
PROCEDURES_BY_DOMAIN = {
    "R": ("lra", "nra", "field", "ring"),
    "nat": ("lia", "nia", "ring", "reflexivity"),
    "Z": ("lia", "nia", "ring", "reflexivity"),
    "Q": ("field", "ring", "reflexivity"),
    "C": ("field", "ring", "reflexivity"),
}
#: the standard-library module each tactic needs (Reals brings ``field`` / ``ring`` on R)
LIBRARY_OF = {"lia": "Lia", "nia": "Lia", "lra": "Lra", "nra": "Lra", "psatz": "Psatz"}
#: Lean / Mathlib names models write for Coq tactics, and the Coq tactic they mean
LEAN_TO_COQ = {"linarith": "lra", "nlinarith": "nra", "omega": "lia", "positivity": "nra",
               "field_simp": "field_simplify", "ring_nf": "ring_simplify", "norm_num": "lra"}  # fmt: skip
#: Lean / Mathlib lemma names models write for Coq's (the wrong-lemma-name slip and its fix)
LEAN_LEMMAS = {"pow2_ge_0": "sq_nonneg", "Rabs_pos": "abs_nonneg", "Rsqr_nonneg": "sq_nonneg'",
               "split_Rabs": "split_abs", "Rmult_comm": "mul_comm", "Rplus_comm": "add_comm"}  # fmt: skip
_BULLET = re.compile(r"^((?:[-+*]+\s+)*)")
_HEADER = re.compile(r"^(Require|From|Import|Export|Open|Local)\b")


@dataclass
class ScriptLines:
    """A script as header lines and tactic lines (mutable copy for editing)."""

    header: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(self.header + self.body)

    def copy(self) -> ScriptLines:
        return ScriptLines(list(self.header), list(self.body))

    def libraries(self) -> set[str]:
        """Module names the header requires (last component: ``Coq.micromega.Lra`` → ``Lra``)."""
        out: set[str] = set()
        for line in self.header:
            if line.startswith(("Require", "From")):
                for word in line.rstrip(".").split()[1:]:
                    if word not in ("Import", "Export", "Require", "Coq"):
                        out.add(word.rsplit(".", 1)[-1])
        return out

    def finishing(self) -> list[int]:
        """Indices of body lines that run a decision procedure (`DECISION_PROCEDURES` or a Lean
        name for one)."""
        return [i for i, line in enumerate(self.body) if procedure_of(line)]

    def ensure_library(self, tactic: str) -> None:
        """Add ``Require Import <lib>.`` for `tactic` when the header lacks it."""
        lib = LIBRARY_OF.get(tactic)
        if lib and lib not in self.libraries():
            self.header.append(f"Require Import {lib}.")


def split_lines(text: str) -> ScriptLines:
    """`text` as `ScriptLines` (canonical when it parses, its non-blank lines otherwise)."""
    try:
        canonical = parse_script(text).text()
    except ScriptError:
        canonical = text
    out = ScriptLines()
    for line in canonical.splitlines():
        line = line.strip()
        if not line:
            continue
        (out.header if _HEADER.match(line) and not out.body else out.body).append(line)
    return out


def parts(line: str) -> tuple[str, str, str]:
    """(bullets + selector prefix, tactic body, "." or "") of a tactic line."""
    m = _BULLET.match(line)
    bullets = m.group(1) if m else ""
    rest = line[len(bullets) :]
    body = tactic_body(rest)
    prefix_end = rest.find(body) if body else len(rest)
    return bullets + rest[:prefix_end], body, "." if rest.rstrip().endswith(".") else ""


def procedure_of(line: str) -> str:
    """The decision procedure a line runs (its tactic body's only word), or ""."""
    _, body, _ = parts(line)
    words = body.split()
    if not words:
        return ""
    head = words[0]
    if head in DECISION_PROCEDURES or head in LEAN_TO_COQ:
        return head if len(words) == 1 or head == "psatz" else ""
    return ""


def with_body(line: str, new_body: str) -> str:
    """`line` with its tactic body replaced (bullets and selector kept)."""
    prefix, _, dot = parts(line)
    return f"{prefix}{new_body}{dot or '.'}"


def with_selector(line: str, sel: str) -> str:
    """`line` with goal selector `sel` (``all``) instead of its own."""
    m = _BULLET.match(line)
    bullets = m.group(1) if m else ""
    _, body, _ = parts(line)
    return f"{bullets}{sel}: {body}." if sel else f"{bullets}{body}."


def normal(line: str) -> str:
    """Whitespace-collapsed line, for matching."""
    return " ".join(line.split())
