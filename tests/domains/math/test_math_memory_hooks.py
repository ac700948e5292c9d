"""Math edits, slips, conditions, distillation and record transfer (no Coq needed): each edit
changes one unit, slips follow the statement's features, a distilled condition holds on its own
task and is false on a look-alike, and a record's contrast moves onto another draft."""

from __future__ import annotations

import numpy as np

from cm_gym.core.types import Task
from cm_gym.domains.conditions import parse_condition
from cm_gym.domains.math.domain import MathDomain
from cm_gym.domains.math.errormodel import math_error_model, procedure_class
from cm_gym.domains.math.features import statement_features
from cm_gym.domains.math.statement import parse_statement
from cm_gym.domains.registry import get_benchmark, get_domain

DOMAIN = MathDomain()


def _task(theorem: str, reference: str = "", name: str = "t", prefix: str = "") -> Task:
    st = parse_statement(prefix + f"Theorem {name} : {theorem}.", name)
    return Task(name, "math", st.source, "m", reference, features=statement_features(st, name),
                meta={"theorem": name, "prefix": st.prefix, "declared": []})  # fmt: skip


REAL = "Require Import Reals.\nOpen Scope R_scope.\n"
NONLINEAR_R = _task(
    "forall x y : R, x * y = 6 -> x = 2 -> y = 3", "Require Import Lra.\nintros.\nnra.", prefix=REAL
)
LINEAR_R = _task("forall x : R, 3 * x + 2 = 8 -> x = 2", "Require Import Lra.\nintros.\nlra.", prefix=REAL)
LINEAR_NAT = _task("forall n : nat, 2 * n + 3 = 7 -> n = 2", "Require Import Lia.\nintros.\nlia.")


def test_registered_with_a_domain_and_predicates() -> None:
    spec = get_benchmark("MiniF2F")
    assert spec.env_id == "cm_gym/MiniF2F-v0" and spec.domain_name == "math"
    assert isinstance(get_domain("math"), MathDomain)
    assert all(fn.__doc__ for fn in DOMAIN.condition_predicates().values())


def test_edits_swap_the_procedure_add_units_and_each_change_one_line() -> None:
    draft = "Require Import Lia.\nintros.\nlia."
    edits = DOMAIN.edit_operators(NONLINEAR_R, draft)
    texts = [e.text for e in edits]
    assert "Require Import Lia.\nRequire Import Lra.\nintros.\nnra." in texts  # procedure + its library
    assert "Require Import Lia.\nintros.\nsubst.\nlia." in texts
    assert "Require Import Lia.\nlia." in texts  # intros dropped
    assert any("pose proof (pow2_ge_0 x)." in t for t in texts)
    assert len(set(texts)) == len(texts) and draft not in texts
    lean = DOMAIN.edit_operators(LINEAR_R, "intros.\nlinarith.")
    assert lean[0].text == "Require Import Lra.\nintros.\nlra."
    assert (
        DOMAIN.edit_operators(LINEAR_NAT, "Require Import Lia.\nintros.\nlra.")[0].text.endswith("lia.")
        is False
    )
    assert DOMAIN.decision_units("Require Import Lra.\nintros.\n- nra.\n- lra.") == [
        "Require Import Lra.", "intros.", "- nra.", "- lra."]  # fmt: skip


def test_slips_depend_on_features_and_only_break_the_draft() -> None:
    model = math_error_model({"R/nonlinear": 0.5, "R/linear": 0.25, "nat/linear": 0.0})
    ops = {op.name: op for op in model.operators}
    assert ops["wrong_procedure"].probability(NONLINEAR_R) == 0.25
    assert ops["wrong_procedure"].probability(LINEAR_NAT) == 0.0
    assert procedure_class(NONLINEAR_R.features) == "R/nonlinear"
    rng = np.random.default_rng(0)
    wrong = ops["wrong_procedure"].apply(NONLINEAR_R, NONLINEAR_R.reference, rng)
    assert wrong is not None and wrong.splitlines()[-1] in ("lra.", "lia.")
    assert ops["missing_intros"].apply(LINEAR_R, LINEAR_R.reference, rng) == "Require Import Lra.\nlra."
    assert ops["missing_require"].apply(LINEAR_R, LINEAR_R.reference, rng) == "intros.\nlra."
    assert (
        ops["lean_tactic"].apply(LINEAR_R, LINEAR_R.reference, rng)
        == "Require Import Lra.\nintros.\nlinarith."
    )
    assert ops["missing_intros"].apply(LINEAR_R, "Require Import Lra.\nlra.", rng) is None  # nothing to drop


