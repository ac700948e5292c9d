"""Statement files: the 244 miniF2F-rocq statements parse (cut after the theorem, declared axioms
found), hostile statement prefixes are refused, and features read the statement (not the proof)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cm_gym.domains.math.features import goal_kind, goal_of, statement_features
from cm_gym.domains.math.loader import load_minif2f_tasks, minif2f_root
from cm_gym.domains.math.proofs import read_table
from cm_gym.domains.math.statement import StatementError, parse_statement

pytestmark = pytest.mark.data


def test_every_valid_statement_parses(shared_data: Path) -> None:
    folder = minif2f_root(shared_data)
    files = sorted(folder.glob("*.v"))
    assert len(files) == 244
    before = {p.name: p.stat().st_mtime_ns for p in files}
    tasks = load_minif2f_tasks(shared_data, proved_only=False)
    assert len(tasks) == 244 and len({t.task_id for t in tasks}) == 244
    assert {p.name: p.stat().st_mtime_ns for p in files} == before
    for t in tasks:
        assert t.meta["prefix"].rstrip().endswith(".") and "Admitted" not in t.meta["prefix"]
        assert t.meta["theorem"] == Path(t.meta["file"]).stem
    # the file that states two theorems: the one named after the file, and nothing after it
    two = next(t for t in tasks if t.meta["theorem"] == "imo_1966_p5")
    assert "imo_1966_p5'" not in two.meta["prefix"]
    axioms = next(t for t in tasks if t.meta["theorem"] == "amc12a_2016_p3")
    assert axioms.meta["declared"] == ["Rfloor", "Rfloor_spec"]


def test_default_benchmark_is_the_proved_statements(shared_data: Path) -> None:
    table = read_table()
    proved = load_minif2f_tasks(shared_data)
    assert proved and {t.meta["theorem"] for t in proved} == set(table["proofs"])
    assert all(t.reference == table["proofs"][t.meta["theorem"]] for t in proved)
    assert not set(table["proofs"]) & set(table["unproved"])
    assert len(table["proofs"]) + len(table["unproved"]) == 244


@pytest.mark.parametrize(
    "prefix",
    [
        "Load evil.\nTheorem t : True.",
        "Unset Guard Checking.\nTheorem t : True.",
        'Declare ML Module "unix".\nTheorem t : True.',
        "#[bypass_check(guard)] Definition x := 1.\nTheorem t : True.",
        'Redirect "/tmp/x" Print All.\nTheorem t : True.',
        "Definition x := 1.",
        "Theorem t : (* unterminated",
    ],
)
def test_hostile_statement_prefixes_are_refused(prefix: str) -> None:
    with pytest.raises(StatementError):
        parse_statement(prefix, "t")


def test_features_read_domain_linearity_and_goal() -> None:
    real = parse_statement(
        "Require Import Reals.\nOpen Scope R_scope.\nTheorem t : forall x y : R, x * y = 2 -> x + y >= 0 /\\ Rabs x <= 3 / y.",
        "t",
    )
    f = statement_features(real, "mathd_algebra_1")
    assert (f["domain"], f["nonlinear"], f["has_abs"], f["has_division"], f["goal_kind"]) == (
        "R",
        True,
        True,
        True,
        "conj",
    )
    lin = statement_features(parse_statement("Theorem t : forall n : nat, 2 * n + 3 = 7 -> n = 2.", "t"))
    assert (lin["domain"], lin["nonlinear"], lin["goal_kind"], lin["n_hypotheses"]) == ("nat", False, "eq", 1)
    z = statement_features(
        parse_statement("Require Import ZArith.\nTheorem t (a b : Z) : a ^ 2 mod 4 <> 2.", "t")
    )
    assert (z["domain"], z["nonlinear"], z["has_mod"], z["goal_kind"]) == ("Z", True, True, "neq")
    assert goal_kind(goal_of("forall x, x > 0 -> exists y, y = x")) == "exists"


def test_a_data_folder_keeps_references_only_for_the_statements_they_were_checked_on(
    shared_data: Path, tmp_path: Path
) -> None:
    from cm_gym.domains.base import LoadReport
    from cm_gym.domains.math.loader import MiniF2FLayoutError
    from cm_gym.domains.registry import DataRootError, get_benchmark

    proved = load_minif2f_tasks(shared_data)[:2]
    for t in proved:
        (tmp_path / t.meta["file"]).write_bytes((minif2f_root(shared_data) / t.meta["file"]).read_bytes())
    # same theorem name, another statement: the shipped proof must not be attached to it
    edited = tmp_path / proved[1].meta["file"]
    name = proved[1].meta["theorem"]
    edited.write_text(edited.read_text().replace(f"Theorem {name}", f"Theorem {name} (extra : True)", 1))
    (tmp_path / "broken.v").write_text("Load evil.\nTheorem broken : True.\nProof.\nAdmitted.\n")
    with pytest.raises(MiniF2FLayoutError, match="broken.v"):
        load_minif2f_tasks(tmp_path)
    report = LoadReport()
    tasks = load_minif2f_tasks(tmp_path, report=report)
    assert [t.task_id for t in tasks] == [proved[0].task_id] and tasks[0].reference == proved[0].reference
    assert [d[0] for d in report.dropped] == [proved[1].task_id]
    assert [Path(r[0]).name for r in report.refused] == ["broken.v"]
    everything = load_minif2f_tasks(tmp_path, proved_only=False, report=LoadReport())
    assert len(everything) == 2 and everything[1].reference == ""
    only_edited = tmp_path / "only"
    only_edited.mkdir()
    (only_edited / edited.name).write_text(edited.read_text())
    with pytest.raises(DataRootError, match="no MiniF2F tasks"):
        get_benchmark("MiniF2F").load(data=only_edited)
