"""Benchmark the SAT and SMT world models (issue 6). Prints figures; asserts nothing.

1. Checks/s per task kind, and the ratio of our evaluator's time to calling the solver directly on
   the same inputs in the same run (target <= 1.3x). "Direct" is the bare solver work the check
   needs: python-sat on the already-parsed clauses with the same budget, z3 in a fresh context on
   the same text with the same rlimit. For encodings the direct call solves the already-compiled
   CNF (the evaluator also compiles, decodes and runs the independent checker), so two ratios are
   shown: against one solve and against the two phase-biased solves the evaluator performs.
2. The shared data: how many instances the loaders read, and whether the reference configuration
   reproduces every SAT/UNSAT label (SATLIB family) and every ``:status`` (SMT-LIB) under the
   default budget; the ones that hit the budget are listed.
3. Draft failure rates of the simulated LLM (first decision, BaseAgent, seed 0) per benchmark.

Usage: python bench/bench_sat_smt.py [--limit N] [--sample N] [--no-rates]
"""

from __future__ import annotations

import argparse
import collections
import time
from collections.abc import Callable, Sequence
from typing import Any

import z3
from pysat.solvers import Solver

from cm_gym.agent import BaseAgent
from cm_gym.domains.sat.encoding import compile_encoding
from cm_gym.domains.sat.evaluator import SatEvaluator, _instance, compiled_encoding
from cm_gym.domains.sat.problems import family
from cm_gym.domains.sat.solver import parse_config as parse_sat_config
from cm_gym.domains.smt.evaluator import SmtEvaluator
from cm_gym.domains.smt.sandbox import vet_script
from cm_gym.domains.smt.smtlib import file_text
from cm_gym.domains.smt.solver import make_solver
from cm_gym.domains.smt.solver import parse_config as parse_smt_config
from cm_gym.registry import get_benchmark, get_domain
from cm_gym.types import Action, AgentState, Task


def paired(
    items: Sequence[Any], ours: Callable[[Any], Any], direct: Callable[[Any], Any], repeats: int
) -> tuple[float, float]:
    """Total time of `ours` and `direct` over `items`, interleaved item by item (so load on a
    shared machine hits both alike), keeping each item's best of `repeats`."""
    best_ours = [float("inf")] * len(items)
    best_direct = [float("inf")] * len(items)
    for _ in range(repeats):
        for i, item in enumerate(items):
            t0 = time.perf_counter()
            ours(item)
            t1 = time.perf_counter()
            direct(item)
            t2 = time.perf_counter()
            best_ours[i] = min(best_ours[i], t1 - t0)
            best_direct[i] = min(best_direct[i], t2 - t1)
    return sum(best_ours), sum(best_direct)


def row(label: str, n: int, ours: float, direct: float, extra: str = "") -> None:
    print(
        f"  {label:<28} n={n:<5} evaluator {n / ours:8.0f} checks/s   direct {n / direct:8.0f}/s   "
        f"ratio {ours / direct:5.2f}x{extra}"
    )


# -- 1. throughput --------------------------------------------------------------------------------
def _pysat(clauses: Any, solver: str, budget: int, n_phase: int = 0, sign: int = 0) -> None:
    with Solver(name=solver, bootstrap_with=clauses) as s:
        if sign:
            s.set_phases([sign * v for v in range(1, n_phase + 1)])
        s.conf_budget(budget)
        if s.solve_limited():
            s.get_model()


def bench_sat_encoding(tasks: Sequence[Task], repeats: int) -> None:
    ev = SatEvaluator()
    compiled = {}
    for t in tasks:
        p = t.meta["problem"]
        compiled[t.task_id] = compile_encoding(t.reference, family(p["family"]).signature(p["params"]))

    def cold(t: Task) -> None:
        compiled_encoding.cache_clear()  # every check compiles its encoding
        ev.check(AgentState(t), Action(t.reference))

    def warm(t: Task) -> None:
        ev.check(AgentState(t), Action(t.reference))

    def one_solve(t: Task) -> None:
        _pysat(compiled[t.task_id].clauses, "cadical153", 100_000)

    def two_solves(t: Task) -> None:
        ce = compiled[t.task_id]
        for sign in (-1, 1):
            _pysat(ce.clauses, "cadical153", 100_000, ce.table.n_vars, sign)

    row("SAT encoding vs 1 solve", len(tasks), *paired(tasks, cold, one_solve, repeats))
    row(
        "SAT encoding vs 2 solves",
        len(tasks),
        *paired(tasks, cold, two_solves, repeats),
        "  <- same solver work",
    )
    for t in tasks:
        warm(t)
    row(
        "SAT encoding, cached CNF",
        len(tasks),
        *paired(tasks, warm, two_solves, repeats),
        "  (repeat submissions)",
    )


def bench_sat_solver(tasks: Sequence[Task], repeats: int) -> None:
    ev = SatEvaluator()
    for t in tasks:
        _instance(str(t.meta["path"]))  # warm the parsed-file cache for both sides
    configs = {t.task_id: parse_sat_config(t.reference) for t in tasks}

    def ours(t: Task) -> None:
        ev.check(AgentState(t), Action(t.reference))

    def direct(t: Task) -> None:
        cfg = configs[t.task_id]
        _pysat(_instance(str(t.meta["path"]))[1], cfg.solver, cfg.budget)

    row("SAT solver config", len(tasks), *paired(tasks, ours, direct, repeats))


