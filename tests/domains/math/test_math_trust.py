"""What a proof may rely on (issue 27): the fixed library list, the fully qualified axiom
allow-list read through Coq's own name resolution, and the exact reading of `Print Assumptions`.

Cheap by construction: the parser and the judge run on Coq's recorded answers (and on
Hypothesis-generated ones); one `coqc` run checks many theorems at once (every spelling of the
AdmitAxiom attack, unsafe definitions, shadowed names) against the real printer; three evaluator
runs check the whole path."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cm_gym.core.types import Action, AgentState
from cm_gym.domains.math.assumptions import (
    Assumption,
    judge_assumptions,
    parse_assumptions,
    read_locate,
)
from cm_gym.domains.math.coqtool import CoqInstall, coq_install
from cm_gym.domains.math.hostile import CORPUS, hostile_task
from cm_gym.domains.math.statement import parse_statement
from cm_gym.domains.math.trust import ALLOWED_AXIOMS, allowed_libraries
from cm_gym.evaluators.sandbox import ToolNotFoundError
from tests.domains.math.conftest import make_evaluator, synthetic_task

REALS_ANSWER = """Axioms:
ClassicalDedekindReals.sig_forall_dec
  : forall P : nat -> Prop,
    (forall n : nat, {P n} + {~ P n}) ->
    {n : nat | ~ P n} + {forall n : nat, P n}
FunctionalExtensionality.functional_extensionality_dep
  : forall (A : Type) (B : A -> Type) (f g : forall x : A, B x),
    (forall x : A, f x = g x) -> f = g
