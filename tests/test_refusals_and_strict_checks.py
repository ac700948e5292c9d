"""Issue 25, the smaller items: one unreadable file is refused and the folder kept (every loader,
and `data check` names the file even when nothing loads), the right message for a ``store=``
that is not a record store, one warning line for a plugin that fails to load, ``check-domain
--strict``, and metrics that leave out (and count) episodes a hang guard interrupted."""

from __future__ import annotations

import dataclasses
import gzip
import json
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

from cm_gym.cli.datacheck import check_dataset
from cm_gym.domains.base import ErrorModel, ErrorOperator, LoadReport
from cm_gym.domains.check import check_domain
from cm_gym.envs._loading import StoreNotFrozenError
from cm_gym.envs.metrics import EpisodeCounters, paired, summarize
from tests.toy_domain import ToyDomain, toy_tasks


# -- refuse the file, keep the folder -------------------------------------------------------------
@pytest.mark.data
def test_one_bad_statement_is_refused_and_named_the_rest_load(shared_data: Path, tmp_path: Path) -> None:
    folder = tmp_path / "valid"
    shutil.copytree(shared_data / "minif2f-rocq" / "valid", folder)
    (folder / "amc12a_2003_p23.v").write_text(
        "Require Import Arith.\nModule M.\nTheorem amc12a_2003_p23 : forall n : nat, n + 0 = n.\n"
        "Proof.\nAdmitted.\nEnd M.\n"
    )
    result = check_dataset("MiniF2F", tmp_path, limit=0)
    refused = dict(result.load.refused)
    assert (
        list(refused) == [str(folder / "amc12a_2003_p23.v")]
        and "Module" in refused[str(folder / "amc12a_2003_p23.v")]
    )
    assert len(result.load.dropped) + 62 == 244 and not result.passed()
    assert "refused files (1)" in result.table() and "amc12a_2003_p23.v" in result.table()


@pytest.mark.data
def test_a_folder_from_which_nothing_loads_still_names_every_refused_file(tmp_path: Path) -> None:
    folder = tmp_path / "valid"
    folder.mkdir()
    (folder / "a.v").write_text("Module M.\nTheorem a : True.\nProof.\nAdmitted.\nEnd M.\n")
    (folder / "b.v").write_text("Theorem b : True.\nProof.\nAdmitted.\n")  # parses, but has no reference
    result = check_dataset("MiniF2F", tmp_path)
    assert result.load_error and [Path(p).name for p, _ in result.load.refused] == ["a.v"]
    assert "a.v" in result.table() and "dropped by the loader (1)" in result.table()


@pytest.mark.data
def test_spider_refuses_a_bad_entry_and_a_missing_database_not_the_file(
    shared_data: Path, tmp_path: Path
) -> None:
    root = tmp_path / "spider"
    shutil.copytree(
        shared_data / "spider" / "database" / "concert_singer", root / "database" / "concert_singer"
    )
    entries = [
        e
        for e in json.loads((shared_data / "spider" / "dev.json").read_text())
        if e["db_id"] == "concert_singer"
    ][:3]
    entries.insert(1, {"db_id": "atlantis", "question": "q", "query": "SELECT 1"})
    entries.insert(2, ["not an object"])
    (root / "dev.json").write_text(json.dumps(entries))
    report = LoadReport()
    tasks = gym.spec("cm_gym/SpiderSQL-v0") and __import__("cm_gym").get_benchmark("SpiderSQL").load(
        root, report=report
    )
    assert [t.task_id for t in tasks] == [
        "spider-0000",
        "spider-0003",
        "spider-0004",
    ]  # ids by entry position
    assert len(report.refused) == 2 and any("atlantis" in why for _, why in report.refused)
    with pytest.raises(Exception, match="2 Spider file"):
        __import__("cm_gym").get_benchmark("SpiderSQL").load(root)  # no report: one error listing both


@pytest.mark.data
def test_quixbugs_humaneval_and_dafny_refuse_one_file_each(shared_data: Path, tmp_path: Path) -> None:
    from cm_gym.domains.code import load_quixbugs_tasks
    from cm_gym.domains.dafny import load_dafny_tasks
    from cm_gym.domains.humaneval.loader import read_problems

    quix = tmp_path / "quixbugs"
    shutil.copytree(shared_data / "quixbugs", quix)
    (quix / "python_testcases" / "test_gcd.py").write_text("def test_gcd(:\n")
    report = LoadReport()
    assert len(load_quixbugs_tasks(quix, report=report)) == 39 and "gcd" in report.refused[0][1]

    rows = (
        gzip.decompress((shared_data / "humaneval" / "HumanEval.jsonl.gz").read_bytes()).decode().splitlines()
    )
    broken = tmp_path / "HumanEval.jsonl"
    broken.write_text("\n".join([rows[0], "{not json", json.dumps({"task_id": "x"}), rows[1]]) + "\n")
    refused: list[tuple[str, str]] = []
    assert [r["task_id"] for r in read_problems(broken, refused)] == ["HumanEval/0", "HumanEval/1"]
    assert [why.split(": ", 1)[1][:12] for _, why in refused] == ["line 2 is no", "line 3 lacks"]

    dafny = tmp_path / "dafny"
    for sub in ("ground_truth", "hints_removed"):
        (dafny / sub).mkdir(parents=True)
        for p in sorted((shared_data / "dafny" / sub).glob("*.dfy"))[:3]:
            shutil.copy(p, dafny / sub / p.name)
    victim = sorted((dafny / "hints_removed").glob("*.dfy"))[1]
    victim.write_bytes(b"\xff\xfe method M() {}")
    report = LoadReport()
    tasks = load_dafny_tasks(dafny, report=report)
    assert [t.task_id for t in tasks] == ["dafny-0000", "dafny-0002"] and "not UTF-8" in report.refused[0][1]


