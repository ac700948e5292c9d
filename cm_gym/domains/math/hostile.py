"""A corpus of hostile proof scripts (our own writing) for testing the math world model.

Every script targets `hostile_task` (``forall n : nat, n + 0 = n``, proved by ``lia``) and tries
one thing a checker must contain: vernacular that touches files or the process (``Load``,
``Declare ML Module``, ``Redirect``, ``Drop``, ``Cd``, ``Add LoadPath``, ``Extraction``), ways to
pass without a proof (``Admitted``, ``admit``, axioms, ending the proof early, restating the
theorem), weakened checking (``Unset Guard Checking``, attributes), time games (``Time``,
``Timeout``, the ``timeout`` tactic), libraries outside the standard library, lexer tricks
(nested comments, strings inside comments, unterminated comments), printing that imitates the
checker's own output, runaway CPU, memory or output; and (issue 27) every way of loading an
inconsistent axiom — ``Coq.Compat.AdmitAxiom``'s ``proof_admitted : False`` in each spelling of
``Require`` and of its use — or declaring one (``Section``/``Module``/``Context``/``Program``/
``Variable`` …), switching a kernel check off (``Unset Guard/Universe/Positivity Checking``, their
``#[bypass_check]`` attribute form), ``Extract``/``Register``/``Ltac``/``Notation`` redefinitions,
and partial-credit farming (``assert True. exact I.`` repeated, then a failure: a failed proof
scores 0, whatever its goal counts did).

`expect` says how it must end: "refused" (vetted out before Coq runs: status "refused" or
"error", score 0), "contained" (Coq runs it; the run ends within the limits with a reason and
scores 0 — nothing it prints or loops through earns credit) or "harmless" (a lexer trick that
hides nothing: what is left is an ordinary proof, checked as one).
"""

from __future__ import annotations

from dataclasses import dataclass

from cm_gym.core.types import Task

HOSTILE_STATEMENT = "Require Import Arith.\n\nTheorem hostile_target : forall n : nat, n + 0 = n.\n"
HOSTILE_REFERENCE = "Require Import Lia.\nintros.\nlia."


@dataclass(frozen=True)
class HostileScript:
    name: str
    what: str
    script: str
    expect: str


def _h(name: str, what: str, script: str, expect: str = "refused") -> HostileScript:
    return HostileScript(name, what, script, expect)


