"""The SQL world model H: run a query in a sandbox and compare its result with the reference.

Sandbox, in layers: (1) the statement is vetted by a linear-time tokenizer (`vetting.py`): one
statement that starts with SELECT, WITH, VALUES or "(" — writes are refused; (2) the database is
opened read-only (``mode=ro``; ``immutable=1`` for files that are not ours), so the file cannot
change; (3) an authorizer allows only reads, SELECTs, recursive CTEs and non-dangerous functions;
(4) a progress handler counts SQLite virtual-machine steps and stops a query once its *step
budget* (`step_budget`, default `STEP_BUDGET`) is spent: status "budget", the same verdict on a
quiet and on a loaded machine; (5) at most `row_cap` rows are fetched, values are capped at 1 MB
and the result's bytes at `memory_mb`; (6) a query that is not *bounded* (it calls a function
such as ``instr``, ``replace``, ``printf`` or ``zeroblob``, has a computed LIKE pattern or a
recursive CTE: one SQLite call that the progress handler cannot interrupt, or memory that grows
inside SQLite) runs in a killable worker process (`cm_gym.evaluators.Worker`) under the same step
budget, a CPU-time backstop (`cpu_limit_s`, status "budget": work inside one call costs no steps)
and a memory cap of `memory_mb`. Bounded queries run in this process, at the cost they always
had. Wall time is only a hang guard (`hang_guard_s`, far above what the step budget takes): a
query it stops is retried once, then its status is "infrastructure" (`cm_gym.evaluators.budgets`:
not the query's failure, never cached). Every refusal or failure is an `Outcome` with score 0, a
status and a reason; ``details`` names the budget (``budget_kind`` "sqlite-vm-steps").

Reference results are computed once per (database, reference query) and kept in memory; one
read-only connection per database file is reused (in this process and in the worker). Verdicts
are kept per (database content, reference, query, limits), in this process and across processes
(`verdict_memo.VerdictMemo`): the step budget makes a check deterministic. A verdict that depends
on the machine — the hang guard ("infrastructure"), a worker's CPU or memory kill, a crash — is
never kept.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from typing import Any

from cm_gym.core.types import Action, AgentState, Outcome
from cm_gym.domains.sql._engine import MAX_QUERY_CHARS, PROGRESS_STEPS, Engine, execute
from cm_gym.domains.sql.compare import Result, compare
from cm_gym.domains.sql.instances import InstanceCache
from cm_gym.domains.sql.outcomes import failure, scored, solved_like
from cm_gym.domains.sql.testsuite import InstanceChecker, InstanceReport
from cm_gym.domains.sql.verdict_memo import VerdictMemo, repeatable
from cm_gym.domains.sql.vetting import vet
from cm_gym.evaluators.budgets import SQLITE_STEPS, budget_details, infrastructure
from cm_gym.evaluators.worker import Worker

logger = logging.getLogger(__name__)

_ORDER_BY = re.compile(r"\border\s+by\b", re.I)
KILL_GRACE_S = 1.0
ISOLATION_MODES = ("auto", "worker", "none")
#: SQLite virtual-machine steps one query may use. Chosen from measurements (`bench/bench_budgets.py`):
#: the costliest of Spider's 642 gold queries needs 25,200 steps and the costliest of 4,494 real
#: LLM predictions on them (llm-outputs/spider) 843,000; the budget is ~120x the latter, room for
#: honest but inefficient queries on larger databases (about 4 s of CPU time on the 2-core
#: reference machine at ~25M steps/s).
STEP_BUDGET = 100_000_000
#: the CPU-time backstop of a query run in the worker (work inside one SQLite call costs no steps)
CPU_LIMIT_S = 20.0
#: the wall-clock hang guard: ~30x what the step budget takes on the reference machine
HANG_GUARD_S = 120.0


@dataclass(frozen=True)
class _Reference:
    result: Result | None
    ordered: bool
    error: str = ""
    solved: Outcome | None = None  # the shared Outcome of a result equal to this one (read-only)


class SQLEvaluator:
    """Execution-accuracy checker for SQL tasks (`Task.meta["db_path"]`, `Task.reference`).

    `check` scores 1.0 / 0.0 (or partial credit with ``partial_credit=True``, see
    `cm_gym.domains.sql.compare`); it never raises on a bad action and never mutates the state.
    Statuses: "ok" (checked; right or wrong), "error" (empty, not SQL, several statements, SQL
    error, missing/corrupt database, broken reference), "refused" (a write or other denied
    operation), "budget" (more than `step_budget` virtual-machine steps, more than `cpu_limit_s`
    of CPU in the worker, more than `row_cap` rows, or more than `memory_mb` of result or of
    memory in the worker), "infrastructure" (the wall-clock hang guard `hang_guard_s` stopped it
    twice; `budget_s` is its older name). `isolation`: "auto" (bounded queries
    in-process, the rest in the worker; see module doc), "worker" (every query in the worker) or
    "none" (every query in-process: no hard bound; only for measuring what isolation costs).
    One instance is meant for one thread (vector envs in subprocesses each get a pickled copy,
    which reopens its connections and starts its own worker when needed).
    """

    def __init__(
        self,
        *,
        budget_s: float | None = None,
        row_cap: int = 10_000,
        partial_credit: bool = False,
        digits: int = 10,
        progress_steps: int = PROGRESS_STEPS,
        memory_mb: int = 512,
        isolation: str = "auto",
        step_budget: int = STEP_BUDGET,
        cpu_limit_s: float = CPU_LIMIT_S,
        hang_guard_s: float | None = None,
        instances: int = 0,
        instance_seed: int = 0,
        instance_dir: str | None = None,
        verdict_on_instances: bool = False,
    ) -> None:
        if isolation not in ISOLATION_MODES:
            raise ValueError(f"isolation must be one of {ISOLATION_MODES}, got {isolation!r}")
        if int(step_budget) <= 0 or not float(cpu_limit_s) > 0:
            raise ValueError("step_budget and cpu_limit_s must be positive")
        guard = hang_guard_s if hang_guard_s is not None else budget_s
        self.budget_s = float(guard) if guard is not None else HANG_GUARD_S  # the hang guard
        self.step_budget, self.cpu_limit_s = int(step_budget), float(cpu_limit_s)
        self.row_cap, self.partial_credit = row_cap, partial_credit
        self.digits, self.progress_steps = digits, progress_steps
        self.memory_mb, self.isolation = memory_mb, isolation
        self._engine = Engine()
        self._worker: Worker | None = None
        self._references: dict[tuple[str, str], _Reference] = {}
        #: generated variants of each database (`instances.py`, `testsuite.py`): 0 = off (default)
        if verdict_on_instances and not instances:
            raise ValueError("verdict_on_instances needs instances > 0 (database variants to check on)")
        self.instances, self.verdict_on_instances = int(instances), bool(verdict_on_instances)
        self._checker: InstanceChecker | None = (
            InstanceChecker(self, InstanceCache(instances, instance_seed, instance_dir))
            if instances
            else None
        )
        #: where the last query ran ("process" or "worker") and the worker's peak memory (MB, when
        #: the worker tracks memory); for diagnostics and benchmarks
        self.last_run: dict[str, Any] = {}
        #: kept verdicts (`verdict_memo.VerdictMemo`; ``memo.size = 0`` turns it off)
        self.memo = VerdictMemo()

    # -- pickling (vector envs in subprocesses): connections are reopened on demand ---------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_engine"] = Engine()
        return state

    def close(self) -> None:
        """Close every open connection and stop the worker (both restart on the next check)."""
        self._engine.close()
        if self._worker is not None:
            self._worker.close()

    @property
    def worker(self) -> Worker:
        """The killable worker that runs unbounded queries (started on first use)."""
        if self._worker is None:
            # SQLite starts no process (extensions are refused): its CPU clock meters the worker
            self._worker = Worker("cm_gym.domains.sql._engine", memory_mb=self.memory_mb, children_cpu=False)
        return self._worker

    # -- execution ---------------------------------------------------------------------------
    @property
    def hang_guard_s(self) -> float:
        """The wall-clock hang guard of one query (seconds)."""
        return self.budget_s

    def run(self, path: str, sql: str, *, immutable: bool = True) -> tuple[Result | None, str, str]:
        """Execute `sql` in the sandbox: (result, status, reason); status "ok" when it ran. The
        steps it used are in ``last_run["steps"]``."""
        rows, ncols, status, reason = self._rows(path, sql, immutable)
        if rows is None:
            return None, status, reason
        return Result(rows, ncols, self.digits), "ok", ""

    def _rows(
        self, path: str, sql: str, immutable: bool, retry: str = ""
    ) -> tuple[list[Any] | None, int, str, str]:
        """`run` without wrapping the rows in a `Result` (the check compares raw rows first):
        (rows or None, column count, status, reason), retried once after the hang guard (`retry`:
        the reason of a first run the hang guard already stopped)."""
        out = self._run(path, sql, immutable) if not retry else (None, 0, "infrastructure", retry)
        if out[2] == "infrastructure":
            logger.warning("SQL query stopped by the hang guard (%s); retrying once", out[3])
            out = self._run(path, sql, immutable)
        return out

    def _run(self, path: str, sql: str, immutable: bool) -> tuple[list[Any] | None, int, str, str]:
        self.last_run = {}  # a query refused before it runs used no steps (not the last query's)
        sql = sql.strip()
        if sql.endswith(";"):
            sql = sql.rstrip("; \t\r\n")
        if not sql:
            return None, 0, "error", "empty query"
        if len(sql) > MAX_QUERY_CHARS:
            return None, 0, "refused", f"query longer than {MAX_QUERY_CHARS} characters"
        vetting = vet(sql)
        if vetting.status != "ok":
            return None, 0, vetting.status, vetting.reason
        in_process = self.isolation == "none" or (self.isolation == "auto" and vetting.bounded)
        box = self._engine.boxes.get((path, immutable, self.progress_steps)) if in_process else None
        if box is not None:  # the common case, `Engine.run` without its layers: an open connection
            box.arm(self.step_budget, self.budget_s)
            rows, ncols, status, reason = execute(box, sql, self.budget_s, self.row_cap, self.memory_mb << 20)
            if status != "retry":  # (undecodable text: the engine retries with lenient decoding)
                self.last_run = {"where": "process", "steps": box.calls * box.progress_steps}
                return rows, ncols, status, reason
        args = (path, sql, immutable, self.budget_s, self.row_cap, self.memory_mb << 20, self.progress_steps,
                self.step_budget)  # fmt: skip
        if in_process:
            rows, ncols, status, reason, steps = self._engine.run(*args)
            self.last_run = {"where": "process", "steps": steps}
        else:
            res = self.worker.call(
                "run_query", *args, timeout=self.budget_s + KILL_GRACE_S, cpu_budget_s=self.cpu_limit_s
            )
            self.last_run = {"where": "worker", "why": vetting.why_unbounded, "peak_mb": res.peak_rss_mb,
                             "cpu_s": res.cpu_s, "steps": None, "status": res.status}  # fmt: skip
            if res.ok:
                rows, ncols, status, reason, steps = res.value
                self.last_run["steps"] = steps
            elif res.status == "timeout":
                rows, ncols, status = None, 0, "infrastructure"
                reason = f"the query ran past its wall-clock hang guard of {self.budget_s:g} s (its worker was killed)"
            elif res.status == "cpu":
                rows, ncols, status = None, 0, "budget"
                reason = (
                    f"the query used more than its {self.cpu_limit_s:g} s of CPU time (its worker was killed)"
                )
            else:
                rows, ncols, status, reason = None, 0, res.status, res.error
        return rows, ncols, status, reason

    def reference(self, path: str, sql: str, *, immutable: bool = True) -> _Reference:
        """The (cached) reference result of a task."""
        key = (path, sql)
        ref = self._references.get(key)
        if ref is None:
            result, status, reason = self.run(path, sql, immutable=immutable)
            ordered = _has_top_level_order(sql)
            details = budget_details(SQLITE_STEPS, self.step_budget)
            solved = scored(result, result, ordered, None, False, details) if result is not None else None
            ref = _Reference(result, ordered, "" if status == "ok" else f"{status}: {reason}", solved)
            if ref.error:
                logger.warning("reference query failed on %s: %s", path, ref.error)
            if status != "infrastructure":  # the hang guard says nothing about the query: not kept
                self._references[key] = ref
        return ref

    # -- the world model ---------------------------------------------------------------------
    def check(self, state: AgentState, action: Action | str) -> Outcome:
        """Evaluate `action` against the task's reference result (never raises); with
        ``verdict_on_instances`` also on the database's variants. Memoised (module doc)."""
        sql = action.text if isinstance(action, Action) else str(action)
        task = state.task
        meta = task.meta or {}
        key = None
        if not self.verdict_on_instances and self.memo.size > 0:  # (size 0: the memo is off)
            key = self.memo.key(self._engine, meta.get("db_path") or "", meta.get("immutable", True) is not False,
                                self.progress_steps, (task.reference or "", sql, self.step_budget, self.row_cap,
                                self.partial_credit, self.digits, self.memory_mb, self.isolation, self.cpu_limit_s,
                                self.progress_steps))  # fmt: skip
            found = self.memo.get(key) if key is not None else None
            if found is not None:
                return found
        self.last_run = {}
        outcome = self._verdict(state, sql) if self.verdict_on_instances else self._check(state, sql)
        if key is not None and repeatable(outcome, self.last_run):
            self.memo.put(key, outcome)
        return outcome

    def _verdict(self, state: AgentState, action: Action | str) -> Outcome:
        outcome = self._check(state, action)
        if self.verdict_on_instances and outcome.solved:
            try:
                return self._instance_verdict(
                    state, action.text if isinstance(action, Action) else str(action), outcome
                )
            except Exception as err:  # noqa: BLE001 - a broken variant must not kill the batch
                self.last_run = {"where": "crash"}
                logger.exception("checking on database variants failed for %s", state.task.task_id)
                return failure("error", f"checking on database variants failed: {err}")
        return outcome

    def _check(self, state: AgentState, action: Action | str) -> Outcome:
        task = state.task
        sql = action.text if isinstance(action, Action) else str(action)
        meta = task.meta or {}
        path = meta.get("db_path") or ""
        immutable = meta.get("immutable", True) is not False
        if not path:
            return failure("error", f"task {task.task_id} names no database (meta['db_path'])")
        if not task.reference or task.reference.isspace():
            return failure("error", f"task {task.task_id} has no reference query to compare with")
        try:
            ref = self._references.get((path, task.reference)) or self.reference(
                path, task.reference, immutable=immutable
            )
        except Exception as err:  # noqa: BLE001 - a broken task must not kill the batch
            self.last_run = {"where": "crash"}
            logger.exception("reference evaluation crashed for %s", task.task_id)
            return failure("error", f"reference evaluation failed: {err}")
        if ref.result is None and ref.error.startswith("infrastructure"):
            return infrastructure(f"the task's reference query: {ref.error.split(': ', 1)[-1]}",
                                  **budget_details(SQLITE_STEPS, self.step_budget))  # fmt: skip
        if ref.result is None:
            return failure("unevaluable", f"the task's reference query cannot be evaluated ({ref.error})")
        try:
            rows, ncols, status, reason = self._run(path, sql, immutable)  # `_rows`, one frame less
            if status == "infrastructure":
                rows, ncols, status, reason = self._rows(path, sql, immutable, retry=reason)
        except Exception as err:  # noqa: BLE001
            self.last_run = {"where": "crash"}
            logger.exception("sandbox crashed on %s", task.task_id)
            return failure("error", f"evaluation failed: {err}")
        steps = self.last_run.get("steps")
        expected, solved = ref.result, ref.solved
        if rows is not None and solved is not None and ncols == expected.ncols and rows == expected.rows:
            # fast path: identical rows (the common case for a right answer), with this query's
            # steps; the reference's details already name the budget's kind and limit
            return solved_like(solved, {**solved.details, "budget_used": steps})
        budget = budget_details(SQLITE_STEPS, self.step_budget, steps)
        if rows is None and status == "infrastructure":
            return infrastructure(reason, **budget)
        if rows is None:
            return failure(status, reason, budget)
        result = Result(rows, ncols, self.digits)
        cmp = compare(result, expected, ordered=ref.ordered)
        if cmp.correct and solved is not None and ncols == expected.ncols and len(rows) == len(expected.rows):
            # right in another row or column order: the reference's shape, so its Outcome
            return solved_like(solved, {**solved.details, "budget_used": steps})
        return scored(result, expected, ref.ordered, cmp, self.partial_credit, budget)

    def _instance_verdict(self, state: AgentState, sql: str, outcome: Outcome) -> Outcome:
        """With ``verdict_on_instances``: a query right on the task's database must also be right
        on every variant where the reference is well-defined (`testsuite.py`), else it fails."""
        if not (self.verdict_on_instances and outcome.solved and self._checker is not None):
            return outcome
        task = state.task
        report = self._checker.check(task.meta["db_path"], task.reference, sql)
        details = {**outcome.details, **report.as_dict()}
        if report.matches:
            return replace(outcome, details=details)
        feedback = (
            "Wrong result on other data: the query returns the expected result on the task's database "
            f"but not on {report.wrong} of {report.counted} generated variants of it (same schema, "
            "other rows); it depends on the rows that happen to be there."
        )
        return Outcome(0.0, False, feedback, reason="wrong result on a database variant", details=details)

    def instance_report(self, state: AgentState, sql: str) -> InstanceReport | None:
        """How `sql` fares on the variants of the task's database (None without variants)."""
        meta = state.task.meta or {}
        if self._checker is None or not meta.get("db_path") or not state.task.reference:
            return None
        return self._checker.check(meta["db_path"], state.task.reference, sql)

    def confirm_contrast(self, state: AgentState, a_minus: str, a_plus: str) -> dict[str, Any] | None:
        """Admission on several database instances (`testsuite.InstanceChecker.confirm`): whether
        a⁺ also matches the reference on the variants of the task's database; None when this
        evaluator has no variants (``instances=0``, the default: admission as before)."""
        meta = state.task.meta or {}
        if self._checker is None or not meta.get("db_path") or not state.task.reference:
            return None
        return self._checker.confirm(meta["db_path"], state.task.reference, a_minus, a_plus)


def _has_top_level_order(sql: str) -> bool:
    """Whether the outermost query sorts (parsed only when ORDER BY occurs at all)."""
    if not _ORDER_BY.search(sql):
        return False
    from cm_gym.domains.sql import sqlast

    try:
        return sqlast.has_top_level_order(sqlast.parse(sql))
    except sqlast.SQLParseError:
        return True
