"""The SAT domain's problem families and their independent checkers.

A problem is a family name plus JSON parameters. Each family gives its `Signature` (the Boolean
arrays an encoding talks about), a correct reference encoding, a statement, whether it has a
solution, and a checker that scores a decoded solution against the *problem* (never against an
encoding): a list of (constraint description, satisfied) pairs, so U = satisfied / total.

Families: ``coloring`` (exactly one colour per vertex), ``multicoloring`` (exactly m colours per
vertex, adjacent vertices share none), ``pigeonhole`` (holes of capacity 1 or more),
``queens`` (n non-attacking queens), ``partial_queens`` (k < n queens) and ``scheduling``
(unit jobs in time slots with capacity, conflicts and strict or non-strict precedence).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cm_gym.domains.sat.encoding import Signature
from cm_gym.domains.sat.errors import SatError

Solution = Mapping[str, frozenset[tuple[int, ...]]]
Checks = list[tuple[str, bool]]


@dataclass(frozen=True)
class Family:
    """How one problem family is stated, encoded and checked."""

    name: str
    signature: Callable[[Mapping[str, Any]], Signature]
    reference: Callable[[Mapping[str, Any]], str]
    check: Callable[[Mapping[str, Any], Solution], Checks]
    statement: Callable[[Mapping[str, Any]], str]
    satisfiable: Callable[[Mapping[str, Any]], bool]


def _rng(n: int) -> tuple[int, ...]:
    return tuple(range(n))


def _group(cells: frozenset[tuple[int, ...]], pos: int, other: int) -> dict[int, list[int]]:
    """index `pos` value -> sorted values at index `other` (one pass over the cells)."""
    out: dict[int, list[int]] = {}
    for c in cells:
        out.setdefault(c[pos], []).append(c[other])
    return {k: sorted(v) for k, v in out.items()}


# -- graph colouring and multi-colouring --------------------------------------------------------
def _col_sig(p: Mapping[str, Any]) -> Signature:
    edges = tuple(tuple(e) for e in p["edges"])
    return Signature({"V": _rng(p["n"]), "C": _rng(p["k"]), "E": edges}, {"color": ("V", "C")})  # type: ignore[arg-type]


def _col_ref(p: Mapping[str, Any]) -> str:
    m = p.get("per_vertex", 1)
    first = "exactly_one color[v][*] for v in V" if m == 1 else f"exactly {m} color[v][*] for v in V"
    return f"{first}\nnot_both color[u][c] color[v][c] for (u, v) in E, c in C"


def _col_check(p: Mapping[str, Any], sol: Solution) -> Checks:
    colours = _group(sol["color"], 0, 1)
    m = p.get("per_vertex", 1)
    out: Checks = []
    for v in range(p["n"]):
        got = colours.get(v, [])
        out.append((f"vertex {v} has {len(got)} colour(s), needs exactly {m}", len(got) == m))
    for u, v in p["edges"]:
        shared = set(colours.get(u, [])) & set(colours.get(v, []))
        out.append((f"edge ({u}, {v}) endpoints share colour {min(shared) if shared else '-'}", not shared))
    return out


def _col_statement(p: Mapping[str, Any]) -> str:
    m = p.get("per_vertex", 1)
    if m == 1:
        what = "Colour each vertex with exactly one of the colours"
        rule = "the two endpoints of every edge get different colours"
    else:
        what = f"Give each vertex exactly {m} of the colours (a multi-colouring)"
        rule = "the two endpoints of every edge share no colour"
    return (
        f"{what} 0..{p['k'] - 1} of a graph with vertices 0..{p['n'] - 1} and {len(p['edges'])} edges "
        f"so that {rule}. Variables: color[v][c] is true iff vertex v has colour c."
    )


def _col_sat(p: Mapping[str, Any]) -> bool:
    return bool(p["satisfiable"])


# -- pigeonhole ---------------------------------------------------------------------------------
def _php_sig(p: Mapping[str, Any]) -> Signature:
    return Signature({"P": _rng(p["pigeons"]), "H": _rng(p["holes"])}, {"sit": ("P", "H")})


def _php_ref(p: Mapping[str, Any]) -> str:
    cap = p.get("capacity", 1)
    hole = "at_most_one sit[*][h] for h in H" if cap == 1 else f"at_most {cap} sit[*][h] for h in H"
    return f"exactly_one sit[i][*] for i in P\n{hole}"


def _php_check(p: Mapping[str, Any], sol: Solution) -> Checks:
    by_pigeon, by_hole = _group(sol["sit"], 0, 1), _group(sol["sit"], 1, 0)
    cap = p.get("capacity", 1)
    out: Checks = []
    for i in range(p["pigeons"]):
        got = by_pigeon.get(i, [])
        out.append((f"pigeon {i} sits in {len(got)} hole(s), needs exactly 1", len(got) == 1))
    for h in range(p["holes"]):
        got = by_hole.get(h, [])
        out.append((f"hole {h} holds {len(got)} pigeon(s), at most {cap} allowed", len(got) <= cap))
    return out


def _php_statement(p: Mapping[str, Any]) -> str:
    cap = p.get("capacity", 1)
    room = "at most one pigeon" if cap == 1 else f"at most {cap} pigeons"
    return (
        f"Seat {p['pigeons']} pigeons (0..{p['pigeons'] - 1}) in {p['holes']} holes (0..{p['holes'] - 1}): "
        f"every pigeon sits in exactly one hole and every hole holds {room}. Decide whether this is "
        "possible (an unsatisfiable encoding is the right answer when it is not). "
        "Variables: sit[i][h] is true iff pigeon i sits in hole h."
    )


def _php_sat(p: Mapping[str, Any]) -> bool:
    return p["pigeons"] <= p.get("capacity", 1) * p["holes"]


# -- n-queens and partial queens ----------------------------------------------------------------
def _q_sig(p: Mapping[str, Any]) -> Signature:
    return Signature({"N": _rng(p["n"])}, {"q": ("N", "N")})


def _q_ref(p: Mapping[str, Any]) -> str:
    n, k = p["n"], p.get("k", p["n"])
    rows = "exactly_one q[r][*] for r in N" if k == n else "at_most_one q[r][*] for r in N"
    lines = [rows, "at_most_one q[*][c] for c in N"]
    lines.append(f"at_most_one q[r][c] for d in -{n - 1}..{n - 1} where r - c == d")
    lines.append(f"at_most_one q[r][c] for s in 0..{2 * n - 2} where r + c == s")
    if k != n:
        lines.append(f"exactly {k} q[*][*]")
    return "\n".join(lines)


def _q_check(p: Mapping[str, Any], sol: Solution) -> Checks:
    n, k = p["n"], p.get("k", p["n"])
    cells = sol["q"]
    rows, cols = _group(cells, 0, 1), _group(cells, 1, 0)
    out: Checks = []
    if k != n:
        out.append((f"{len(cells)} queens placed, needs exactly {k}", len(cells) == k))
    for r in range(n):
        got = len(rows.get(r, []))
        need = "exactly 1" if k == n else "at most 1"
        out.append((f"row {r} has {got} queen(s), needs {need}", got == 1 if k == n else got <= 1))
    for c in range(n):
        got = len(cols.get(c, []))
        out.append((f"column {c} has {got} queens", got <= 1))
    for d in range(-(n - 1), n):
        got = sum(1 for r, c in cells if r - c == d)
        out.append((f"diagonal r-c={d} has {got} queens", got <= 1))
    for s in range(2 * n - 1):
        got = sum(1 for r, c in cells if r + c == s)
        out.append((f"anti-diagonal r+c={s} has {got} queens", got <= 1))
    return out


def _q_statement(p: Mapping[str, Any]) -> str:
    n, k = p["n"], p.get("k", p["n"])
    count = f"{n} queens, one in every row," if k == n else f"exactly {k} queens (at most one per row)"
    return (
        f"Place {count} on a {n}x{n} board (rows and columns 0..{n - 1}) so that no two queens share "
        "a row, a column or a diagonal; decide whether this is possible. "
        "Variables: q[r][c] is true iff a queen stands on row r, column c."
    )


def _q_sat(p: Mapping[str, Any]) -> bool:
    n, k = p["n"], p.get("k", p["n"])
    most = {1: 1, 2: 1, 3: 2}.get(n, n)
    return k <= most


# -- scheduling ---------------------------------------------------------------------------------
def _s_sig(p: Mapping[str, Any]) -> Signature:
    sets = {
        "J": _rng(p["jobs"]),
        "T": _rng(p["slots"]),
        "CONFLICT": tuple(tuple(e) for e in p["conflicts"]),
        "BEFORE": tuple(tuple(e) for e in p["before"]),
    }
    return Signature(sets, {"run": ("J", "T")})  # type: ignore[arg-type]


def _s_ref(p: Mapping[str, Any]) -> str:
    cap = p["capacity"]
    slot = "at_most_one run[*][t] for t in T" if cap == 1 else f"at_most {cap} run[*][t] for t in T"
    cmp = "<=" if p["strict"] else "<"
    return "\n".join(
        [
            "exactly_one run[j][*] for j in J",
            slot,
            "not_both run[i][t] run[j][t] for (i, j) in CONFLICT, t in T",
            f"not_both run[i][t] run[j][s] for (i, j) in BEFORE, t in T, s in T where s {cmp} t",
        ]
    )


def _s_check(p: Mapping[str, Any], sol: Solution) -> Checks:
    by_job, by_slot = _group(sol["run"], 0, 1), _group(sol["run"], 1, 0)
    slots = {j: by_job.get(j, []) for j in range(p["jobs"])}
    out: Checks = []
    for j, got in slots.items():
        out.append((f"job {j} runs in {len(got)} slot(s), needs exactly 1", len(got) == 1))
    for t in range(p["slots"]):
        load = len(by_slot.get(t, []))
        out.append((f"slot {t} runs {load} jobs, capacity {p['capacity']}", load <= p["capacity"]))
    for i, j in p["conflicts"]:
        clash = set(slots[i]) & set(slots[j])
        out.append((f"conflicting jobs {i} and {j} share slot {min(clash) if clash else '-'}", not clash))
    for i, j in p["before"]:
        ok = all((ti < tj) if p["strict"] else (ti <= tj) for ti in slots[i] for tj in slots[j])
        rel = "strictly before" if p["strict"] else "no later than"
        out.append((f"job {i} must run {rel} job {j}", ok))
    return out


def _s_statement(p: Mapping[str, Any]) -> str:
    rel = "in a strictly earlier slot than" if p["strict"] else "in the same slot as or an earlier slot than"
    cap = "one job" if p["capacity"] == 1 else f"{p['capacity']} jobs"
    return (
        f"Schedule {p['jobs']} unit jobs (0..{p['jobs'] - 1}) into {p['slots']} time slots "
        f"(0..{p['slots'] - 1}): every job runs in exactly one slot, a slot runs at most {cap}, "
        f"conflicting jobs (pairs in CONFLICT) never share a slot, and for each pair (i, j) in BEFORE "
        f"job i runs {rel} job j. Decide whether a schedule exists. "
        "Variables: run[j][t] is true iff job j runs in slot t."
    )


def _s_sat(p: Mapping[str, Any]) -> bool:
    return bool(p["satisfiable"])


FAMILIES: dict[str, Family] = {
    "coloring": Family("coloring", _col_sig, _col_ref, _col_check, _col_statement, _col_sat),
    "multicoloring": Family("multicoloring", _col_sig, _col_ref, _col_check, _col_statement, _col_sat),
    "pigeonhole": Family("pigeonhole", _php_sig, _php_ref, _php_check, _php_statement, _php_sat),
    "queens": Family("queens", _q_sig, _q_ref, _q_check, _q_statement, _q_sat),
    "partial_queens": Family("partial_queens", _q_sig, _q_ref, _q_check, _q_statement, _q_sat),
    "scheduling": Family("scheduling", _s_sig, _s_ref, _s_check, _s_statement, _s_sat),
}


def family(name: str) -> Family:
    """The family called `name` (a `SatError` for an unknown one)."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise SatError(f"unknown SAT problem family {name!r}; known: {', '.join(FAMILIES)}") from None


def context_text(sig: Signature) -> str:
    """The problem's sets and arrays, as shown to the agent."""
    lines = []
    for name, values in sig.sets.items():
        if values and isinstance(values[0], tuple):
            shown = ", ".join("(" + ", ".join(map(str, v)) + ")" for v in values)  # type: ignore[arg-type]
            lines.append(f"{name} = {{{shown}}}")
        elif values and list(values) == list(range(len(values))):
            lines.append(f"{name} = 0..{len(values) - 1}")
        else:
            lines.append(f"{name} = {{{', '.join(map(str, values))}}}")
    for name, dims in sig.arrays.items():
        lines.append(f"array {name}" + "".join(f"[{d}]" for d in dims))
    return "\n".join(lines)
