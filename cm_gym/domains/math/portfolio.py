"""Portfolio proof search: the references of the simulated LLM.

For every statement, one sandboxed ``coqc`` run tries a fixed portfolio of short tactic scripts
(`CANDIDATES`, decision procedures of the kind a model reaches for first: ``lia``, ``lra``,
``nia``, ``nra``, ``ring``, ``field``, with ``intros``, ``subst``, ``split_Rabs`` …) each under
``assert_succeeds (timeout T (solve [...]))``, so a failing or slow try costs at most T seconds and
the statement's libraries are loaded once. Every candidate that succeeds there is then checked for
real, in order, by `MathEvaluator` (``Qed`` and ``Print Assumptions``); the first that verifies is
the statement's reference. Statements with a verified proof form the default benchmark; the others
are reported (does not load with the standard library / no portfolio proof) and stay available to
real LLMs, which need no reference.

The found-proof table (theorem name → script, never the statement) ships with the package as
``data/minif2f_valid_proofs.json``; ``python -m cm_gym.domains.math.portfolio --write``
regenerates it and ``bench/bench_math.py --verify`` re-checks every stored proof.
"""

from __future__ import annotations

import argparse
import json
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cm_gym.core.paths import cache_dir
from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.math.checker import FILENAME
from cm_gym.domains.math.evaluator import MathEvaluator
from cm_gym.domains.math.proofs import TABLE_PATH, write_table, wrong_procedure_rates
from cm_gym.domains.math.script import parse_script, tactic_body
from cm_gym.domains.math.statement import Statement, statement_of
from cm_gym.evaluators.sandbox import Limits

logger = logging.getLogger(__name__)

PORTFOLIO_VERSION = "1"
MAX_RESUMES = 4
#: rewrite with every hypothesis that defines a function (``forall x, f x = …``), then drop it
_REWRITE_DEFS = "repeat match goal with H : forall _, _ = _ |- _ => rewrite !H in *; clear H end."
#: (name, script): tried in this order; the first that verifies is the reference
CANDIDATES: tuple[tuple[str, str], ...] = (
    ("lia", "Require Import Lia.\nintros.\nlia."),
    ("lra", "Require Import Lra.\nintros.\nlra."),
    ("ring", "intros.\nring."),
    ("field", "intros.\nfield."),
    ("reflexivity", "reflexivity."),
    ("vm_compute", "vm_compute.\nreflexivity."),
    ("subst_lia", "Require Import Lia.\nintros.\nsubst.\nlia."),
    ("subst_lra", "Require Import Lra.\nintros.\nsubst.\nlra."),
    ("subst_field", "intros.\nsubst.\nfield."),
    ("field_lra", "Require Import Lra.\nintros.\nfield.\nall: lra."),
    ("nia", "Require Import Lia.\nintros.\nnia."),
    ("nra", "Require Import Lra.\nintros.\nnra."),
    ("subst_nia", "Require Import Lia.\nintros.\nsubst.\nnia."),
    ("subst_nra", "Require Import Lra.\nintros.\nsubst.\nnra."),
    ("abs_lra", "Require Import Lra.\nintros.\nsplit_Rabs.\nall: lra."),
    ("abs_nra", "Require Import Lra.\nintros.\nsplit_Rabs.\nall: nra."),
    ("simpl_lia", "Require Import Lia.\nintros.\nsimpl.\nlia."),
    ("simpl_lra", "Require Import Lra.\nintros.\nsimpl.\nlra."),
    ("field_simplify_lra", "Require Import Lra.\nintros.\nfield_simplify.\nall: lra."),
    ("field_simplify_nra", "Require Import Lra.\nintros.\nfield_simplify.\nall: nra."),
    ("split_lra", "Require Import Lra.\nintros.\nrepeat split.\nall: lra."),
    ("split_nra", "Require Import Lra.\nintros.\nrepeat split.\nall: nra."),
    ("rewrite_defs_lra", f"Require Import Lra.\nintros.\n{_REWRITE_DEFS}\nlra."),
    ("rewrite_defs_nra", f"Require Import Lra.\nintros.\n{_REWRITE_DEFS}\nnra."),
    ("rewrite_defs_lia", f"Require Import Lia.\nintros.\n{_REWRITE_DEFS}\nlia."),
    ("rewrite_defs_field", f"Require Import Lra.\nintros.\n{_REWRITE_DEFS}\nfield.\nall: lra."),
    ("auto", "intros.\nauto."),
)
#: loaded in the probe so that every candidate's tactics exist (a name Coq cannot find is an error no
#: ``tryif`` catches); the verification step runs each script with only its own header
PROBE_LIBRARIES = ("Coq.micromega.Lia", "Coq.micromega.Lra", "Coq.Reals.Reals", "Coq.setoid_ring.Field")


