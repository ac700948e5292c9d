"""Issue 25: the same folder gives the same tasks and the same verdicts on a quiet machine and
under an artificial CPU hog (two spinning processes per core, on top of whatever else runs).

A deterministic sample of every kind of world model (SQLite steps, SAT conflicts, z3 rlimit with
calibration at load, code and Coq CPU time, Boogie rlimit), each checked fresh (own cache, no
verdict cache): ``bench/bench_load_independence.py`` runs every shared folder whole."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cm_gym.cli.loadcheck import Comparison, quiet_and_busy

pytestmark = [pytest.mark.data, pytest.mark.slow]

#: (benchmark, folder under the data root, references checked): kept small for CI
SAMPLES = (
    ("SpiderSQL", "spider", 10),
    ("SATLIB", "sat/flat30-60", 5),
    ("SMTLIB", "smt-sample", 4),
    ("QuixBugs", "quixbugs", 2),
    ("MiniF2F", "minif2f-rocq", 1),
    ("Dafny", "dafny", 1),
)


def _smt_sample(shared_data: Path, folder: Path) -> Path:
    """A few QF_LIA files in a folder of their own, so that the loader calibrates their allowance
    (probes at load, the step that dropped files at its wall-clock bound before issue 25)."""
    for status in ("sat", "unsat"):
        (folder / status).mkdir(parents=True)
        for p in sorted((shared_data / "smt" / "QF_LIA" / status).glob("*.smt2"))[:2]:
            shutil.copy(p, folder / status / p.name)
    return folder


@pytest.fixture(scope="module")
def comparisons(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Comparison]:
    work = tmp_path_factory.mktemp("load")
    out = {}
    for benchmark, sub, limit in SAMPLES:
        data = _smt_sample(shared_data, work / "smt") if sub == "smt-sample" else shared_data / sub
        out[benchmark] = quiet_and_busy(benchmark, data, limit=limit, workdir=work / benchmark)
    return out


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("benchmark", [s[0] for s in SAMPLES])
def test_same_tasks_and_verdicts_under_a_cpu_hog(comparisons: dict[str, Comparison], benchmark: str) -> None:
    run = comparisons[benchmark]
    assert run.quiet.checked and not run.differences, run.differences
    # and every reference is solved with the budget it gets in evaluation, on both machines
    assert run.quiet.count("solved") == len(run.quiet.checked) == run.busy.count("solved"), run.quiet.table()
    assert all(c.budget_kind for c in run.quiet.checked), "every verdict names its budget"
