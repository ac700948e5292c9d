"""Issue 14 for the SAT and SMT world models: a parametrised hostile corpus (every class is refused
or stopped within its bounds) and property-based fuzzing of the DIMACS and SMT-LIB readers."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.base import LoadReport
from cm_gym.domains.sat import dimacs
from cm_gym.domains.sat import hostile as sat_hostile
from cm_gym.domains.sat.dimacs import parse_dimacs, read_dimacs
from cm_gym.domains.sat.errors import DimacsError
from cm_gym.domains.sat.evaluator import SatEvaluator
from cm_gym.domains.sat.loader import load_satlib_tasks, satlib_task
from cm_gym.domains.smt import hostile as smt_hostile
from cm_gym.domains.smt.errors import SmtError
from cm_gym.domains.smt.evaluator import SmtEvaluator
from cm_gym.domains.smt.loader import smtlib_task
from cm_gym.domains.smt.sandbox import vet_script
from cm_gym.domains.smt.sexpr import parse_sexprs
from cm_gym.domains.smt.smtlib import parse_smtlib

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def smt_evaluator() -> SmtEvaluator:
    ev = SmtEvaluator(cpu_limit_s=3.0)
    yield ev
    ev.close()


@pytest.mark.parametrize("probe", smt_hostile.SCRIPTS, ids=lambda p: f"{p.klass}:{p.name}")
def test_hostile_smt_scripts_are_contained(probe: smt_hostile.Hostile, smt_evaluator: SmtEvaluator) -> None:
    task = smt_hostile.hostile_task()
    started = time.monotonic()
    outcome = smt_evaluator.check(AgentState(task), Action(probe.text))
    took = time.monotonic() - started
    assert not outcome.solved and outcome.score == 0.0
    if probe.expect == "refused":
        assert outcome.status == "refused", outcome.reason
        assert took < 5.0  # vetting is linear in the text, however large the expansion
    else:  # stopped by the rlimit, z3's memory ceiling or the CPU backstop: never by wall time
        assert outcome.status == "budget", outcome.reason


@pytest.mark.parametrize("probe", smt_hostile.BENCHMARKS, ids=lambda p: f"{p.klass}:{p.name}")
def test_hostile_smt_benchmark_files_stop_at_the_cpu_backstop(
    probe: smt_hostile.Hostile, smt_evaluator: SmtEvaluator, tmp_path: Path
) -> None:
    path = tmp_path / f"{probe.name}.smt2"
    path.write_text(probe.text)
    task = smtlib_task(parse_smtlib(probe.text, str(path)), "hostile", 200_000_000)
    outcome = smt_evaluator.check(AgentState(task), Action("logic: QF_BV\nrlimit: 200000000"))
    assert outcome.status == "budget" and not outcome.solved, outcome.reason


@pytest.mark.data
def test_a_public_file_that_spends_little_rlimit_but_much_time_is_stopped(shared_data: Path) -> None:
    """rlimit is not time: this 2 KB quantified bit-vector file takes seconds on a few thousand
    rlimit units; a short CPU-time backstop must stop it all the same (status "budget")."""
    path = shared_data / "smt" / "BV" / "sat" / "network_ndis_e100bex_5x_kd_mp_dbg.c.smt2"
    info = parse_smtlib(path.read_text(), str(path))
    task = smtlib_task(info, "slow", 20_000_000)
    evaluator = SmtEvaluator(cpu_limit_s=1.0)
    outcome = evaluator.check(AgentState(task), Action("logic: BV\nrlimit: 20000000"))
    evaluator.close()
    assert outcome.status == "budget" and "1 s of CPU time" in outcome.reason


@pytest.mark.parametrize("probe", sat_hostile.TEXTS, ids=lambda p: f"{p.klass}:{p.name}")
def test_hostile_dimacs_texts_are_refused_or_bounded(
    probe: sat_hostile.HostileDimacs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scale = 0.01  # the huge clause set at 1% of its size, against 1% of the literal cap
    monkeypatch.setattr(dimacs, "MAX_LITERALS", int(dimacs.MAX_LITERALS * scale))
    path = tmp_path / "fam" / f"{probe.name}.cnf"
    path.parent.mkdir()
    path.write_text(probe.build(scale))
    if probe.expect == "refused":
        with pytest.raises(DimacsError, match="literals .* exceed the limit"):
            read_dimacs(path)
        report = LoadReport()
        assert load_satlib_tasks(root=tmp_path, report=report) == [] and len(report.refused) == 1
        return
    cnf = read_dimacs(path)
    assert cnf.flat.size <= 10 and cnf.n_clauses == 1
    (task,) = load_satlib_tasks(root=tmp_path)
    assert SatEvaluator().check(AgentState(task), Action(task.reference)).solved


@pytest.mark.parametrize("kind", sat_hostile.SPECIAL_FILES)
def test_special_files_named_like_dimacs_are_refused_without_blocking(kind: str, tmp_path: Path) -> None:
    folder = tmp_path / "fam"
    folder.mkdir()
    special = sat_hostile.make_special(kind, folder)
    (folder / "ok.cnf").write_text("p cnf 1 1\n1 0\n")
    started = time.monotonic()
    with pytest.raises(DimacsError, match="not a regular file"):
        read_dimacs(special)
    report = LoadReport()
    tasks = load_satlib_tasks(root=tmp_path, report=report)
    assert [Path(t.meta["path"]).name for t in tasks] == ["ok.cnf"] and len(report.refused) == 1
    assert time.monotonic() - started < 30


def test_a_solve_past_the_cpu_backstop_is_stopped(tmp_path: Path) -> None:
    path = tmp_path / "hard.cnf"
    path.write_text(sat_hostile.hard_instance())
    task = satlib_task(read_dimacs(path), "hard", path, 10_000_000)
    evaluator = SatEvaluator(cpu_limit_s=1.0)
    outcome = evaluator.check(AgentState(task), Action("solver: minisat22\nbudget: 10000000"))
    assert outcome.status == "budget" and "1 s of CPU time" in outcome.reason
    # the worker is replaced: the next check runs normally
    easy = tmp_path / "easy.cnf"
    easy.write_text("p cnf 2 1\n1 2 0\n")
    task = satlib_task(read_dimacs(easy), "easy", easy, 10)
    assert evaluator.check(AgentState(task), Action("solver: minisat22\nbudget: 10")).solved
    evaluator.close()


def test_the_hang_guard_is_infrastructure_after_one_retry_never_a_verdict(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "hard.cnf"
    path.write_text(sat_hostile.hard_instance())
    task = satlib_task(read_dimacs(path), "hard", path, 10_000_000)
    evaluator = SatEvaluator(cpu_limit_s=10_000, time_limit_s=0.5)
    outcome = evaluator.check(AgentState(task), Action("solver: minisat22\nbudget: 10000000"))
    evaluator.close()
    assert outcome.status == "infrastructure" and not outcome.solved and not outcome.completed
    assert outcome.details["attempts"] == 2 and "retrying once" in caplog.text


# -- property-based fuzzing -----------------------------------------------------------------------
_dimacs_tokens = st.sampled_from(
    ["p", "cnf", "c", "%", "0", "1", "-1", "2", "-3", "x", "\n", " ", "\t", "99"]
)


@FUZZ
@given(st.lists(_dimacs_tokens, max_size=60).map("".join) | st.text(max_size=200))
def test_fuzz_dimacs_parser_raises_only_dimacs_errors(text: str) -> None:
    try:
        cnf = parse_dimacs(text)
    except DimacsError:
        return
    assert all(0 < abs(lit) <= cnf.n_vars for clause in cnf.clauses() for lit in clause)


_clauses = st.lists(
    st.lists(st.integers(-6, 6).filter(bool), min_size=1, max_size=5), min_size=1, max_size=40
)


@FUZZ
@given(_clauses, st.booleans())
def test_fuzz_wellformed_cnfs_keep_their_clauses_up_to_repeats(
    clauses: list[list[int]], one_line: bool
) -> None:
    sep = " " if one_line else "\n"
    text = (
        f"c fuzz\np cnf 6 {len(clauses)}\n" + sep.join(" ".join(map(str, c)) + " 0" for c in clauses) + "\n"
    )
    expected, seen = [], set()
    for clause in clauses:
        unique = list(dict.fromkeys(clause))
        if frozenset(unique) not in seen:
            seen.add(frozenset(unique))
            expected.append(unique)
    cnf = parse_dimacs(text)
    assert cnf.clauses() == expected and cnf.duplicates == len(clauses) - len(expected)


_atoms = st.sampled_from(
    ["x", "y", "0", "1", "#b101", "#xff", "bvmul", "concat", "let", "define-fun", "assert", "declare-const",
     "(_ BitVec 8)", "(_ BitVec 600)", "((_ repeat 9) x)", "((_ zero_extend 600) x)", "Int", "forall",
     "(_ bv3 8)", "^", "str.len", "999999999", ";c\n", "|q|", '"s"']
)  # fmt: skip


@st.composite
def _sexprs(draw: st.DrawFn, depth: int = 3) -> str:
    if depth == 0 or draw(st.booleans()):
        return draw(_atoms)
    items = draw(st.lists(_sexprs(depth - 1), max_size=4))
    return "(" + " ".join(items) + ")"


@FUZZ
@given(st.lists(_sexprs(), max_size=6).map("\n".join) | st.text(max_size=300))
def test_fuzz_smtlib_readers_raise_only_smt_errors(text: str) -> None:
    for reader in (parse_sexprs, lambda t: parse_smtlib(t, "fuzz.smt2"), vet_script):
        with contextlib.suppress(SmtError):
            reader(text)


@FUZZ
@given(st.integers(1, 60), st.sampled_from(["+", "*", "bvadd", "bvmul"]))
def test_fuzz_expansion_is_refused_iff_it_is_large(levels: int, op: str) -> None:
    """A let chain that doubles at each level is refused exactly when 2^levels passes the cap."""
    sort = "Int" if op in ("+", "*") else "(_ BitVec 8)"
    body, prev = "", "x"
    for i in range(levels):
        body += f"(let ((v{i} ({op} {prev} {prev}))) "
        prev = f"v{i}"
    text = f"(declare-const x {sort})\n(assert (= {body}{prev}{')' * levels} x))"
    nodes = 2 ** (levels + 1) + 1  # the inlined tree: (= <full binary tree> x)
    try:
        vet_script(text)
        refused = False
    except SmtError:
        refused = True
    cost = (2**levels - 1) * 64 if op == "bvmul" else 0
    assert refused == (nodes > 1_000_000 or cost > 2 * 128 * 128)
