"""Build the file `coqc` checks for one (statement, script) pair and read Coq's verdict from it.

The file is the statement prefix, ``Proof.``, the script's header (libraries resolved to their
full standard-library names and checked against the fixed list of `trust`, so nothing else
installed can answer), the script's sentences one per line, ``Qed.``, ``Print Assumptions
<theorem>``, and one ``Locate Term <full name>`` per axiom a proof may use (`trust.ALLOWED_AXIOMS`
and the statement's own). Each tactic sentence runs under Coq's own ``Timeout`` (so a diverging
``nra`` is a Coq error at that sentence, not a killed process) and is followed by a probe: two
``Locate cm_<nonce>_…`` markers around ``Show Existentials``, which lists every open goal, focused
or not. The nonce is drawn after the script was vetted, so nothing a script prints can pass for a
probe or for the answers that follow the final marker (markers also separate those answers).

Coq's verdict is read from that output: the first error (where, and its message), the open-goal
count after each accepted sentence, and the assumptions of the finished proof. A proof counts
only when ``coqc`` exits 0 and every assumption is, by Coq's own name resolution, one of the
allowed fully qualified axioms or one the statement declares itself (`assumptions` module doc);
"Closed under the global context" is the best case.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from cm_gym.domains.math.assumptions import judge_assumptions, parse_assumptions, read_locate
from cm_gym.domains.math.coqtool import CoqInstall, LibraryError
from cm_gym.domains.math.script import ProofScript
from cm_gym.domains.math.statement import Statement
from cm_gym.domains.math.trust import ALLOWED_AXIOMS, library_allowed, statement_axioms

FILENAME = "task.v"
_ERROR = re.compile(
    r'^File "\./' + re.escape(FILENAME) + r'", line (\d+), characters (\d+)-(\d+):\n(Error|Warning):?[ \t]*(.*?)(?=^File "|\Z)',
    re.S | re.M,
)  # fmt: skip
_EXISTENTIAL = re.compile(r"^Existential \d+ =", re.M)


@dataclass(frozen=True)
class CheckPlan:
    """The file to check and where each part of it is (1-based, inclusive line spans)."""

    text: str
    nonce: str
    theorem: str
    prefix_lines: tuple[int, int]
    header_lines: tuple[int, int]
    sentence_lines: tuple[tuple[int, int], ...]
    qed_line: int
    queries: tuple[str, ...] = ()

    def marker(self, tag: str) -> str:
        return f"cm_{self.nonce}_{tag}"


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, text: str) -> tuple[int, int]:
        start = len(self.lines) + 1
        self.lines.extend(text.split("\n"))
        return start, len(self.lines)


def build_plan(
    statement: Statement,
    script: ProofScript,
    install: CoqInstall,
    *,
    tactic_timeout: int = 10,
    qed_timeout: int = 30,
    nonce: str | None = None,
) -> CheckPlan:
    """The check file for `script` on `statement`. Raises `LibraryError` when a library the
    statement or the script requires is not (unambiguously) in the installed standard library or
    not on the fixed list of `trust`."""
    for name in statement.requires:
        try:
            allowed_library(name, install, "the statement")
        except LibraryError as exc:
            raise StatementLibraryError(str(exc)) from None
    nonce = nonce or secrets.token_hex(8)
    w = _Writer()
    prefix = w.add(statement.prefix)
    w.add("Proof.")
    header_start = len(w.lines) + 1
    for h in script.header:
        names = (
            tuple(allowed_library(n, install, "a script") for n in h.names) if h.kind == "require" else None
        )
        w.add(h.render(names))
    header = (header_start, len(w.lines))

    def probe(i: int) -> None:
        w.add(f"Locate cm_{nonce}_a{i}.\nShow Existentials.\nLocate cm_{nonce}_b{i}.")

    probe(0)
    spans = []
    for i, s in enumerate(script.sentences, start=1):
        text = f"Timeout {int(tactic_timeout)} {s.text}" if s.kind == "command" else s.text
        spans.append(w.add(text))
        probe(i)
    qed = w.add(f"Timeout {int(qed_timeout)} Qed.")[0]
    w.add(f"Locate cm_{nonce}_end.\nPrint Assumptions {statement.name}.")
    queries = (*ALLOWED_AXIOMS, *statement_axioms(statement.declared))
    for i, full in enumerate(queries):
        w.add(f"Locate cm_{nonce}_q{i}.\nLocate Term {full}.")
    w.add(f"Locate cm_{nonce}_fin.")
    text = "\n".join(w.lines) + "\n"
    return CheckPlan(text, nonce, statement.name, prefix, header, tuple(spans), qed, queries)


class StatementLibraryError(LibraryError):
    """The task's statement requires a library a proof may not load (the task, not the script)."""


