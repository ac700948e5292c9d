"""Parsers for real replies (issue 22): the shared extraction core (`cm_gym.domains.reply`) and
every domain's configuration of it, on a corpus of reply shapes (`reply_shapes`), the three SQL
failures seen with a real model, and what counts as a change (`Domain.action_changed`)."""

from __future__ import annotations

import pytest

from cm_gym.domains.base import Domain
from cm_gym.domains.code.domain import CodeDomain
from cm_gym.domains.dafny.domain import DafnyDomain
from cm_gym.domains.math.domain import MathDomain
from cm_gym.domains.reply import ReplyFormat, extract, fenced_blocks, split_thinking
from cm_gym.domains.sat.domain import SatDomain
from cm_gym.domains.smt.domain import SmtDomain
from cm_gym.domains.sql.domain import SQLDomain
from cm_gym.llm.simulated import fenced
from tests.domains.reply_shapes import PROSE_SHAPES, SHAPES
from tests.toy_domain import ToyDomain

SQL = "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.singer_id\nWHERE T2.year >= 2014"
SQL_WRONG = "SELECT name FROM singer WHERE year > 2014"
SAT = "exactly_one color[v][*] for v in V\nnot_both color[u][c] color[v][c] for (u, v) in E, c in C"
SAT_CONFIG = "solver: maplecm\nphase: default\npreprocess: off\nbudget: 12"
SMT = "(set-logic QF_LIA)\n(declare-const x Int)\n(declare-const y Int)\n(assert (> (+ x y) 14))\n(check-sat)"
SMT_CONFIG = "logic: QF_BV\ntactic: (then simplify smt)\nrlimit: 2000000"
PY = "import math\n\n\ndef gcd(a, b):\n    # Euclid\n    if b == 0:\n        return a\n    return gcd(b, a % b)"
DIFF = "--- a/gcd.py\n+++ b/gcd.py\n@@ -1,4 +1,4 @@\n def gcd(a, b):\n-    if b == 1:\n+    if b == 0:\n         return a"
DAFNY = "method M(x: int) returns (seven: int)\n  ensures seven == 7\n{\n  seven := 7;\n}"
COQ = "Require Import Lra.\nintros x h.\nnlinarith [sq_nonneg (x - 1), sq_nonneg (x + 1)]."