def probe_expression(script: str) -> str:
    """A candidate script as one tactic expression (``intros; subst; nra``) for the probe."""
    parsed = parse_script(script)
    return "; ".join(tactic_body(s) for s in parsed.tactics)


@dataclass
class SearchResult:
    """One statement's search: which candidates Coq accepted in the probe, the verified reference
    (candidate name and script) or why there is none, and the time spent."""

    theorem: str
    accepted: list[str] = field(default_factory=list)
    candidate: str = ""
    script: str = ""
    reason: str = ""
    seconds: float = 0.0
    tried: int = 0
    digest: str = ""

    @property
    def proved(self) -> bool:
        return bool(self.script)


def probe_text(statement: Statement, per_try_s: int, nonce: str, start: int = 0) -> str:
    """The probe file: the statement, then the candidates from `start` on under ``assert_succeeds``."""
    lines = [statement.prefix, "Proof.", f"Require Import {' '.join(PROBE_LIBRARIES)}."]
    for i, (_, script) in enumerate(CANDIDATES):
        if i < start:
            continue
        expr = probe_expression(script)
        lines.append(
            f'tryif assert_succeeds (timeout {per_try_s} (solve [{expr}])) then idtac "CMOK_{nonce} {i}" '
            f'else idtac "CMNO_{nonce} {i}".'
        )
    lines.append("Abort.")
    return "\n".join(lines) + "\n"


class PortfolioSearch:
    """Runs the search with `evaluator`'s sandbox and installation (see module doc)."""

    def __init__(self, evaluator: MathEvaluator, *, per_try_s: int = 5) -> None:
        self.evaluator = evaluator
        self.per_try_s = int(per_try_s)
        wall = 60.0 + self.per_try_s * len(CANDIDATES)
        self.limits = Limits(**{**evaluator.limits.__dict__, "wall_s": wall, "cpu_s": wall})

    def search(self, task: Task, statement: Statement) -> SearchResult:
        """Probe, then verify accepted candidates in order."""
        t0 = time.perf_counter()
        result = SearchResult(statement.name, digest=statement.digest)
        ok, tried, error = self._probe(statement)
        result.accepted = [CANDIDATES[i][0] for i in sorted(ok)]
        result.tried = len(tried)
        if not tried:
            result.reason = "does not load: " + error
        for i in sorted(ok):
            name, script = CANDIDATES[i]
            outcome = self.evaluator.check(AgentState(task), Action(script))
            if outcome.solved:
                result.candidate, result.script = name, parse_script(script).text()
                break
        if not result.proved and not result.reason:
            result.reason = "no portfolio proof" if not ok else "accepted in the probe but not at Qed"
        result.seconds = time.perf_counter() - t0
        return result

    def _probe(self, statement: Statement) -> tuple[set[int], set[int], str]:
        """(accepted, tried, first error) over all candidates. A candidate that kills the probe
        (a stack overflow in ``vm_compute``, the memory limit) counts as failed and the probe
        resumes after it, at most `MAX_RESUMES` times."""
        ok: set[int] = set()
        tried: set[int] = set()
        error = ""
        start = 0
        argv = [self.evaluator.install.coqc, "-q", "-no-glob", "-o", "scratch/task.vo", FILENAME]
        for _ in range(MAX_RESUMES + 1):
            nonce = secrets.token_hex(6)
            text = probe_text(statement, self.per_try_s, nonce, start)
            run = self.evaluator.sandbox.run(argv, {FILENAME: text}, limits=self.limits)
            lines = run.stdout.splitlines()
            got_ok = {int(ln.split()[1]) for ln in lines if ln.startswith(f"CMOK_{nonce} ")}
            got = got_ok | {int(ln.split()[1]) for ln in lines if ln.startswith(f"CMNO_{nonce} ")}
            ok |= got_ok
            tried |= got
            if not got and start == 0:
                return ok, tried, _first_error(run.stderr) if not run.timed_out else "probe timed out"
            nxt = max(got) + 1 if got else start
            if nxt >= len(CANDIDATES):
                break
            error = _first_error(run.stderr) or run.describe_exit()
            logger.info("%s: candidate %s stopped the probe (%s); resuming after it",
                        statement.name, CANDIDATES[nxt][0], error)  # fmt: skip
            tried.add(nxt)
            start = nxt + 1
            if start >= len(CANDIDATES):
                break
        return ok, tried, error

    def run(
        self,
        tasks: Sequence[Task],
        statements: Sequence[Statement],
        *,
        workers: int = 2,
        progress: Callable[[SearchResult], None] | None = None,
    ) -> list[SearchResult]:
        """Search every statement (`workers` at a time), results in input order."""

        def one(pair: tuple[Task, Statement]) -> SearchResult:
            res = self.search(*pair)
            if progress:
                progress(res)
            return res

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(one, list(zip(tasks, statements, strict=True))))