def test_distilled_condition_holds_on_its_task_and_not_on_a_look_alike() -> None:
    a_minus, a_plus = "Require Import Lra.\nintros.\nlra.", "Require Import Lra.\nintros.\nnra."
    d = DOMAIN.distil(NONLINEAR_R, a_minus, a_plus)
    cond = parse_condition(d.condition, DOMAIN.condition_predicates())
    assert cond.holds(NONLINEAR_R)
    assert not cond.holds(LINEAR_R) and not cond.holds(LINEAR_NAT)
    assert "lra. -> nra." in d.situation
    assert DOMAIN.contrast_key(a_minus, a_plus) == "lra. -> nra."
    assert DOMAIN.inverse_contrast_key(a_minus, a_plus) == "nra. -> lra."


def test_record_transfer_moves_the_change_onto_another_draft() -> None:
    # a procedure swap lands on the draft's own line, selector and bullets kept
    got = DOMAIN.apply_contrast(NONLINEAR_R, "intros.\nsubst.\nall: lra.", "intros.\nlra.", "intros.\nnra.")
    assert got == "Require Import Lra.\nintros.\nsubst.\nall: nra."
    # an added unit goes after the line it followed
    got = DOMAIN.apply_contrast(LINEAR_R, "Require Import Lra.\nlra.", "Require Import Lra.\nlra.",
                                "Require Import Lra.\nintros.\nlra.")  # fmt: skip
    assert got == "Require Import Lra.\nintros.\nlra."
    # a header the draft lacks is added; a contrast whose pattern is absent gives None
    assert DOMAIN.apply_contrast(LINEAR_R, "intros.\nlra.", "intros.\nlra.", "Require Import Lra.\nintros.\nlra.") == (
        "Require Import Lra.\nintros.\nlra.")  # fmt: skip
    assert DOMAIN.apply_contrast(LINEAR_R, "intros.\nring.", "intros.\nlinarith.", "intros.\nlra.") is None


def test_proof_table_round_trip_and_measured_rates(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cm_gym.domains.math.portfolio import SearchResult
    from cm_gym.domains.math.proofs import read_table, write_table, wrong_procedure_rates

    results = [
        SearchResult("a", ["lra", "nra"], "lra", "Require Import Lra.\nintros.\nlra."),
        SearchResult("b", ["nra"], "nra", "Require Import Lra.\nintros.\nnra."),
        SearchResult(
            "c",
            [],
            reason="does not load: Cannot find a physical path bound to logical path Coquelicot.Coquelicot.",
        ),
    ]
    features = {"a": {"domain": "R", "nonlinear": False}, "b": {"domain": "R", "nonlinear": True}}
    rates = wrong_procedure_rates({r.theorem: r.accepted for r in results if r.proved}, features)
    assert rates == {"R/linear": 0.5, "R/nonlinear": 0.75}
    path = tmp_path / "table.json"
    write_table(results, "8.16.1", "1", {"wrong_procedure": rates}, path=path)
    table = read_table(path)
    assert table["proofs"] == {"a": results[0].script, "b": results[1].script}
    assert table["unproved"] == {"c": "does not load with the standard library (needs Coquelicot.Coquelicot)"}
    assert table["rates"]["wrong_procedure"] == rates and table["probe_accepted"]["b"] == ["nra"]
