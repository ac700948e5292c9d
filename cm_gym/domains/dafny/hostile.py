"""Annotation tricks that made unproved Dafny programs "verified" before issue 14 (our own
writing), for the tests and `bench/bench_isolation.py`: each is (name, class, program, action); the
action must be refused by `extract_annotations` with a reason. Classes: code hidden after an
annotation, comment/string disagreement between a checker and Dafny, verification switched off
(``assume``, attributes, ``decreases *``), new or changed program text, and (issue 25) escapes
through the ghost statements a proof author may insert (``assert … by``, ``calc``, ``forall``,
lemma calls, ``ghost var``)."""

from __future__ import annotations

SUM = """method Sum(n: nat) returns (s: nat)
  ensures s == n * (n + 1) / 2
{
  s := 0;
  var i := 0;
  while i < n
  {
    i := i + 1;
    s := s + i;
  }
}
"""
COLLATZ = """method Collatz(n: nat)
{
  var x := n;
  while x > 1
  {
    if x % 2 == 0 { x := x / 2; } else { x := 3 * x + 1; }
  }
}
"""
AFTER_LOOP = "  }\n}"
#: a method declared possibly non-terminating, and a second one that is not (issue 25 probes)
TWO = COLLATZ.replace("(n: nat)\n", "(n: nat)\n  decreases *\n") + COLLATZ.replace("Collatz", "Halting")
#: a program with a lemma that has a body and one that is a bodiless axiom
LEMMAS = SUM + "lemma Helper(n: nat)\n  ensures n * (n + 1) % 2 == 0\n{\n}\n"


def after_loop(text: str) -> str:
    return SUM.replace(AFTER_LOOP, "  }\n" + text + "\n}")