#: (domain, action, fence tag, a wrong action, what prose calls it)
CASES = {
    "sql": (SQLDomain(), SQL, "sql", SQL_WRONG, "query"),
    "sat-encoding": (SatDomain(), SAT, "sat", "exactly_one x[*]", "encoding"),
    "sat-config": (SatDomain(), SAT_CONFIG, "", "solver: minisat22", "configuration"),
    "smt-script": (SmtDomain(), SMT, "smt2", "(check-sat)", "script"),
    "smt-config": (SmtDomain(), SMT_CONFIG, "", "logic: QF_LIA", "configuration"),
    "python": (CodeDomain(), PY, "python", "def gcd(a, b):\n    return a", "program"),
    "diff": (CodeDomain(), DIFF, "diff", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b", "patch"),
    "dafny": (DafnyDomain(), DAFNY, "dafny", "method M() {}", "program"),
    "coq": (MathDomain(), COQ, "coq", "intros.\nlia.", "proof"),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_domain_reads_every_reply_shape(case: str, shape: str) -> None:
    domain, action, tag, wrong, what = CASES[case]
    reply = SHAPES[shape](action, tag, wrong, what)
    assert domain.parse_action(reply) == action, reply
    assert domain.parse_problem(domain.parse_action(reply)) is None


@pytest.mark.parametrize("case", sorted(CASES))
def test_prose_shapes_need_the_recogniser(case: str) -> None:
    """Without the domain's recogniser the same prose replies are not read as the action (the
    recogniser, not a lucky whole-reply fallback, does the work)."""
    domain, action, tag, wrong, what = CASES[case]
    bare = ReplyFormat(domain.reply_format.languages, None, domain.reply_format.what)
    for shape in PROSE_SHAPES:
        reply = SHAPES[shape](action, tag, wrong, what)
        got = extract(reply, bare)
        assert got.action != action or shape == "action-label"


# -- the three SQL failures met with a real model -------------------------------------------------
def test_an_empty_first_block_is_skipped() -> None:
    assert (
        SQLDomain().parse_action("```\n\n```sql\nSELECT name FROM people\n```") == "SELECT name FROM people"
    )


def test_a_reply_cut_at_max_tokens_loses_its_fence_line() -> None:
    got = SQLDomain().extract_action("Here is the query:\n```sql\nSELECT name FROM people WHERE age >")
    assert got.action == "SELECT name FROM people WHERE age >" and got.cut and got.source == "fence"


def test_a_bare_select_between_two_sentences_is_taken_alone() -> None:
    reply = (
        "The query you need is SELECT name FROM people WHERE age > 3. This returns the names you asked for."
    )
    assert SQLDomain().parse_action(reply) == "SELECT name FROM people WHERE age > 3"
    multi = "Sure:\nSELECT Name,\n  Age\nFROM singer\nWHERE Age > 30;\nIt lists the singers over thirty."
    assert SQLDomain().parse_action(multi) == "SELECT Name,\n  Age\nFROM singer\nWHERE Age > 30"


def test_prose_without_a_query_is_a_clear_parse_failure() -> None:
    domain = SQLDomain()
    for reply, why in (
        ("I cannot answer this without the schema.", "no SQL query"),
        ("", "empty"),
        ("<think>The user wants the names. SELECT name", "inside its reasoning section"),
        ("We select the right rows with care.", "no SQL query"),
    ):
        got = domain.extract_action(reply)
        assert not got.found and why in got.problem
        assert domain.parse_problem(domain.parse_action(reply)) is not None


# -- the core's rules -------------------------------------------------------------------------------
def test_last_complete_in_language_block_wins_over_first_and_cut_ones() -> None:
    fmt = ReplyFormat(("sql",))
    reply = "```sql\nA\n```\ntext\n```python\nP\n```\n```sql\nB\n```\n```sql\nC cut"
    assert extract(reply, fmt).action == "B"
    assert extract("```python\nP\n```\n```\nU\n```", fmt).action == "U"  # untagged before other tags
    assert extract("```python\nP\n```", fmt).source == "fence-other"


def test_longer_fences_nest_and_the_simulator_fence_round_trips() -> None:
    inner = "/* quoted:\n```ts\nlet x = 1;\n```\n*/\nmethod M() {}"
    assert [b.body for b in fenced_blocks(fenced(inner))] == [inner]
    assert DafnyDomain().parse_action(fenced(inner)) == inner
    assert fenced("SELECT 1") == "```\nSELECT 1\n```"  # the common case is byte-identical to before


def test_reasoning_sections_are_set_aside() -> None:
    assert split_thinking("a<think>b</think>c<reasoning>d</reasoning>e") == ("ace", False)
    assert split_thinking("x<THINK>y") == ("x", True)
    assert split_thinking("hidden</think>shown<think>z</think>!") == ("shown!", False)


def test_a_domain_without_recogniser_keeps_the_old_fallbacks() -> None:
    toy = ToyDomain()
    assert toy.parse_action("Here:\n```sql\nSELECT 1\n```\nthanks") == "SELECT 1"
    assert toy.parse_action("ACTION: x > 1") == "x > 1"
    assert toy.parse_action("  x > 2 ") == "x > 2"
    assert toy.parse_problem("x > 2") is None and toy.parse_problem("   ") is not None


# -- what counts as a change ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("domain", "a", "b", "changed"),
    [
        (SQLDomain(), "select name from people", "SELECT  name\nFROM people", False),
        (
            SQLDomain(),
            "SELECT name FROM people WHERE age > 3",
            "SELECT name FROM people WHERE age >= 3",
            True,
        ),
        (CodeDomain(), "def f(x):\n    return x + 1", "def f(x):  # add\n\n    return (x + 1)", False),
        (CodeDomain(), "def f(x):\n    return x + 1", "def f(x):\n    return x - 1", True),
        (SatDomain(), SAT, "\n".join(reversed(SAT.split("\n"))) + "  # same", False),
        (SatDomain(), SAT, SAT.replace("exactly_one", "at_most_one"), True),
        (SatDomain(), SAT_CONFIG, "budget: 12\nsolver: maplecm\npreprocess: off\nphase: default", False),
        (SmtDomain(), SMT, SMT.replace("(declare-const y Int)", "(declare-const  y\n  Int) ; y"), False),
        (SmtDomain(), SMT, SMT.replace("> (+ x y) 14", ">= (+ x y) 14"), True),
        (DafnyDomain(), DAFNY, DAFNY.replace("  seven := 7;", "  // seven\n  seven  :=  7 ;"), False),
        (DafnyDomain(), DAFNY, DAFNY.replace("  seven := 7;", "  assert x == x;\n  seven := 7;"), True),
        (MathDomain(), COQ, COQ.replace("intros x h.", "intros x h. (* go *)"), False),
        (MathDomain(), COQ, COQ.replace("x - 1", "x - 2"), True),
    ],
)
def test_changes_compare_normalised_actions(domain: Domain, a: str, b: str, changed: bool) -> None:
    assert domain.action_changed(a, b) is changed
    assert domain.action_changed(b, a) is changed


def test_two_unusable_replies_are_no_change_but_garbage_for_an_action_is() -> None:
    sql = SQLDomain()
    assert sql.action_changed("I cannot help.", "Sorry, I do not know the schema.") is False
    assert sql.action_changed("SELECT 1", "Sorry, I do not know the schema.") is True
    assert sql.action_changed("I cannot help.", "SELECT 1") is True
