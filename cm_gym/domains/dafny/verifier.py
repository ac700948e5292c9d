"""Run Debian's Dafny 2.3 (``dafny /compile:0 /trace``) in the sandbox and read its verdicts.

``/trace`` prints, per Boogie implementation, ``Verifying <Kind>$$<module>.<class>.<member> ...``
followed by ``[t s, n proof obligations]  verified|error|errors|timed out|out of resource|out of
memory|inconclusive``. A Dafny member (method, lemma, function, ...) is verified when all of its
implementations (well-formedness check, body, override check) are; U = verified members / all
members. Parse and resolution errors produce no such lines and are reported as such.

The budget is Boogie's ``/rlimit``: z3 resource units per implementation (each implementation is
one z3 session; ``(reset)`` starts the count again), the same count on every machine, however
busy. An implementation that spends it is "out of resource" (or z3 answers Boogie's next command
with "max. resource limit exceeded", a ``Prover error`` line before the implementation's
``Verifying`` line): not verified, like an error. ``/timeLimit`` is only a hang guard far above
what the rlimit takes; an implementation it stops ("timed out") says nothing about the program.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from dataclasses import dataclass, field

from cm_gym.evaluators.sandbox import Limits, Sandbox, SandboxResult
from cm_gym.evaluators.tools import find_tool

logger = logging.getLogger(__name__)

INSTALL_HINT = "install it with `apt-get install -y dafny` (Debian's Dafny 2.3, which brings mono and z3)"
_VERIFYING = re.compile(r"^Verifying (\w+)\$\$(\S+) \.\.\.\s*$")
_RESULT = re.compile(
    r"^\s*\[[^\]]*\]\s+(verified|errors?|timed out|out of resource|out of memory|inconclusive)\s*$"
)
_RESOURCE = re.compile(r"^Prover error: .*resource limit exceeded")
_SUMMARY = re.compile(r"Dafny program verifier finished with (\d+) verified, (\d+) errors?")
_ERROR = re.compile(r"^(?:\S+)\((\d+),(\d+)\): (Error[^:]*): (.*)$")
_PARSE = re.compile(r"(\d+) (parse|resolution/type) errors? detected")
_NOISE = re.compile(
    r"^(Prover error: .*model_compress|Legal parameters are:|\s{2}\w+ \(.*\) \(default: .*\)|\s{2}\w+ \(bool\)$)"
)


def find_dafny() -> str:
    """Path of the `dafny` executable ($CM_GYM_DAFNY or PATH); `ToolNotFoundError` otherwise."""
    return find_tool("dafny", "CM_GYM_DAFNY", "the Dafny verifier", INSTALL_HINT)


@dataclass(frozen=True)
class VerifierReport:
    """Per-member verdicts and the first errors, as read from Dafny's output."""

    members: dict[str, bool] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    summary: tuple[int, int] | None = None
    parse_failed: bool = False
    timed_out_members: tuple[str, ...] = ()
    out_of_resource_members: tuple[str, ...] = ()
    #: implementations Boogie could not finish because its prover died ("inconclusive": z3
    #: killed at its CPU backstop or memory cap, "unexpected prover output: Write fault")
    inconclusive_members: tuple[str, ...] = ()

    @property
    def verified(self) -> int:
        return sum(self.members.values())

    @property
    def score(self) -> float:
        if self.parse_failed or self.summary is None:
            return 0.0
        if not self.members:
            return 1.0 if self.summary[1] == 0 else 0.0
        return self.verified / len(self.members)

    @property
    def solved(self) -> bool:
        return (
            not self.parse_failed
            and self.summary is not None
            and self.summary[1] == 0
            and all(self.members.values())
        )


def _member(qualified: str) -> str:
    """Dafny's name for a Boogie implementation name: ``_module.__default.mult8__Lemma`` →
    ``mult8_Lemma``, ``_0_Seq.__default.Sum`` → ``Seq.Sum``, ``M.C.Slow`` stays."""
    parts = []
    for part in qualified.split("."):
        if part in ("_module", "__default"):
            continue
        m = re.match(r"^_\d+_(.+)$", part)
        parts.append((m.group(1) if m else part).replace("__", "_"))
    return ".".join(parts) or qualified


def clean_output(text: str) -> str:
    """Dafny's output without the z3 option noise Debian's build prints on every check."""
    return "\n".join(line for line in text.splitlines() if not _NOISE.match(line))


