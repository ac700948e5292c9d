"""Issue 13.3-4: retargeting a benchmark with a data folder (`BenchmarkSpec.load(data=DIR)`, the
env's ``data=`` kwarg, `ProtocolConfig.data`, ``--data DIR``), the default store keyed by the
loaded tasks' content, and ``cm-gym data check``."""

from __future__ import annotations

import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import cm_gym
from cm_gym.cli import main
from cm_gym.cli.datacheck import check_dataset
from cm_gym.core.splits import make_split
from cm_gym.domains.registry import DataRootError, get_benchmark
from cm_gym.memory.defaults import DEFAULT_SPLIT_SEED, default_snapshot
from cm_gym.memory.store import RecordStore
from cm_gym.protocol import ProtocolConfig, prepare

QF_NRA = """(set-logic QF_NRA)
(set-info :status {status})
(declare-fun x () Real)
(declare-fun y () Real)
(assert (= (* x y) {k}))
(assert (> x 1))
(assert ({cmp} y 0))
(check-sat)
"""


def nra_folder(root: Path, n: int = 6) -> Path:
    """A folder of small non-linear real files in another logic, sat/ and unsat/ as upstream."""
    for i in range(n):
        status, cmp = ("sat", ">") if i % 2 == 0 else ("unsat", "<")
        path = root / status / f"nra_{i}.smt2"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(QF_NRA.format(status=status, k=i + 2, cmp=cmp))
    return root


def empty_snapshot(folder: Path, benchmark: str, domain: str) -> Path:
    with RecordStore(folder / "live.sqlite", domain=domain, benchmark=benchmark) as live:
        live.freeze(folder / "empty.sqlite")
    return folder / "empty.sqlite"


def test_generated_benchmarks_refuse_a_data_folder(tmp_path: Path) -> None:
    with pytest.raises(DataRootError, match="generates its tasks") as info:
        get_benchmark("SAT").load(tmp_path)
    assert "SATLIB" in str(info.value) and "SMTLIB" in str(info.value)
    readers = {s.name for s in cm_gym.list_benchmarks() if s.data_layout}
    assert {"SATLIB", "SMTLIB", "SpiderSQL", "QuixBugs", "Dafny"} <= readers


def test_a_missing_or_empty_folder_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataRootError, match="is not a directory"):
        get_benchmark("SMTLIB").load(tmp_path / "nope")
    with pytest.raises(DataRootError, match=r"no SMTLIB tasks found .*\.smt2"):
        get_benchmark("SMTLIB").load(tmp_path)


def test_the_env_serves_the_tasks_of_its_data_folder(tmp_path: Path) -> None:
    data = nra_folder(tmp_path / "nra")
    store = empty_snapshot(tmp_path, "SMTLIB", "smt")
    env = gym.make("cm_gym/SMTLIB-v0", data=str(data), store=store, tasks="all")
    inner = env.unwrapped
    assert len(inner.tasks) == 6 and {t.family for t in inner.tasks} == {"QF_NRA"}
    assert all(t.meta["path"].startswith(str(data.resolve())) for t in inner.tasks)
    obs, info = env.reset(seed=0)
    _, _, _, _, info = env.step(0)
    assert "solved" in info
    one = inner.tasks[0].task_id
    again = gym.make("cm_gym/SMTLIB-v0", data=data, store=store, tasks=[one])
    assert [t.task_id for t in again.unwrapped.tasks] == [one]
    env.close()
    again.close()


def test_the_protocol_loads_its_data_folder(tmp_path: Path) -> None:
    prepared = prepare(ProtocolConfig(benchmark="SMTLIB", data=nra_folder(tmp_path / "nra", n=10)))
    assert len(prepared.tasks) == 10
    assert set(prepared.split.build) | set(prepared.split.train) | set(prepared.split.eval) == set(
        prepared.tasks
    )


@pytest.mark.slow
def test_the_default_store_is_keyed_by_task_content(tmp_path: Path) -> None:
    data = nra_folder(tmp_path / "nra")
    first = default_snapshot("SMTLIB", data=data)
    assert default_snapshot("SMTLIB", data=data) == first
    tasks = get_benchmark("SMTLIB").load(data)
    build = make_split(tasks, seed=DEFAULT_SPLIT_SEED).build  # the tasks the store is built from
    edited = Path(next(t.meta["path"] for t in tasks if t.task_id == build[0]))
    edited.write_text(edited.read_text().replace("(> x 1)", "(> x 1.5)"))  # same file, same id
    assert default_snapshot("SMTLIB", data=data) != first


def test_data_check_passes_a_good_folder_and_fails_a_broken_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = nra_folder(tmp_path / "nra")
    assert main(["data", "check", "--benchmark", "SMTLIB", "--data", str(data), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "QF_NRA" in out and "PASSED: 6 of 6 references solved" in out
    (data / "sat" / "broken.smt2").write_text("(set-logic QF_NRA)\n(assert (> x\n")
    assert main(["data", "check", "--benchmark", "SMTLIB", "--data", str(data), "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "refused files (1)" in out and "broken.smt2" in out and "FAILED" in out
    assert main(["data", "check", "--benchmark", "SAT", "--data", str(data)]) == 2  # one-line error


def test_data_check_counts_what_the_loader_dropped_and_the_label_disagreements(tmp_path: Path) -> None:
    data = nra_folder(tmp_path / "nra", n=2)
    shutil.move(data / "unsat" / "nra_1.smt2", data / "sat" / "nra_1.smt2")  # mislabelled by folder
    result = check_dataset("SMTLIB", data)
    assert result.passed() and result.count("solved") == 2
    assert any("folder label 'sat' contradicts" in why for _, why in result.disagreements)
    assert any("the folder label says sat" in why for _, why in result.disagreements)
    assert result.rows()[-1] == ("total", ["2", "0", "2", "0", "0", "0", "0", "1", result.rows()[-1][1][-1]])


@pytest.mark.data
def test_data_check_runs_every_builtin_layout(shared_data: Path) -> None:
    spider = check_dataset("SpiderSQL", shared_data / "spider", limit=15)
    assert spider.checked and spider.count("failed") == 0
    quix = check_dataset("QuixBugs", shared_data / "quixbugs", limit=1)
    assert quix.passed() and quix.count("solved") == 1
    sat = check_dataset("SATLIB", shared_data / "sat" / "flat30-60", limit=20)
    assert sat.passed() and sat.count("solved") == 20
