"""Build the file `coqc` checks for one (statement, script) pair and read Coq's verdict from it.

The file is the statement prefix, ``Proof.``, the script's header (libraries resolved to their
full standard-library names, so nothing else installed can answer), the script's sentences one
per line, ``Qed.``, and ``Print Assumptions <theorem>``. Each tactic sentence runs under Coq's own
``Timeout`` (so a diverging ``nra`` is a Coq error at that sentence, not a killed process) and is
followed by a probe: two ``Locate cm_<nonce>_…`` markers around ``Show Existentials``, which lists
every open goal, focused or not. The nonce is drawn after the script was vetted, so nothing a
script prints can pass for a probe or for the ``Print Assumptions`` answer that follows the final
marker.

Coq's verdict is read from that output: the first error (where, and its message), the open-goal
count after each accepted sentence, and the assumptions of the finished proof. A proof counts
only when ``coqc`` exits 0 and every assumption is a standard-library axiom (classical logic,
functional extensionality, the axioms of R — any Coq proof about reals depends on some) or one the
statement declares itself; "Closed under the global context" is the best case.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from cm_gym.domains.math.coqtool import CoqInstall
from cm_gym.domains.math.script import ProofScript
from cm_gym.domains.math.statement import Statement

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
    """The check file for `script` on `statement`. Raises `LibraryError` when a required
    library is not (unambiguously) in the installed standard library."""
    nonce = nonce or secrets.token_hex(8)
    w = _Writer()
    prefix = w.add(statement.prefix)
    w.add("Proof.")
    header_start = len(w.lines) + 1
    for h in script.header:
        names = tuple(install.resolve(n) for n in h.names) if h.kind == "require" else None
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
    return CheckPlan("\n".join(w.lines) + "\n", nonce, statement.name, prefix, header, tuple(spans), qed)


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

    def progress(self) -> float:
        """closed / (closed + open) at the failure point: `closed` sums every drop in the open-goal
        count Coq reported along the accepted sentences, `open` is the count at the failure (0 when
        nothing was closed)."""
        goals = self.open_goals
        if not goals:
            return 0.0
        closed = sum(max(0, a - b) for a, b in zip(goals, goals[1:], strict=False))
        total = closed + goals[-1]
        return closed / total if total else 0.0


def read_verdict(plan: CheckPlan, stdout: str, stderr: str, returncode: int | None, install: CoqInstall,
                 declared: tuple[str, ...]) -> CoqVerdict:  # fmt: skip
    """Coq's verdict on `plan` from a finished run's output (see module doc)."""
    goals = _open_goals(plan, stdout)
    error = _first_error(stderr)
    end = f"No object of basename {plan.marker('end')}"
    if returncode == 0 and error is None and end in stdout:
        assumptions, disallowed = read_assumptions(stdout.split(end, 1)[1], install, declared)
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


def read_assumptions(text: str, install: CoqInstall, declared: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:  # fmt: skip
    """(assumptions, disallowed ones) from ``Print Assumptions`` output. Anything but an
    ``Axioms:`` list of standard-library or statement-declared names is disallowed, including the
    sections Coq prints for unsafe fixpoints or type-in-type."""
    body = text.strip()
    if body.startswith("Closed under the global context"):
        rest = body[len("Closed under the global context") :].strip()
        return (), (("unexpected output: " + rest[:80],) if rest else ())
    names: list[str] = []
    bad: list[str] = []
    section = ""
    for line in body.splitlines():
        if not line.strip():
            continue
        if line[0].isspace():
            continue
        if line.rstrip().endswith(":"):
            section = line.strip()
            if section != "Axioms:":
                bad.append(section)
            continue
        if not section:
            bad.append("unexpected output: " + line[:80])
            continue
        name = line.split(" :", 1)[0].split()[0]
        names.append(name)
        if section == "Axioms:" and not _allowed(name, install, declared):
            bad.append(name)
    if not names and not bad:
        bad.append("no Print Assumptions answer")
    return tuple(names), tuple(bad)


def _allowed(name: str, install: CoqInstall, declared: tuple[str, ...]) -> bool:
    if "." in name:
        return name.split(".", 1)[0] in install.basenames
    return name in declared