#: (name, class, program, action): each one verifies with Dafny 2.3 or changes the program; all refused
PROBES = [
    ("code_after_annotation_on_the_same_line", "code after an annotation", SUM, after_loop("  assert true; s := n * (n + 1) / 2;")),
    ("assume_hidden_between_comment_markers_in_strings", "comment/string disagreement", SUM,
     after_loop('  assert "/*" != "";\n  assume false;\n  assert "*/" != "";')),
    ("code_hidden_between_comment_markers_in_strings", "comment/string disagreement", SUM,
     after_loop('  assert "/*" != "";\n  s := n * (n + 1) / 2;\n  assert "*/" != "";')),
    ("decreases_star_on_method_and_loop", "assume / attributes / decreases *", COLLATZ,
     COLLATZ.replace("(n: nat)\n", "(n: nat)\n  decreases *\n").replace("x > 1\n", "x > 1\n    decreases *\n")),
    ("decreases_star_in_a_list", "assume / attributes / decreases *", COLLATZ, COLLATZ.replace("x > 1\n", "x > 1\n    decreases x, *\n")),
    ("assume", "assume / attributes / decreases *", SUM, after_loop("  assume s == n * (n + 1) / 2;")),
    ("assume_after_isolated_cr_ending_a_line_comment", "comment/string disagreement", SUM, after_loop("  // note\r  assume false;")),
    ("axiom_attribute", "assume / attributes / decreases *", SUM, after_loop("  assert {:axiom} s == n * (n + 1) / 2;")),
    ("attribute_split_over_lines", "assume / attributes / decreases *", SUM, after_loop("  assert {:\n   axiom} s == n * (n + 1) / 2;")),
    ("verify_false_attribute_in_loop_header", "assume / attributes / decreases *", SUM, SUM.replace("while i < n\n", "while i < n\n    invariant {:verify false} true\n")),
    ("new_statement", "new or changed program text", SUM, after_loop("  s := n * (n + 1) / 2;")),
    ("new_loop", "new or changed program text", SUM, after_loop("  while true decreases * { }")),
    ("new_loop_inside_an_assertion_line", "code after an annotation", SUM, after_loop("  assert true; while true { }")),
    ("body_change", "new or changed program text", SUM, SUM.replace("s := s + i;", "s := s + i + 0;")),
    ("removed_statement", "new or changed program text", SUM, SUM.replace("    s := s + i;\n", "")),
    ("weakened_postcondition", "new or changed program text", SUM, SUM.replace("ensures s == n * (n + 1) / 2", "ensures true")),
    ("unterminated_block_comment_hides_the_rest", "comment/string disagreement", SUM, SUM.replace("  s := 0;\n", "  s := 0;\n  /*\n")),
    ("verbatim_string_hides_nothing", "comment/string disagreement", SUM, after_loop('  assert @"*/ assume false; /*" != "";\n  assume false;')),
    ("invariant_followed_by_code", "code after an annotation", SUM, SUM.replace("while i < n\n", "while i < n\n    invariant true s := 0;\n")),
    ("assertion_swallowing_a_statement", "code after an annotation", SUM, SUM.replace("    s := s + i;\n", "    assert s := s + i;\n")),
    ("lemma_added", "new or changed program text", SUM, SUM + "lemma {:axiom} Cheat() ensures false\n"),
    ("include_added", "new or changed program text", SUM, 'include "/etc/passwd"\n' + SUM),
    # issue 25: ghost statements are accepted, escapes through them are not
    ("assume_in_an_assert_by_block", "ghost statement escapes", SUM, after_loop("  assert s == n * (n + 1) / 2 by { assume false; }")),
    ("assignment_in_an_assert_by_block", "ghost statement escapes", SUM, after_loop("  assert true by { s := n * (n + 1) / 2; }")),
    ("bodiless_loop_in_an_assert_by_block", "ghost statement escapes", SUM, after_loop("  assert s == n * (n + 1) / 2 by { while true invariant false }")),
    ("axiom_attribute_in_an_assert_by_block", "ghost statement escapes", SUM, after_loop("  assert true by { assert {:axiom} false; }")),
    ("assume_in_a_calc_hint", "ghost statement escapes", SUM, after_loop("  calc { s; { assume false; } n * (n + 1) / 2; }")),
    ("forall_statement_without_a_body", "ghost statement escapes", SUM, after_loop("  forall k: nat | k < n ensures false;")),
    ("call_of_a_method_not_a_lemma", "ghost statement escapes", SUM, after_loop("  var t := Sum(n);")),
    ("call_of_an_undeclared_lemma", "ghost statement escapes", LEMMAS, LEMMAS.replace(AFTER_LOOP, "  }\n  Cheat(n);\n}", 1)),
    ("lemma_call_swallowing_code", "ghost statement escapes", LEMMAS, LEMMAS.replace(AFTER_LOOP, "  }\n  Helper(n); s := 0;\n}", 1)),
    ("ghost_var_assigning_a_program_variable", "ghost statement escapes", SUM, after_loop("  ghost var t := 0; s := t;")),
    ("reveal_with_an_assignment", "ghost statement escapes", SUM, after_loop("  reveal s := 0;")),
    ("verify_false_attribute_in_a_forall_body", "ghost statement escapes", SUM, after_loop("  forall k: nat | k < n ensures k < n { assert {:verify false} true; }")),
    ("decreases_star_added_to_a_terminating_method", "assume / attributes / decreases *", TWO,
     TWO.replace("method Halting(n: nat)\n", "method Halting(n: nat)\n  decreases *\n")),
]  # fmt: skip

#: issue 33: a one-line annotation that ground z3's ``nlsat`` for 12 minutes at any ``/rlimit``
#: (Fermat's last theorem for cubes), inserted after the loop of task dafny-0025
FERMAT = "  assert forall x,y,z :: x>0 && y>0 && z>0 ==> x*x*x + y*y*y != z*z*z;"
FERMAT_TASK_FILE = "Clover_integer_square_root.dfy"


def with_fermat(reference: str) -> str:
    """`reference` with `FERMAT` as the last statement of its last method body."""
    head, sep, tail = reference.rstrip().rpartition("\n}")
    if not sep:
        raise ValueError("no method body to put the probe in")
    return head + "\n" + FERMAT + sep + tail + "\n"
