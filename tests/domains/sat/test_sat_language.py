"""The SAT constraint language: parsing, grounding semantics, limits and clear errors."""

from __future__ import annotations

import itertools

import pytest
from pysat.solvers import Solver

from cm_gym.domains.sat.encoding import MAX_CLAUSES, CompiledEncoding, Signature, compile_encoding
from cm_gym.domains.sat.errors import EncodingError, EncodingTooLarge
from cm_gym.domains.sat.language import MAX_LINES, parse_encoding

ROW = Signature({"I": (0, 1, 2, 3)}, {"x": ("I",)})
GRAPH = Signature(
    {"V": (0, 1, 2), "C": (0, 1, 2), "E": ((0, 1), (1, 2))},
    {"color": ("V", "C")},
)


def projected_models(ce: CompiledEncoding) -> set[frozenset[tuple[int, ...]]]:
    """All distinct assignments of the array cells admitted by the CNF (blocking-clause loop)."""
    n = ce.table.n_vars
    out: set[frozenset[tuple[int, ...]]] = set()
    with Solver(name="minisat22", bootstrap_with=ce.clauses) as s:
        while s.solve():
            model = s.get_model()
            cells = frozenset(next(iter(ce.table.decode(model).values())))
            out.add(cells)
            s.add_clause([-lit for lit in model[:n]])
    return out


@pytest.mark.parametrize(
    ("line", "count"),
    [
        ("exactly_one x[*]", 4),
        ("at_most_one x[*]", 5),
        ("at_least_one x[*]", 15),
        ("exactly 2 x[*]", 6),
        ("at_most 2 x[*]", 11),
        ("at_least 3 x[*]", 5),
        ("at_most 0 x[*]", 1),
        ("at_least 5 x[*]", 0),
    ],
)
def test_cardinality_heads_have_exactly_the_right_models(line: str, count: int) -> None:
    assert len(projected_models(compile_encoding(line, ROW))) == count


def test_group_variables_where_filters_and_ranges() -> None:
    sig = Signature({"N": (0, 1, 2)}, {"q": ("N", "N")})
    # the main diagonal r == c must hold exactly one queen, nothing else constrained
    ce = compile_encoding(
        "exactly_one q[r][c] for d in 0..0 where r - c == d\nat_most 0 q[r][c] where r != c", sig
    )
    models = projected_models(ce)
    assert models == {frozenset({(i, i)}) for i in range(3)}


def test_pair_binders_and_not_both_give_a_proper_colouring() -> None:
    ce = compile_encoding(
        "exactly_one color[v][*] for v in V\nnot_both color[u][c] color[v][c] for (u, v) in E, c in C", GRAPH
    )
    models = projected_models(ce)
    assert len(models) == 3 * 2 * 2  # a path on 3 vertices with 3 colours
    for cells in models:
        colour = dict(cells)
        assert colour[0] != colour[1] and colour[1] != colour[2]


def test_out_of_range_index_is_false_not_a_crash() -> None:
    ce = compile_encoding("clause x[i] x[i+1] for i in I", ROW)  # x[4] does not exist: false
    assert ce.out_of_range == 1
    models = projected_models(ce)
    assert models and all((3,) in m for m in models)  # the last clause is x[3] or false
    assert projected_models(compile_encoding("clause x[i+1] for i in I", ROW)) == set()


def test_negated_literals_and_implies() -> None:
    ce = compile_encoding("implies x[0] x[1]\nclause -x[1]\nclause x[2] ~x[3]", ROW)
    for cells in projected_models(ce):
        assert (1,) not in cells and (0,) not in cells
        assert (2,) in cells or (3,) not in cells


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("frobnicate x[*]", "unknown constraint"),
        ("exactly_one y[*]", "unknown array"),
        ("exactly_one x[i] for i in W", "unknown set"),
        ("exactly_one color[v][*] for v in E", "2-tuples"),
        ("not_both color[u][*] color[v][c] for (u, v) in E, c in C", "needs every index bound"),
        ("at_most x[*]", "needs a number"),
        ("exactly_one x[i] for i in I where z < 2", "'where' uses 'z'"),
        ("exactly_one x[i][j] for i in I", "takes 1 indices"),
        ("exactly_one x[__import__('os')]", "unexpected character"),
        ("", "no constraint lines"),
        ("clause x[0] x[1", "unexpected end of line"),
    ],
)
def test_malformed_encodings_raise_one_clear_error(text: str, fragment: str) -> None:
    sig = Signature({**ROW.sets, **GRAPH.sets}, {**ROW.arrays, **GRAPH.arrays})
    with pytest.raises(EncodingError, match=fragment.replace("(", r"\(").replace("[", r"\[")):
        compile_encoding(text, sig)


def test_errors_name_the_offending_line() -> None:
    with pytest.raises(EncodingError) as info:
        compile_encoding("exactly_one x[*]\n# comment\n\nat_least_one q[*]", ROW)
    assert info.value.line == 4 and str(info.value).startswith("line 4:")


def test_limits_refuse_runaway_encodings() -> None:
    with pytest.raises(EncodingError, match="more than"):
        parse_encoding("\n".join(["exactly_one x[*]"] * (MAX_LINES + 1)))
    big = Signature({"A": tuple(range(700))}, {"y": ("A", "A")})
    with pytest.raises(EncodingTooLarge):
        compile_encoding("not_both y[i][j] y[j][i] for i in A, j in A", big)
    assert MAX_CLAUSES < 700 * 700


def test_same_text_compiles_to_the_same_cnf() -> None:
    text = "exactly_one color[v][*] for v in V\nnot_both color[u][c] color[v][c] for (u, v) in E, c in C"
    a, b = compile_encoding(text, GRAPH), compile_encoding(text, GRAPH)
    assert a.clauses == b.clauses and a.top == b.top
    assert all(abs(lit) <= a.top for lit in itertools.chain.from_iterable(a.clauses))
