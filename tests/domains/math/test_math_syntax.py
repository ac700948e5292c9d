"""The Coq lexer and the proof-script vetting (no Coq needed): comments nest and hide strings,
sentences end at a period and a blank, bullets and braces are sentences, and scripts are refused
for every vernacular, forbidden tactic, string, size or header rule."""

from __future__ import annotations

import pytest

from cm_gym.domains.math.coqlex import CoqSyntaxError, split_sentences, strip_comments
from cm_gym.domains.math.script import ScriptError, parse_script


def test_comments_nest_and_strings_inside_them_do_not_close_them() -> None:
    text = '(* a (* b *) "*)" c *)lia.'
    clean = strip_comments(text)
    assert clean.strip() == "lia." and len(clean) == len(text)
    assert strip_comments('idtac "(* not a comment *)".') == 'idtac "(* not a comment *)".'
    with pytest.raises(CoqSyntaxError):
        strip_comments("(* (* *) lia.")
    with pytest.raises(CoqSyntaxError):
        strip_comments('lia. "open')


def test_sentences_bullets_braces_and_selectors() -> None:
    text = "intros x.\n- split. + lia.\n  + nra.\n2: { lia. }\nall: field.\nexact (Nat.add_comm 1 2).\n"
    got = [(s.kind, s.text) for s in split_sentences(text)]
    assert got == [
        ("command", "intros x."), ("bullet", "-"), ("command", "split."), ("bullet", "+"),
        ("command", "lia."), ("bullet", "+"), ("command", "nra."), ("brace", "2: {"), ("command", "lia."),
        ("brace", "}"), ("command", "all: field."), ("command", "exact (Nat.add_comm 1 2)."),
    ]  # fmt: skip
    # a period not followed by a blank does not end a sentence (qualified names, glued text)
    assert [s.text for s in split_sentences("rewrite Nat.add_0_r.lia.\n")] == ["rewrite Nat.add_0_r.lia."]
    assert [s.kind for s in split_sentences("-- lia.\n** lra.")] == ["bullet", "command", "bullet", "command"]
    with pytest.raises(CoqSyntaxError):
        split_sentences("intros; lia")


def test_canonical_script_keeps_requires_first_and_drops_proof_qed_and_comments() -> None:
    script = parse_script(
        "Proof.\nRequire Import Lra Psatz.\n(* the real part *) intros x h.\n- nra.\n- lra.\nQed."
    )
    assert script.requires == ("Lra", "Psatz")
    assert script.text() == "Require Import Lra Psatz.\nintros x h.\n- nra.\n- lra."
    assert script.tactics == ("intros x h.", "nra.", "lra.")
    assert parse_script("From Coq Require Import Lia.\nlia.").requires == ("Coq.Lia",)
    assert parse_script("Open Scope R_scope.\nlra.").text() == "Open Scope R_scope.\nlra."


@pytest.mark.parametrize(
    ("script", "why"),
    [
        ("Set Printing All.\nlia.", "not a tactic"),
        ("lia.\nAdmitted.", "not a tactic"),
        ("lia.\nQed.\nlia.", "not a tactic"),
        ("admit.", "forbidden tactic"),
        ("intros; timeout 3 lia.", "forbidden tactic"),
        ("intros.\ntry (exact_no_check I).", "forbidden tactic"),
        ('idtac "x".\nlia.', "string literals"),
        ("From Foo Require Import X.\nlia.", "From Coq"),
        ("lia.\nRequire Import Lra.", "before the first tactic"),
        ("Require Import 'x.\nlia.", "module names"),
        ("Import.\nlia.", "module names"),
        ("Local Set Foo.\nlia.", "Local Open Scope"),
        ("par: lia.", "par:"),
        ("#[local] lia.", "not a tactic"),
        ("(* open", "not a sequence"),
        ("", "no tactic"),
        ("x" * 9000 + ".", "too long"),
    ],
)
def test_refused_scripts_name_the_problem(script: str, why: str) -> None:
    with pytest.raises(ScriptError, match=why):
        parse_script(script)


def test_a_reply_that_restates_the_theorem_is_reduced_to_its_proof() -> None:
    from cm_gym.domains.math.domain import MathDomain

    reply = (
        "Sure:\n```coq\nRequire Import Reals Lra.\nOpen Scope R_scope.\n(* restated, never checked *)\n"
        "Theorem t : 1 + 1 = 3.\nProof.\n  intros.\n  lra.\nQed.\n```"
    )
    assert MathDomain().parse_action(reply) == "Require Import Reals Lra.\nOpen Scope R_scope.\nintros.\nlra."
    assert MathDomain().parse_action("```\nintros.\nlia.\n```") == "intros.\nlia."
    # no proof to extract: left as is, and vetting refuses it with a reason
    unproved = MathDomain().parse_action("```\nTheorem t : False.\nAdmitted.\n```")
    with pytest.raises(ScriptError, match="not a tactic"):
        parse_script(unproved)