def allowed_library(name: str, install: CoqInstall, who: str) -> str:
    """The full name of library `name` when it is on the fixed list (`LibraryError` otherwise)."""
    full = install.resolve(name)
    if not library_allowed(full):
        raise LibraryError(
            f"{who} requires {full}, which is not on the list of standard-library modules a proof may "
            "load (see docs/security.md); use Lia, Lra, Psatz, Reals, ZArith, Arith, QArith, Lists …"
        )
    return full


@dataclass(frozen=True)
class CoqVerdict:
    """What Coq said. `where` is "proof" (closed, assumptions read), "sentence" (the script failed
    at sentence `failed` — 1-based; ``len(sentences) + 1`` means at ``Qed``), "header", "statement",
    or "none" (no located error: killed, crashed, output cut). `open_goals[i]` is the number of
    open goals after `i` accepted sentences (index 0: right after ``Proof.``)."""

    where: str
    failed: int
    error: str
    open_goals: tuple[int, ...]
    assumptions: tuple[str, ...] = ()
    disallowed: tuple[str, ...] = ()

    @property
    def accepted(self) -> int:
        """Sentences Coq accepted before the failure (all of them for a finished proof)."""
        return max(0, len(self.open_goals) - 1)

    @property
    def proved(self) -> bool:
        return self.where == "proof" and not self.disallowed


def read_verdict(
    plan: CheckPlan, stdout: str, stderr: str, returncode: int | None, declared: tuple[str, ...]
) -> CoqVerdict:
    """Coq's verdict on `plan` from a finished run's output (see module doc)."""
    goals = _open_goals(plan, stdout)
    error = _first_error(stderr)
    end = f"No object of basename {plan.marker('end')}"
    if returncode == 0 and error is None and end in stdout:
        assumptions, disallowed = read_assumptions(plan, stdout.split(end, 1)[1], declared)
        n = len(plan.sentence_lines)
        return CoqVerdict("proof", n + 1, "", goals[: n + 1], assumptions, disallowed)
    if error is None:
        return CoqVerdict("none", len(goals), "", goals)
    line, message = error
    if plan.prefix_lines[0] <= line <= plan.prefix_lines[1]:
        return CoqVerdict("statement", 0, message, ())
    if plan.header_lines[0] <= line <= plan.header_lines[1]:
        return CoqVerdict("header", 0, message, goals[:1])
    for i, (a, b) in enumerate(plan.sentence_lines, start=1):
        if a <= line <= b:
            return CoqVerdict("sentence", i, message, goals[:i])
    if line >= plan.qed_line:
        n = len(plan.sentence_lines)
        return CoqVerdict("sentence", n + 1, message, goals[: n + 1])
    return CoqVerdict("none", len(goals), message, goals)


def _open_goals(plan: CheckPlan, stdout: str) -> tuple[int, ...]:
    """Open-goal counts of consecutive probes (stops at the first probe missing)."""
    counts: list[int] = []
    for i in range(len(plan.sentence_lines) + 1):
        a = f"No object of basename {plan.marker(f'a{i}')}\n"
        b = f"No object of basename {plan.marker(f'b{i}')}"
        start = stdout.find(a)
        stop = stdout.find(b, start + 1) if start >= 0 else -1
        if stop < 0:
            break
        counts.append(len(_EXISTENTIAL.findall(stdout, start + len(a), stop)))
    return tuple(counts)


def _first_error(stderr: str) -> tuple[int, str] | None:
    for m in _ERROR.finditer(stderr):
        if m.group(4) == "Error":
            return int(m.group(1)), " ".join(m.group(5).split())
    return None


def read_assumptions(plan: CheckPlan, tail: str, declared: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:  # fmt: skip
    """(assumptions, disallowed ones) from the output after the final marker: the ``Print
    Assumptions`` answer, then the marked ``Locate Term`` answers (`assumptions` module doc). A
    missing marker (output cut) disallows everything."""
    marks = [f"No object of basename {plan.marker(f'q{i}')}" for i in range(len(plan.queries))]
    marks.append(f"No object of basename {plan.marker('fin')}")
    cuts = [tail.find(m) for m in marks]
    if any(c < 0 for c in cuts) or cuts != sorted(cuts):
        return (), ("the Print Assumptions answer is incomplete (output cut)",)
    allowed: dict[str, str] = {}
    for i, full in enumerate(plan.queries):
        short = read_locate(tail[cuts[i] + len(marks[i]) : cuts[i + 1]], full)
        if short:
            allowed[short] = full
    verdict = judge_assumptions(parse_assumptions(tail[: cuts[0]]), allowed, declared)
    return verdict.assumptions, verdict.disallowed