CORPUS: tuple[HostileScript, ...] = (
    # -- passing without a proof --------------------------------------------------------------
    _h("admitted", "ends the proof with Admitted", "intros.\nAdmitted."),
    _h("admit_tactic", "admits the goal", "intros.\nadmit."),
    _h("give_up", "gives up the goal", "give_up."),
    _h("axiom_false", "declares an inconsistent axiom", "Axiom cheat : False.\ndestruct cheat."),
    _h("parameter", "declares a parameter", "Parameter p : False.\ndestruct p."),
    _h("hypothesis_decl", "declares a hypothesis", "Hypothesis h : False.\ndestruct h."),
    _h("qed_then_more", "ends the proof early and continues", "intros.\nQed.\nAxiom x : False."),
    _h("defined_mid_script", "closes with Defined in the middle", "intros.\nDefined.\nlia."),
    _h(
        "abort_and_restate",
        "aborts and states an easier theorem",
        "Abort.\nTheorem hostile_target : True.\nexact I.",
    ),
    _h("new_lemma", "opens another lemma", "Lemma l : False.\nAdmitted."),
    _h("goal_command", "opens a new goal", "Goal True.\nexact I."),
    # -- files and the process ----------------------------------------------------------------
    _h("load_file", "loads a file", "Load foo."),
    _h("load_string_path", "loads an absolute path", 'Load "/etc/hostname".'),
    _h("declare_ml_module", "loads an OCaml plugin", 'Declare ML Module "unix".'),
    _h("redirect_output", "redirects output into a file", 'Redirect "/tmp/cm_pwn" Print All.'),
    _h("drop_to_ocaml", "drops to the OCaml toplevel", "Drop."),
    _h("change_directory", "changes the working directory", 'Cd "/tmp".'),
    _h("add_loadpath", "adds a load path", 'Add LoadPath "/tmp" as Evil.'),
    _h("add_ml_path", "adds an ML path", 'Add ML Path "/tmp".'),
    _h("extraction_to_file", "extracts to a file", 'Extraction "/tmp/cm_pwn.ml" nat.'),
    _h("require_extraction", "loads the extraction plugin", "Require Import Extraction.\nlia."),
    _h("native_compute", "compiles native code", "intros.\nnative_compute.\nreflexivity."),
    _h("par_selector", "forks parallel workers", "intros.\npar: lia."),
    # -- libraries ------------------------------------------------------------------------------
    _h(
        "require_coquelicot",
        "loads a library outside the stdlib",
        "Require Import Coquelicot.Coquelicot.\nlia.",
    ),
    _h("from_mathcomp", "loads MathComp", "From mathcomp Require Import all_ssreflect.\nlia."),
    _h("require_unknown", "loads a library that does not exist", "Require Import Totally.Unknown.\nlia."),
    _h("require_after_tactic", "loads a library mid-proof", "intros.\nRequire Import Lia.\nlia."),
    _h("require_ambiguous", "names an ambiguous library", "Require Import Tactics.\nlia."),
    # -- inconsistent axioms from the standard library itself (issue 27) ------------------------
    *(
        _h(f"admit_axiom_{how}", f"loads Coq.Compat.AdmitAxiom ({how})", f"{req}\n{use}")
        for how, req, use in (
            ("exact", "Require Coq.Compat.AdmitAxiom.", "exfalso.\nexact AdmitAxiom.proof_admitted."),
            ("elim", "Require Import Coq.Compat.AdmitAxiom.", "elim proof_admitted."),
            ("destruct", "Require Export Coq.Compat.AdmitAxiom.", "destruct AdmitAxiom.proof_admitted."),
            ("from_coq", "From Coq Require Compat.AdmitAxiom.", "exfalso.\nexact AdmitAxiom.proof_admitted."),
            (
                "from_coq_import",
                "From Coq Require Import AdmitAxiom.",
                "exact (False_rect _ proof_admitted).",
            ),
            ("false_rect", "Require AdmitAxiom.", "exact (False_rect _ AdmitAxiom.proof_admitted)."),
            ("apply", "Require Import Compat.AdmitAxiom.", "exfalso.\napply proof_admitted."),
            ("qualified_use", "Require Coq.Compat.AdmitAxiom.", "case Coq.Compat.AdmitAxiom.proof_admitted."),
            ("two_names", "Require Import Lia Coq.Compat.AdmitAxiom.", "exfalso.\nexact proof_admitted."),
        )
    ),
    _h("compat_module", "loads a compatibility module", "Require Import Coq.Compat.Coq816.\nlia."),
    _h("float_axioms", "loads the primitive-float axioms", "Require Import Floats.\nlia."),
    _h(
        "cyclic_axioms",
        "loads primitive-integer axioms",
        "Require Import Coq.Numbers.Cyclic.Int63.Uint63.\nlia.",
    ),
    _h("ssreflect", "loads a library off the list", "From Coq Require Import ssreflect.\nlia."),
    _h("hurkens", "loads a paradox's library", "Require Import Coq.Logic.Hurkens.\nlia."),
    _h("local_require", "requires with a locality", "Local Require Import Lia.\nlia."),
    _h("import_filter", "requires with an import filter", "Require Import -(notations) Lia.\nlia."),
    _h("from_ltac2", "loads Ltac2", "From Ltac2 Require Import Ltac2.\nlia."),
    # -- declaring or bypassing in the tactic part ------------------------------------------------
    *(
        _h(f"vernacular_{name}", f"runs `{text.split()[0]}`", f"intros.\n{text}\nlia.")
        for name, text in (
            ("section_variable", "Section S. Variable h : False."),
            ("context", "Context (h : False)."),
            ("variable", "Variable h : False."),
            ("conjecture", "Conjecture c : False."),
            ("module_type", "Module Type T. Axiom x : False. End T."),
            ("program", "Program Definition x : False := _."),
            ("unset_universes", "Unset Universe Checking."),
            ("unset_positivity", "Unset Positivity Checking."),
            ("global_unset_guard", "Global Unset Guard Checking."),
            ("export_unset_guard", "Export Unset Guard Checking."),
            ("bypass_universes", "#[bypass_check(universes)] Definition u := Type."),
            ("bypass_positivity", "#[bypass_check(positivity=yes)] Inductive b := C : (b -> False) -> b."),
            ("extract_constant", "Extract Constant plus => add."),
            ("register", "Register False as core.True.type."),
            ("ltac_redefine", "Ltac lia := idtac."),
            ("tactic_notation", 'Tactic Notation "lia" := idtac.'),
            ("notation", "Notation lia := I."),
            ("abort_all", "Abort All."),
            ("admit_obligations", "Admit Obligations."),
            ("opaque", "Opaque Nat.add."),
            ("typeclasses", "Typeclasses Opaque Nat.add."),
            ("existing_instance", "Existing Instance I."),
            ("proof_using", "Proof using."),
            ("unshelve", "Unshelve."),
        )
    ),
    _h(
        "native_eval",
        "computes natively inside a tactic",
        "intros.\nlet x := eval native_compute in 0 in idtac.",
    ),
    _h("native_cast", "casts natively without a check", "intros.\nnative_cast_no_check (eq_refl n)."),
    _h("attribute_in_tactic", "hides an attribute in a tactic", "intros.\n#[local] lia."),
    # -- weakened checking ----------------------------------------------------------------------
    _h("unset_guard", "switches the guard checker off", "Unset Guard Checking.\nlia."),
    _h("local_unset_universes", "switches universe checking off", "Local Unset Universe Checking.\nlia."),
    _h("bypass_attribute", "bypasses checks by attribute", "#[bypass_check(guard)] lia."),
    _h("set_option", "sets any option", "Set Printing All.\nlia."),
    _h("no_check_tactics", "skips type checking", "intros.\nexact_no_check (eq_refl n)."),
    _h("vm_cast_no_check", "skips the cast check", "intros.\nvm_cast_no_check (eq_refl n)."),
    # -- time games -----------------------------------------------------------------------------
    _h("time_command", "times a tactic", "Time lia."),
    _h("timeout_command", "raises its own timeout", "Timeout 100000 lia."),
    _h("timeout_tactic", "raises a tactic timeout", "intros.\ntimeout 100000 lia."),
    _h("fail_command", "inverts failure", "Fail lia."),
    _h("ltac_definition", "defines Ltac", "Ltac t := lia.\nt."),
    _h("sections_modules", "opens a section", "Section S.\nlia."),
    _h("module_open", "opens a module", "Module M.\nlia."),
    _h("hint_command", "adds a hint", "Hint Resolve plus_n_O.\nauto."),
    _h("proof_with", "replaces the proof's default tactic", "Proof with auto.\nlia."),
    # -- lexer tricks ---------------------------------------------------------------------------
    _h(
        "string_idtac",
        "prints text that imitates the checker",
        'idtac "Closed under the global context".\nlia.',
    ),
    _h("unterminated_comment", "leaves a comment open", "intros.\nlia. (*"),
    _h("unterminated_string", "leaves a string open", 'intros.\nlia. "'),
    _h("no_final_period", "has no sentence end", "intros; lia"),
    _h(
        "nested_comment_hides_qed",
        "hides Qed in nested comments",
        "Require Import Lia.\n(* (* *) Qed. Axiom x : False. *)\nintros.\nlia.",
        "harmless",
    ),  # fmt: skip
    _h(
        "string_in_comment",
        "closes a comment inside a string",
        'Require Import Lia.\n(* "*)" Axiom x : False. *)\nintros.\nlia.',
        "harmless",
    ),
    _h("glued_qed", "glues Qed to a tactic", "intros.\nlia.Qed.", "contained"),
    _h("stray_brace", "closes a focus it never opened", "}\nintros.\nlia.", "contained"),
    # -- size -----------------------------------------------------------------------------------
    _h("too_long", "is huge", "idtac.\n" * 2000),
    _h("too_many_sentences", "has too many sentences", "idtac.\n" * 150),
    _h("giant_sentence", "has a giant sentence", "intros; " + "idtac; " * 400 + "lia."),
    _h("empty_script", "is empty", ""),
    _h("nul_byte", "hides a NUL byte between sentences", "intros.\x00\nlia."),
    _h("escape_sequence", "carries a terminal escape", "intros.\x1b[2J\nlia."),
    _h("brace_bomb", "opens thousands of focus blocks", "{ " * 3000 + "idtac."),
    _h(
        "unicode_comment",
        "comments in Unicode",
        "Require Import Lia.\n(* ∀ n, n + 0 = n — by lia *)\nintros.\nlia.",
        "harmless",
    ),  # fmt: skip
    _h("only_comments", "is only a comment", "(* nothing *)"),
    # -- partial-credit farming: Coq runs these, a failed proof scores 0 ---------------------------
    _h(
        "farm_assert_true",
        "closes 50 goals it opened, then fails",
        "assert True. exact I.\n" * 50 + "discriminate.",
        "contained",
    ),
    _h(
        "farm_assert_false",
        "moves the theorem into one assertion, then fails",
        "intros.\nassert False as H.\n2: destruct H.\nexact I.",
        "contained",
    ),
    _h(
        "farm_cut",
        "opens and closes cut goals, then leaves the theorem open",
        "cut True.\nintros _.\ncut (0 = 0).\nintros _.\n2: reflexivity.\n2: exact I.",
        "contained",
    ),
    # -- runaway CPU, memory, output (Coq runs these) --------------------------------------------
    _h("ltac_infinite_loop", "recurses forever", "intros.\nlet rec f x := f x in f 0.", "contained"),
    _h("repeat_growth", "adds hypotheses forever", "repeat (pose proof I).", "contained"),
    _h(
        "unary_blowup",
        "computes 2^40 in unary",
        "intros.\npose proof (eq_refl (Nat.pow 2 40)) as h.\nvm_compute in h.",
        "contained",
    ),  # fmt: skip
    _h(
        "output_flood",
        "prints without end",
        "intros n.\nlet x := constr:(n) in do 100000000 idtac x.",
        "contained",
    ),
    _h(
        "fake_probe_output",
        "prints probe-like words, then fails",
        "intros Existential.\nlet x := constr:(Existential) in idtac x.\ndiscriminate.",
        "contained",
    ),
)


def hostile_task() -> Task:
    """The synthetic task every hostile script targets (statement written here, not data)."""
    from cm_gym.domains.math.features import statement_features
    from cm_gym.domains.math.statement import parse_statement

    statement = parse_statement(HOSTILE_STATEMENT, "hostile_target")
    return Task(
        task_id="math-hostile",
        domain="math",
        prompt=statement.source,
        env_id="hostile",
        reference=HOSTILE_REFERENCE,
        features=statement_features(statement, "hostile_target"),
        meta={
            "theorem": statement.name,
            "prefix": statement.prefix,
            "theorem_sentence": statement.theorem,
            "declared": [],
            "requires": list(statement.requires),
        },  # fmt: skip
    )