def parse_output(text: str) -> VerifierReport:
    """Read the verdicts of a ``/trace`` run (see module doc)."""
    members: dict[str, bool] = {}
    timed_out: list[str] = []
    no_resource: list[str] = []
    inconclusive: list[str] = []
    errors: list[str] = []
    current: str | None = None
    parse_failed = False
    summary: tuple[int, int] | None = None
    resource_hit = False  # a "max. resource limit exceeded" prover error announces the next one
    for line in text.splitlines():
        if _RESOURCE.match(line):
            resource_hit = True
            continue
        m = _VERIFYING.match(line)
        if m:
            current = _member(m.group(2))
            members.setdefault(current, True)
            if resource_hit:
                members[current] = False
                no_resource.append(current)
                resource_hit = False
            continue
        r = _RESULT.match(line)
        if r and current is not None:
            if r.group(1) != "verified":
                members[current] = False
                if r.group(1) == "timed out":
                    timed_out.append(current)
                elif r.group(1) == "inconclusive":
                    inconclusive.append(current)
                elif r.group(1) == "out of resource" and current not in no_resource:
                    no_resource.append(current)
            current = None
            continue
        e = _ERROR.match(line)
        if e and len(errors) < 5:
            where = f"line {e.group(1)}"
            errors.append(f"{where}: {e.group(4).strip()}")
        p = _PARSE.search(line)
        if p:
            parse_failed = True
            errors.append(line.strip())
        s = _SUMMARY.search(line)
        if s:
            summary = (int(s.group(1)), int(s.group(2)))
    return VerifierReport(
        members,
        tuple(errors),
        summary,
        parse_failed,
        tuple(timed_out),
        tuple(dict.fromkeys(no_resource)),
        tuple(inconclusive),
    )


#: z3 resource units per Boogie implementation. Chosen from measurements
#: (`bench/bench_dafny_rlimit.py`, ``docs/budgets.md``): the most any of the 445 DafnyBench ground
#: truths needs in one implementation, times a factor of about 5.
RLIMIT = 50_000_000
#: z3 options (Boogie's ``/z3opt:``) for a task whose reference verifies without z3's ``nlsat``
#: (issue 33). z3 4.8's nonlinear procedure ``nlsat`` (called by its arithmetic solver when
#: incremental linearisation finds no lemma) does not charge its work to the resource limit: a
#: failing nonlinear quantified assertion (the Fermat probe, ``x*x*x + y*y*y != z*z*z``) ground
#: there for 12 minutes at any ``/rlimit``. Without it z3 charges every step and stops at the
#: rlimit (answering "canceled", which Boogie prints as "timed out"); Groebner bases, tangent and
#: order lemmas still reason about ``*``. Some references need ``nlsat`` (a power function's
#: lemma: 5 s of CPU with it, the whole rlimit without), so the evaluator chooses per task.
NO_NLSAT = ("smt.arith.nl.nra=false",)
#: Boogie's per-implementation wall-clock limit, kept only as a hang guard (seconds)
HANG_TIME_LIMIT = 600
#: the sandbox's limits: wall clock is the run's hang guard; CPU time per process a backstop far
#: above what the rlimit allows (the z3 process serves every implementation of a file)
DEFAULT_LIMITS = Limits(
    wall_s=1800.0, cpu_s=1200.0, memory_mb=4096, max_procs=256, max_file_mb=64, output_chars=400_000
)


class DafnyVerifier:
    """Runs one Dafny program in the sandbox; `rlimit` is Boogie's per-implementation resource
    limit (the budget), `time_limit` its per-implementation wall-clock limit (a hang guard),
    `z3_options` z3 parameters passed through ``/z3opt:`` (default none; see `NO_NLSAT`)."""

    def __init__(
        self,
        sandbox: Sandbox | None = None,
        *,
        time_limit: int = HANG_TIME_LIMIT,
        limits: Limits | None = None,
        rlimit: int = RLIMIT,
        z3_options: tuple[str, ...] = (),
    ) -> None:
        self.dafny = find_dafny()
        self.limits = limits or DEFAULT_LIMITS
        # a Dafny outside the system dirs (CM_GYM_DAFNY) must be visible in the minimal file tree
        self.sandbox = sandbox or Sandbox(
            self.limits, extra_paths=(os.path.dirname(os.path.realpath(self.dafny)),)
        )
        self.time_limit = int(time_limit)
        self.rlimit = int(rlimit)
        self.z3_options = tuple(z3_options)

    def argv(self, filename: str = "task.dfy", z3_options: tuple[str, ...] | None = None) -> list[str]:
        """The verifier command line (relative to the copy)."""
        opts = self.z3_options if z3_options is None else z3_options
        return [self.dafny, "/compile:0", "/trace", "/nologo", f"/rlimit:{self.rlimit}",
                f"/timeLimit:{self.time_limit}", *(f"/z3opt:{o}" for o in opts), filename]  # fmt: skip

    def verify(
        self, program: str, *, cpu_s: float | None = None, z3_options: tuple[str, ...] | None = None
    ) -> tuple[VerifierReport, SandboxResult]:
        """Verify `program` in a throw-away copy; the report and the raw run. `cpu_s` replaces the
        CPU-time backstop per process of `limits`, `z3_options` the verifier's, for this run."""
        limits = self.limits if cpu_s is None else dataclasses.replace(self.limits, cpu_s=float(cpu_s))
        res = self.sandbox.run(self.argv(z3_options=z3_options), {"task.dfy": program}, limits=limits)
        output = clean_output(res.stdout + "\n" + res.stderr)
        return parse_output(output), res
