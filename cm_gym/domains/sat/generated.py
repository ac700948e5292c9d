"""Generated SAT encoding tasks (benchmark "SAT"): deterministic per seed, with look-alikes.

Each family is generated with planted solutions (so satisfiability is known analytically, not by
running a solver) and with look-alikes that need a different encoding: colouring vs
multi-colouring, pigeonhole with as many holes as pigeons vs one fewer vs capacity 2, n-queens vs
partial queens vs the unsatisfiable 2x2 / 3x3 boards, strict vs non-strict precedence scheduling.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.sat.encoding import VarTable
from cm_gym.domains.sat.problems import context_text, family

LANGUAGE_HELP = """Encoding language: one constraint family per line.
Heads: clause L..., not_both L L, implies L L, at_least_one/at_most_one/exactly_one L...,
at_least K / at_most K / exactly K L...
A literal is an atom name[i][j] (negate with -); an index is * or i, i+1, r-c, 3.
for binds: v in SET, (u, v) in PAIRS, d in -3..3. Unbound indices and * range over their dimension
(the cardinality counts over them). where filters: r - c == d, s <= t (joined by , or and).
Example: exactly_one color[v][*] for v in V"""

SAT_PREFIX = "satgen"


def _params_coloring(rng: np.random.Generator, satisfiable: bool, per_vertex: int) -> dict[str, Any]:
    if per_vertex == 1:
        n, k = int(rng.integers(6, 13)), int(rng.integers(3, 5))
        labels = [frozenset([int(c)]) for c in rng.integers(0, k, size=n)]
    else:
        n, k = int(rng.integers(5, 10)), int(rng.integers(4, 7))
        labels = [frozenset(int(c) for c in rng.choice(k, size=per_vertex, replace=False)) for _ in range(n)]
    candidates = [(u, v) for u, v in itertools.combinations(range(n), 2) if not labels[u] & labels[v]]
    density = float(rng.uniform(0.45, 0.8))
    chosen = [
        candidates[i] for i in sorted(rng.permutation(len(candidates))[: int(len(candidates) * density)])
    ]
    edges = set(chosen)
    if not satisfiable:
        size = k + 1 if per_vertex == 1 else k // per_vertex + 1
        clique = sorted(int(v) for v in rng.choice(n, size=min(size, n), replace=False))
        edges |= set(itertools.combinations(clique, 2))
    return {
        "n": n,
        "k": k,
        "per_vertex": per_vertex,
        "edges": [list(e) for e in sorted(edges)],
        "satisfiable": satisfiable,
    }


def _params_pigeonhole(rng: np.random.Generator, variant: str) -> dict[str, Any]:
    if variant == "capacity":
        holes = int(rng.integers(2, 4))
        pigeons = 2 * holes + int(rng.integers(-1, 2))
        return {"pigeons": pigeons, "holes": holes, "capacity": 2}
    holes = int(rng.integers(3, 7)) if variant == "sat" else int(rng.integers(2, 7))
    pigeons = holes if variant == "sat" else holes + 1
    return {"pigeons": pigeons, "holes": holes, "capacity": 1}


def _params_scheduling(rng: np.random.Generator, strict: bool, satisfiable: bool) -> dict[str, Any]:
    slots = int(rng.integers(3, 6))
    capacity = int(rng.integers(1, 3)) if strict and satisfiable else 2
    least = slots if strict and satisfiable else slots + 1
    jobs = int(rng.integers(least, min(capacity * slots, slots + 3) + 1))
    # plant: a chain 0..slots over the first slots+1 jobs (strictly increasing if strict, else one tie)
    chain = list(range(slots + 1))
    if strict:
        chain = chain[:slots]
        chain_slots = list(range(slots))
    else:
        tie = int(rng.integers(0, slots))
        chain_slots = sorted(list(range(slots)) + [tie])
    assign: dict[int, int] = dict(zip(chain, chain_slots, strict=True))
    load = {t: sum(1 for s in assign.values() if s == t) for t in range(slots)}
    for j in range(jobs):
        if j in assign:
            continue
        free = [t for t in range(slots) if load[t] < capacity]
        t = int(rng.choice(free))
        assign[j], load[t] = t, load[t] + 1
    before = [[a, b] for a, b in itertools.pairwise(chain)]
    others = [(i, j) for i, j in itertools.permutations(range(jobs), 2) if [i, j] not in before]
    for idx in rng.permutation(len(others))[:2]:
        i, j = others[int(idx)]
        if assign[i] < assign[j] or (not strict and assign[i] == assign[j]):
            before.append([i, j])
    pairs = [(i, j) for i, j in itertools.combinations(range(jobs), 2) if assign[i] != assign[j]]
    conflicts = [list(pairs[int(i)]) for i in sorted(rng.permutation(len(pairs))[: max(1, len(pairs) // 4)])]
    if strict and not satisfiable:
        before.append([slots - 1, slots])  # the chain now needs slots+1 distinct slots
    return {
        "jobs": jobs,
        "slots": slots,
        "capacity": capacity,
        "strict": strict,
        "conflicts": conflicts,
        "before": sorted(before),
        "satisfiable": satisfiable,
    }


def _features(fam: str, p: dict[str, Any], n_vars: int) -> dict[str, Any]:
    feats: dict[str, Any] = {"kind": "encoding", "family": fam, "n_vars": n_vars}
    if fam in ("coloring", "multicoloring"):
        n = p["n"]
        feats.update(
            n_vertices=n,
            n_colors=p["k"],
            n_edges=len(p["edges"]),
            colors_per_vertex=p["per_vertex"],
            density=round(2 * len(p["edges"]) / (n * (n - 1)), 3),
        )
    elif fam == "pigeonhole":
        feats.update(pigeons=p["pigeons"], holes=p["holes"], capacity=p["capacity"])
        feats["more_items_than_room"] = p["pigeons"] > p["capacity"] * p["holes"]
    elif fam in ("queens", "partial_queens"):
        feats.update(board=p["n"], queens=p.get("k", p["n"]))
    else:
        feats.update(
            jobs=p["jobs"],
            slots=p["slots"],
            capacity=p["capacity"],
            strict=p["strict"],
            n_conflicts=len(p["conflicts"]),
            n_before=len(p["before"]),
        )
    return feats


def make_encoding_task(task_id: str, fam: str, params: dict[str, Any]) -> Task:
    """One encoding task for a family and its parameters (used by the generator and by tests)."""
    spec = family(fam)
    sig = spec.signature(params)
    n_vars = VarTable(sig).n_vars
    return Task(
        task_id=task_id,
        domain="sat",
        prompt=spec.statement(params),
        env_id=f"{SAT_PREFIX}/{fam}",
        reference=spec.reference(params),
        context=context_text(sig) + "\n\n" + LANGUAGE_HELP,
        family=fam,
        features=_features(fam, params, n_vars),
        meta={
            "problem": {"family": fam, "params": params},
            "expected": "sat" if spec.satisfiable(params) else "unsat",
        },
    )


def generate_encoding_tasks(seed: int = 0) -> list[Task]:
    """The 310 generated encoding tasks, in a fixed order, deterministic for `seed`."""
    plan: list[tuple[str, Callable[[np.random.Generator], dict[str, Any]]]] = []
    plan += [("coloring", lambda r: _params_coloring(r, True, 1))] * 55
    plan += [("coloring", lambda r: _params_coloring(r, False, 1))] * 15
    plan += [("multicoloring", lambda r: _params_coloring(r, True, 2))] * 28
    plan += [("multicoloring", lambda r: _params_coloring(r, False, 2))] * 7
    plan += [("pigeonhole", lambda r: _params_pigeonhole(r, "sat"))] * 20
    plan += [("pigeonhole", lambda r: _params_pigeonhole(r, "unsat"))] * 20
    plan += [("pigeonhole", lambda r: _params_pigeonhole(r, "capacity"))] * 20
    plan += [("queens", lambda r: {"n": int(r.integers(4, 9))})] * 34
    plan += [("queens", lambda r: {"n": int(r.integers(2, 4))})] * 6
    plan += [
        (
            "partial_queens",
            lambda r: (lambda n: {"n": n, "k": n - int(r.integers(1, 3))})(int(r.integers(5, 9))),
        )
    ] * 25
    plan += [("scheduling", lambda r: _params_scheduling(r, True, True))] * 40
    plan += [("scheduling", lambda r: _params_scheduling(r, True, False))] * 10
    plan += [("scheduling", lambda r: _params_scheduling(r, False, True))] * 30
    tasks = []
    for i, (fam, make) in enumerate(plan):
        rng = np.random.default_rng([seed, i])
        tasks.append(make_encoding_task(f"{SAT_PREFIX}-{i:05d}", fam, make(rng)))
    return tasks