"""
REALS_LOCATED = {
    "ClassicalDedekindReals.sig_forall_dec": "Coq.Reals.ClassicalDedekindReals.sig_forall_dec",
    "FunctionalExtensionality.functional_extensionality_dep": (
        "Coq.Logic.FunctionalExtensionality.functional_extensionality_dep"
    ),
}


@pytest.fixture(scope="module")
def install() -> CoqInstall:
    """The installed Coq (skipped without it outside CI, a failure in CI)."""
    try:
        return coq_install()
    except ToolNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"coqc is missing in CI: {exc}")
        pytest.skip(str(exc))


# -- the parser and the judge on recorded answers ----------------------------------------------
def test_recorded_answers_are_read_exactly() -> None:
    entries = parse_assumptions(REALS_ANSWER)
    assert [(e.kind, e.name) for e in entries] == [
        ("axiom", "ClassicalDedekindReals.sig_forall_dec"),
        ("axiom", "FunctionalExtensionality.functional_extensionality_dep"),
    ]
    verdict = judge_assumptions(entries, REALS_LOCATED)
    assert verdict.disallowed == () and set(verdict.assumptions) == set(REALS_LOCATED.values())
    assert parse_assumptions("Closed under the global context\n") == ()
    section = parse_assumptions("Section Variables:\nv\n: False\nAxioms:\nc_spec : 1 = 1\n")
    assert [(e.kind, e.name) for e in section] == [("variable", "v"), ("axiom", "c_spec")]


@pytest.mark.parametrize(
    "answer",
    [
        "Axioms:\nAdmitAxiom.proof_admitted : False\n",  # the attack: qualified by a stdlib module
        "Axioms:\nloop is assumed to be guarded.\n",
        "Axioms:\nbad is assumed to be positive.\n",
        "Axioms:\nU relies on an unsafe hierarchy.\n",
        "Theory:\nSet is impredicative\n",
        "Theory:\nType hierarchy is collapsed (logic is inconsistent)\n",
        "Section Variables:\nh\n: False\n",  # not declared by the statement
        "Opaque constants:\nx : nat\n",
        "",
        "Closed under the global context\nAxioms:\nx : False\n",
        "  Closed under the global context\n",
        "classic : forall P : Prop, P \\/ ~ P\n",  # no section title
        "Axioms:\n  indented : False\n",  # a continuation without an entry
        "Axioms:\nweird entry without a colon\n",
        "Axioms:\nClassical_Prop.classic : forall P : Prop, P \\/ ~ P\nevil : False\n",
    ],
)
def test_anything_but_allowed_axioms_is_disallowed(answer: str) -> None:
    allowed = {
        "classic": "Coq.Logic.Classical_Prop.classic",
        "Classical_Prop.classic": "Coq.Logic.Classical_Prop.classic",
    }
    verdict = judge_assumptions(parse_assumptions(answer), allowed, variables=("v",))
    assert verdict.disallowed, answer


def test_locate_gives_the_shortest_name_of_exactly_the_queried_constant() -> None:
    full = "Coq.Logic.Classical_Prop.classic"
    assert (
        read_locate(f"Constant {full}\n  (shorter name to refer to it in current context is classic)\n", full)
        == "classic"
    )
    assert (
        read_locate(
            f"Constant {full} (shorter name to refer to it in current context is Classical_Prop.classic)",
            full,
        )
        == "Classical_Prop.classic"
    )
    assert read_locate(f"Constant {full}\n", full) == full
    assert read_locate(f"No term of suffix {full}\n", full) == ""
    assert (
        read_locate(
            "Constant Coq.Other.classic\n  (shorter name to refer to it in current context is classic)", full
        )
        == ""
    )
    assert read_locate(f"Notation {full}\n", full) == ""


_IDENT = st.text("abcxyzAZ_'0123456789", min_size=1, max_size=10).map(lambda s: "a" + s)
_NAME = st.lists(_IDENT, min_size=1, max_size=4).map(".".join)
_TYPE_LINE = st.text("abcnatZR:=-> ()/\\~,.{}+", min_size=1, max_size=50).map(lambda s: "T" + s.strip())


def _render_axiom(name: str, lines: list[str], inline: bool, indent: int) -> str:
    pad = " " * indent
    if inline:
        return f"{name} : {lines[0]}" + "".join(f"\n{pad}{line}" for line in lines[1:])
    return f"{name}\n{pad}: {lines[0]}" + "".join(f"\n{pad}  {line}" for line in lines[1:])


@settings(max_examples=60, deadline=None)
@given(
    axioms=st.lists(
        st.tuples(_NAME, st.lists(_TYPE_LINE, min_size=1, max_size=4), st.booleans(), st.integers(1, 6)),
        min_size=1,
        max_size=6,
        unique_by=lambda a: a[0],
    ),  # fmt: skip
    variables=st.lists(
        st.tuples(_NAME.filter(lambda n: "." not in n), st.lists(_TYPE_LINE, min_size=1, max_size=3)),
        max_size=3,
        unique_by=lambda v: v[0],
    ),  # fmt: skip
    allowed_share=st.floats(0, 1),
    blank_lines=st.booleans(),
)
def test_property_every_printed_axiom_is_found_and_judged(
    axioms, variables, allowed_share, blank_lines
) -> None:  # type: ignore[no-untyped-def]
    """However Coq breaks the lines (inline or next-line types, any indentation, section variables
    whose type starts at column 0 with ``:``), every entry is recovered by name, and the verdict
    disallows exactly the names that are not allowed."""
    parts = []
    if variables:
        parts.append("Section Variables:")
        parts += [f"{n}\n: {t[0]}" + "".join(f"\n  {x}" for x in t[1:]) for n, t in variables]
    parts.append("Axioms:")
    parts += [_render_axiom(*a) for a in axioms]
    text = ("\n\n" if blank_lines else "\n").join(parts) + "\n"
    entries = parse_assumptions(text)
    assert [e.name for e in entries] == [n for n, _ in variables] + [a[0] for a in axioms]
    cut = int(len(axioms) * allowed_share)
    allowed = {a[0]: "Coq.Full." + a[0] for a in axioms[:cut]}
    verdict = judge_assumptions(entries, allowed, variables=[n for n, _ in variables])
    assert set(verdict.disallowed) == {a[0] for a in axioms[cut:]}


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=400))
def test_property_parser_never_raises_and_never_calls_arbitrary_text_clean(text: str) -> None:
    entries = parse_assumptions(text)
    assert all(isinstance(e, Assumption) for e in entries)
    if text.strip() and text.strip() != "Closed under the global context":
        verdict = judge_assumptions(entries, {})
        assert verdict.disallowed or not entries


# -- the fixed lists ---------------------------------------------------------------------------
def test_library_list_is_fixed_and_leaves_out_what_proves_false() -> None:
    libs = allowed_libraries()
    assert {"Coq.micromega.Lia", "Coq.micromega.Lra", "Coq.micromega.Psatz", "Coq.Reals.Reals",
            "Coq.ZArith.ZArith", "Coq.Logic.Classical", "Coq.Arith.Arith"} <= libs  # fmt: skip
    forbidden = ("Compat", "extraction", "Floats", "Array", "ssr", "Cyclic", "Hurkens", "FSets", "MSets")
    assert not [lib for lib in libs if any(part in lib.split(".") for part in forbidden)]
    assert all(lib.startswith("Coq.") for lib in libs)
    assert not [a for a in ALLOWED_AXIOMS if "Compat" in a or "Float" in a] and len(set(ALLOWED_AXIOMS)) == 14


@pytest.mark.data
def test_every_library_the_statements_and_references_need_is_on_the_list(
    shared_data: Path, install: CoqInstall
) -> None:
    from cm_gym.domains.math.loader import load_minif2f_tasks
    from cm_gym.domains.math.proofs import read_table
    from cm_gym.domains.math.script import parse_script

    names = {r for t in load_minif2f_tasks(shared_data, proved_only=False) for r in t.meta["requires"]}
    names |= {r for s in read_table()["proofs"].values() for r in parse_script(s).requires}
    resolved = set()
    for name in names:
        try:
            resolved.add(install.resolve(name))
        except Exception:  # noqa: BLE001 - Coquelicot / MathComp: not the standard library
            assert name.split(".")[0] in ("Coquelicot", "mathcomp"), name
    assert resolved and resolved <= allowed_libraries(), resolved - allowed_libraries()


# -- one coqc run: Coq's own printer, every spelling of the attack -----------------------------
_BATCH_THEOREMS = {
    # name: (script, expected: True = every assumption allowed)
    "exact": ("exfalso. exact AdmitAxiom.proof_admitted.", False),
    "elim": ("elim AdmitAxiom.proof_admitted.", False),
    "destr": ("destruct Coq.Compat.AdmitAxiom.proof_admitted.", False),
    "rect": ("exact (False_rect _ AdmitAxiom.proof_admitted).", False),
    "app": ("exfalso. apply AdmitAxiom.proof_admitted.", False),
    "imported": ("Import Coq.Compat.AdmitAxiom. exfalso. exact proof_admitted.", False),
    "classic": (
        "destruct (classic (1 = 2)) as [h|h]; [exact h|]. exfalso. exact AdmitAxiom.proof_admitted.",
        False,
    ),
    "honest": (
        "destruct (classic (1 = 1)) as [h|h]; [|exfalso; apply h; reflexivity]. exfalso. exact (own_false).",
        True,
    ),  # fmt: skip
    "reals": ("exfalso. apply own_false.", True),
    "shadow": ("exfalso. exact (task.sig_forall_dec).", True),
    "guard": ("exfalso. exact (loop 0).", False),
    "helper": ("exact helper.", False),
}
_BATCH_PREFIX = """Require Import Reals Classical.
Require Coq.Compat.AdmitAxiom.
Axiom own_false : False.
Axiom sig_forall_dec : False.
Lemma helper : 1 = 2.
Proof. Admitted.
Unset Guard Checking.
Fixpoint loop (n : nat) : False := loop n.
Set Guard Checking.
"""


@pytest.mark.coq
def test_one_coqc_run_judges_every_spelling_by_full_name(tmp_path: Path, install: CoqInstall) -> None:
    lines = [_BATCH_PREFIX]
    queries = (*ALLOWED_AXIOMS, "task.own_false", "task.sig_forall_dec")
    for name, (script, _) in _BATCH_THEOREMS.items():
        lines.append(
            f"Theorem t_{name} : 1 = 2.\nProof. {script} Qed.\nLocate cm_x_{name}.\nPrint Assumptions t_{name}."
        )
        lines += [f"Locate cm_q_{name}_{i}.\nLocate Term {q}." for i, q in enumerate(queries)]
        lines.append(f"Locate cm_fin_{name}.")
    (tmp_path / "task.v").write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = subprocess.run([install.coqc, "-q", "-no-glob", "task.v"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout
    for name, (_, clean) in _BATCH_THEOREMS.items():
        block = out.split(f"No object of basename cm_x_{name}\n", 1)[1].split(
            f"No object of basename cm_fin_{name}", 1
        )[0]
        pieces = re.split(rf"No object of basename cm_q_{name}_\d+\n", block)
        allowed = {}
        for full, answer in zip(queries, pieces[1:], strict=True):
            short = read_locate(answer, full)
            if short:
                allowed[short] = full
        verdict = judge_assumptions(parse_assumptions(pieces[0]), allowed, variables=())
        assert (not verdict.disallowed) == clean, (name, pieces[0], verdict)
    assert "task.sig_forall_dec" in allowed.values()  # declared by the "statement": its own


# -- the evaluator, end to end (three coqc runs; refusals run none) -------------------------------
@pytest.mark.coq
def test_evaluator_accepts_allowed_axioms_by_full_name_and_refuses_statement_libraries() -> None:
    ev = make_evaluator()
    classic = synthetic_task("Theorem em : forall P : Prop, P \\/ ~ P.", "em")
    o = ev.check(AgentState(classic), Action("Require Import Classical.\nexact classic."))
    assert o.solved and o.details["assumptions"] == ["Coq.Logic.Classical_Prop.classic"], o.feedback
    runs = ev.runs
    for prefix in ("Require Coq.Compat.AdmitAxiom.", "From Coq Require Import Compat.AdmitAxiom.",
                   "Require Import Floats."):  # fmt: skip
        task = synthetic_task(f"{prefix}\nTheorem bad : 1 = 2.", "bad")
        o = ev.check(AgentState(task), Action("exfalso.\nexact AdmitAxiom.proof_admitted."))
        assert o.status == "error" and o.score == 0.0 and "not on the list" in o.feedback, o.feedback
    assert ev.runs == runs  # refused before coqc
    farm = next(h for h in CORPUS if h.name == "farm_assert_true")
    o = ev.check(AgentState(hostile_task()), Action(farm.script))  # 50 goals "closed", then a failure
    assert o.score == 0.0 and not o.solved and o.status == "ok" and "50 closed before it" in o.feedback


def test_statement_requires_are_read_in_every_spelling() -> None:
    for prefix, lib in [("From Coq Require Compat.AdmitAxiom.", "Coq.Compat.AdmitAxiom"),
                        ("Require Export Coq.Compat.AdmitAxiom.", "Coq.Compat.AdmitAxiom"),
                        ("Local Require Import AdmitAxiom.", "AdmitAxiom"),
                        ("Global Require AdmitAxiom Lia.", "AdmitAxiom")]:  # fmt: skip
        st_ = parse_statement(f"{prefix}\nTheorem t : True.", "t")
        assert lib in st_.requires, (prefix, st_.requires)