def _first_error(stderr: str) -> str:
    """Coq's first error message, on one line."""
    text = stderr.split("Error:", 1)[1] if "Error:" in stderr else stderr
    text = text.split('\nFile "', 1)[0]
    return " ".join(text.split())[:200] or "coqc failed"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run the search over the valid statements and print / write the table."""
    from cm_gym.domains.math.loader import load_minif2f_tasks

    ap = argparse.ArgumentParser(
        description="miniF2F-rocq portfolio proof search (references for the simulator)"
    )
    ap.add_argument(
        "--data", type=Path, default=None, help="folder holding minif2f-rocq/valid (default: CM_GYM_DATA)"
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--per-try", type=int, default=5, help="seconds per candidate in the probe")
    ap.add_argument("--limit", type=int, default=None, help="only the first N statements")
    ap.add_argument("--write", action="store_true", help=f"write the table to {TABLE_PATH}")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    tasks = load_minif2f_tasks(root=args.data, proved_only=False)[: args.limit]
    statements = [statement_of(t) for t in tasks]
    evaluator = MathEvaluator()
    search = PortfolioSearch(evaluator, per_try_s=args.per_try)
    t0 = time.perf_counter()
    from cm_gym.core.progress import progress_bar

    with progress_bar(len(tasks), "portfolio", "thm") as bar:
        results = search.run(tasks, statements, workers=args.workers, progress=lambda r: bar.update(1))
    raw = cache_dir("math") / "portfolio-last.json"
    raw.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    wall = time.perf_counter() - t0
    proved = [r for r in results if r.proved]
    loadless = [r for r in results if r.reason.startswith("does not load")]
    by: dict[str, int] = {}
    for r in proved:
        by[r.candidate] = by.get(r.candidate, 0) + 1
    print(f"statements: {len(results)}; do not load with the stdlib: {len(loadless)}; "
          f"proved: {len(proved)} ({100 * len(proved) / max(1, len(results)):.1f}%); "
          f"wall {wall:.0f}s with {args.workers} workers, per try {args.per_try}s")  # fmt: skip
    print(
        "proofs by candidate: " + ", ".join(f"{k} {v}" for k, v in sorted(by.items(), key=lambda kv: -kv[1]))
    )
    if args.write:
        accepted = {r.theorem: r.accepted for r in results if r.proved}
        features = {str(t.meta["theorem"]): dict(t.features) for t in tasks}
        rates = {"wrong_procedure": wrong_procedure_rates(accepted, features)}
        write_table(results, evaluator.install.short_version, PORTFOLIO_VERSION, rates)
        print(f"wrote {TABLE_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
