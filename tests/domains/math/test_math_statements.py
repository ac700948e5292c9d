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