def bench_smt_encoding(tasks: Sequence[Task], repeats: int) -> None:
    ev = SmtEvaluator()
    bodies = {t.task_id: vet_script(t.reference).body for t in tasks}

    def ours(t: Task) -> None:
        ev.check(AgentState(t), Action(t.reference))

    def direct(t: Task) -> None:
        ctx = z3.Context()
        s = z3.Solver(ctx=ctx)
        s.set("rlimit", ev.rlimit)
        s.add(z3.parse_smt2_string(bodies[t.task_id], ctx=ctx))
        if s.check() == z3.sat:
            s.model()

    row("SMT encoding", len(tasks), *paired(tasks, ours, direct, repeats))


def bench_smt_solver(tasks: Sequence[Task], repeats: int) -> None:
    ev = SmtEvaluator()
    configs = {t.task_id: parse_smt_config(t.reference) for t in tasks}

    def ours(t: Task) -> None:
        ev.check(AgentState(t), Action(t.reference))

    def direct(t: Task) -> None:
        ctx = z3.Context()
        s = make_solver(configs[t.task_id], ctx)
        s.add(z3.parse_smt2_string(file_text(str(t.meta["path"])), ctx=ctx))
        if s.check() == z3.sat:
            s.model()

    row("SMT solver config", len(tasks), *paired(tasks, ours, direct, repeats))


# -- 2. shared data ---------------------------------------------------------------------------------
def reproduce(bench: str, limit: int | None, label: Callable[[Task], str]) -> None:
    spec = get_benchmark(bench)
    start = time.perf_counter()
    tasks = list(spec.load_tasks(limit=limit))
    loaded = time.perf_counter() - start
    ev = spec.domain().make_evaluator()
    per: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    budget: list[str] = []
    wrong: list[str] = []
    start = time.perf_counter()
    for t in tasks:
        o = ev.check(AgentState(t), Action(t.reference))
        verdict = o.details.get("verdict", "?")
        group = per[t.family]
        group["read"] += 1
        if o.solved and verdict == label(t):
            group["reproduced"] += 1
        elif o.status == "budget":
            group["budget"] += 1
            budget.append(t.task_id)
        else:
            group["other"] += 1
            wrong.append(f"{t.task_id} ({o.status}: {o.feedback[:80]})")
    took = time.perf_counter() - start
    total = sum(g["read"] for g in per.values())
    print(
        f"  {bench}: read {total} instances in {loaded:.1f}s; checked with the reference config in {took:.1f}s"
    )
    for fam in sorted(per):
        g = per[fam]
        print(
            f"    {fam:<14} read {g['read']:5}  reproduced {g['reproduced']:5}  hit budget {g['budget']:3}  other {g['other']:3}"
        )
    if budget:
        print(f"    hit the budget: {', '.join(budget)}")
    if wrong:
        print(f"    not reproduced: {'; '.join(wrong)}")


def satlib_label(t: Task) -> str:
    return "unsat" if t.family.startswith("uuf") else "sat"


def smtlib_label(t: Task) -> str:
    return str(t.meta["status"])


# -- 3. simulated LLM ------------------------------------------------------------------------------
def draft_rates(bench: str, limit: int | None) -> None:
    from cm_gym.llm.simulated import SimulatedLLM

    spec = get_benchmark(bench)
    tasks = list(spec.load_tasks(limit=limit)) if "LIB" in bench else list(spec.load_tasks())
    domain = get_domain(spec.domain().name)
    agent = BaseAgent(SimulatedLLM(seed=0), domain, domain.make_evaluator())
    fails: collections.Counter[str] = collections.Counter()
    seen: collections.Counter[str] = collections.Counter()
    for t in tasks:
        seen[t.family] += 1
        fails[t.family] += int(not agent.decide(AgentState(t)).outcome.solved)
    rate = sum(fails.values()) / max(1, len(tasks))
    parts = ", ".join(f"{f} {fails[f] / seen[f]:.2f}" for f in sorted(seen))
    print(f"  {bench:<7} n={len(tasks):<5} first-draft failure rate {rate:.2f}  ({parts})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--limit", type=int, default=None, help="files per SATLIB family / SMT-LIB logic (default all)"
    )
    ap.add_argument(
        "--sample", type=int, default=100, help="real-data instances per kind for the throughput runs"
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-rates", action="store_true", help="skip the simulated-LLM draft rates")
    args = ap.parse_args()

    print(
        f"1. World-model throughput (best of {args.repeats} runs; ratio = evaluator time / direct solver time)"
    )
    sat_tasks = list(get_benchmark("SAT").load_tasks())
    smt_tasks = list(get_benchmark("SMT").load_tasks())
    satlib = list(get_benchmark("SATLIB").load_tasks(limit=max(1, args.sample // 5)))
    smtlib = list(
        get_benchmark("SMTLIB").load_tasks(logics=["QF_LRA", "QF_BV"], limit=max(1, args.sample // 2))
    )
    bench_sat_encoding(sat_tasks, args.repeats)
    bench_sat_solver(satlib, args.repeats)
    bench_smt_encoding(smt_tasks, args.repeats)
    bench_smt_solver(smtlib, args.repeats)

    print("\n2. Shared data: instances read and labels reproduced by the reference configuration")
    reproduce("SATLIB", args.limit, satlib_label)
    reproduce("SMTLIB", args.limit, smtlib_label)

    if not args.no_rates:
        print("\n3. Simulated LLM (seed 0): first-draft failure rates")
        for bench in ("SAT", "SATLIB", "SMT", "SMTLIB"):
            draft_rates(bench, args.limit if args.limit is not None else 100)


if __name__ == "__main__":
    main()