# -- the smaller items ----------------------------------------------------------------------------
@pytest.mark.parametrize(("content", "message"), [(b"hello, not a database", "not an SQLite file"),
                                                  (None, "without a record store's tables")])  # fmt: skip
def test_a_store_that_is_not_a_record_store_says_so(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "store.sqlite"
    if content is None:
        import sqlite3

        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE t (a)")
        conn.commit()
        conn.close()
    else:
        path.write_bytes(content)
    with pytest.raises(StoreNotFrozenError, match=message) as info:
        gym.make("cm_gym/SQL-v0", store=str(path))
    assert "writable record store" not in str(info.value)


def test_a_plugin_that_fails_to_load_is_one_warning_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    from importlib.metadata import EntryPoint

    import cm_gym.domains.catalog as domains  # the plugin loader (it logs under cm_gym.domains)
    from cm_gym.cli import guarded_run

    (tmp_path / "broken_cm_plugin.py").write_text("import no_such_dependency_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("CM_GYM_STRICT_PLUGINS", raising=False)
    monkeypatch.setattr(domains, "_loaded", False)
    monkeypatch.setattr(domains, "FAILED_PLUGINS", [])
    monkeypatch.setattr(
        domains,
        "entry_points",
        lambda group: (
            [EntryPoint("broken", "broken_cm_plugin", group)] if group == "cm_gym.benchmarks" else []
        ),
    )
    with caplog.at_level(logging.WARNING, logger="cm_gym.domains"):
        domains.load_builtin_domains()
    (record,) = [r for r in caplog.records if r.name == "cm_gym.domains"]
    assert record.levelno == logging.WARNING and record.exc_info is None and "\n" not in record.getMessage()
    assert "broken" in record.getMessage() and "ModuleNotFoundError" in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.DEBUG):  # `cm-gym -v`: the traceback, once logging is set up
        assert guarded_run(lambda args: 0, __import__("argparse").Namespace(verbose=1)) == 0
    assert any(
        "Traceback" in r.getMessage() and "no_such_dependency_here" in r.getMessage() for r in caplog.records
    )


class _SilentOperatorDomain(ToyDomain):
    name = "toysilent"  # its own name: ToyDomain may be registered by an earlier test

    def error_model(self) -> ErrorModel:
        never = ErrorOperator("never", lambda t: 0.0, lambda t, a, rng: a + " ")
        return ErrorModel(operators=(*super().error_model().operators, never))


def test_strict_check_domain_fails_on_an_operator_that_never_fires() -> None:
    tasks = [dataclasses.replace(t, domain="toysilent") for t in toy_tasks()]
    lenient = check_domain(_SilentOperatorDomain(), tasks, raise_on_failure=False)
    assert lenient.ok and any("'never' never fires" in w for w in lenient.warnings), lenient.failures
    strict = check_domain(_SilentOperatorDomain(), tasks, raise_on_failure=False, strict=True)
    assert not strict.ok and any("'never' never fires" in f for f in strict.failures)


def test_strict_check_domain_fails_on_a_default_store_below_the_minimum(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from cm_gym.cli import check_domain as cli

    class Store:
        def __init__(self, n: int) -> None:
            self.n = n

        def __len__(self) -> int:
            return self.n

    monkeypatch.setattr(
        "cm_gym.memory.defaults.default_snapshot", lambda name, data=None: tmp_path / "s.sqlite"
    )
    monkeypatch.setattr("cm_gym.memory.snapshot.FrozenStore.open", classmethod(lambda cls, p: Store(1)))
    assert "holds 1 record(s), fewer than the minimum of 10" in cli.default_store_too_small("SQL")
    monkeypatch.setattr("cm_gym.memory.snapshot.FrozenStore.open", classmethod(lambda cls, p: Store(50)))
    assert cli.default_store_too_small("SQL") == ""


def test_metrics_leave_out_and_count_episodes_a_hang_guard_interrupted() -> None:
    def episode(task: str, solved: bool, statuses: list[str]) -> dict:
        counters = EpisodeCounters(task_id=task)
        for status in statuses:
            counters.update(
                {
                    "task_id": task,
                    "solved": solved,
                    "score": float(solved),
                    "outcome_status": status,
                    "budget_kind": "sqlite-vm-steps",
                }  # fmt: skip
            )
        return counters.as_dict()

    runs = [
        episode("a", True, ["ok"]),
        episode("b", False, ["ok", "infrastructure"]),
        episode("c", False, ["ok"]),
    ]
    summary = summarize(runs)
    assert summary["n_tasks"] == 2 and summary["n_infrastructure"] == 1 and summary["solve_rate"] == 50.0
    assert summary["budget_kinds"] == ["sqlite-vm-steps"]
    assert (
        paired(runs, [episode("a", True, ["ok"]), episode("b", True, ["ok"]), episode("c", True, ["ok"])])[
            "n_pairs"
        ]
        == 2
    )
