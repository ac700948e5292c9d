"""Synthetic situation corpora at scale, for benchmarks and tests of retrieval on 10^4–10^7 records.

Situations are rendered from templates modelled on the domains' DISTIL_RECORD outputs (SQL
threshold, DISTINCT, ordering, aggregation, NULL, LIMIT and join situations; SAT and SMT encoding
and configuration changes; code repairs), with slot values drawn from Zipf-skewed vocabularies
(identifiers, tables, numbers, wording phrases), so that their 512-dim char n-gram vectors have the
clusters and near-ties of a real store rather than the structure of i.i.d. noise. Queries are
task-like texts (a question plus a draft) over the same vocabularies.

sklearn's char_wb analyser is pure Python (~1k situation texts/s here), so millions of texts
would take hours to embed one by one. The vectors are *composed* instead: with
``analyzer="char_wb"`` every n-gram lies inside one whitespace token, so the raw count vector of a
text is the sum of the raw count vectors of its parts, each hashed once by the same
`HashingVectorizer`; the sum is then L2-normalised like `Embedder.embed`. `composition_error`
measures the difference to `Embedder.embed` on rendered texts (float rounding only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from sklearn.feature_extraction.text import HashingVectorizer

from cm_gym.memory.embedding import Embedder

_WORD_TEXT = (
    "name age salary city country price order customer product employee department student course "
    "grade score year month date time amount total count rating level status type category code "
    "title author book genre album artist song track film movie director actor team player match "
    "game season stadium club coach school teacher class room building floor address street zip "
    "phone email account bank loan payment invoice item store shop supplier warehouse stock unit "
    "weight height width length distance speed flight airport airline route ship port voyage "
    "hospital doctor patient visit treatment drug dose ward nurse shift hotel guest booking review "
    "station train line stop trip driver car model engine fuel owner pet breed vet event venue ticket"
)
_WORDS = tuple(_WORD_TEXT.split())
_SUFFIXES = ("", "s", "_id", "_name", "_count", "_date", "_code", "_total", "_type", "_level")
_PHRASES = (
    "at least", "no fewer than", "no less than", "or more", "or older", "or later", "more than",
    "greater than", "over", "above", "strictly", "older than", "after", "exceeding", "at most",
    "no more than", "or less", "or fewer", "up to", "less than", "fewer than", "under", "below",
    "before", "distinct", "different", "unique", "without duplicates", "each only once",
    "highest", "largest", "lowest", "smallest", "combined", "average", "number of", "missing",
    "not recorded", "known", "other than", "except",
)  # fmt: skip
_AGGS = ("SUM", "AVG", "COUNT", "MAX", "MIN")
_OPS = ("<", "<=", ">", ">=", "=", "!=")
_FAMILIES = (
    "coloring", "pigeonhole", "scheduling", "partial_queens", "bounds", "integrality", "bitvector",
    "arrays", "strings", "linear", "cardinality", "parity",
)  # fmt: skip
_CHANGES = (
    "at_most_one -> exactly_one", "at_most_one -> at_least_one", "sort Int -> Real",
    "sort Real -> Int", "bvslt -> bvult", "bvule -> bvsle", "drop symmetry breaking",
    "add at_least_one", "ladder -> pairwise", "seq -> totalizer", "budget 1000 -> 5000",
    "phase saving on", "restarts luby -> geometric", "add: (assert (>= x 0))",
)  # fmt: skip
_LOGICS = ("QF_LIA", "QF_LRA", "QF_BV", "QF_AUFLIA", "QF_S", "QF_NIA")

#: (weight, template) — situations like the domains' distilled records.
SITUATION_TEMPLATES: tuple[tuple[float, str], ...] = (
    (6, "A threshold predicate `{col} {op} {n}` may omit its boundary value when the question asks for an inclusive bound ('{phrase}'); `{col} {op2} {n}` includes it."),
    (6, "A threshold predicate `{col} {op} {n}` wrongly includes its boundary value when the question asks for a strict bound ('{phrase}'); `{col} {op2} {n}` excludes it."),
    (3, "A query over `{col}` returns repeated values when the question asks for distinct ones ('{phrase}'); add DISTINCT."),
    (2, "DISTINCT over `{col}` drops repeats that the question wants (one row per {word}); remove DISTINCT."),
    (3, "The result is sorted {dir} by `{col}` but the question asks for {dir2} order; sort {dir3}."),
    (2, "A top-k query returns LIMIT {k} rows where the question asks for {k2}; adjust LIMIT."),
    (4, "The query aggregates `{col}` with {agg} but the question asks for the {phrase}; use {agg2}."),
    (2, "A test IS NOT NULL on `{col}` selects the wrong rows when the question asks for missing values; use IS NULL."),
    (3, "The join of {table} uses `{col}` as its key, which links the wrong rows; the question's relation is through `{col2}`."),
    (2, "An equality test `{col} = {n}` should exclude the value when the question asks for rows other than it; use `{col} != {n}`."),
    (2, "On database {db}, the query `SELECT {col} FROM {table} WHERE {col2} {op} {n}` was corrected to `SELECT {col} FROM {table} WHERE {col2} {op2} {n}`."),
    (2, "SAT encoding of a {fam} problem: {change}"),
    (1, "SAT solver configuration for {fam} ({k} vars, ratio {ratio}): {change}"),
    (2, "SMT-LIB encoding of a {fam} problem: {change}"),
    (1, "z3 configuration for a {logic} benchmark: {change}"),
    (2, "Repairing `{fn}` (test_{fn}): changing `{col} {op} {n}` to `{col} {op2} {n}` fixed the failing tests."),
    (1, "Verifying {fn}: adding the invariant `0 <= {col} <= {n}` made more of it verify."),
)  # fmt: skip

#: (weight, template) — what a later task's question and draft look like.
QUERY_TEMPLATES: tuple[tuple[float, str], ...] = (
    (6, "List the {col} of every {word} whose {col2} is {phrase} {n}.\nSELECT {col} FROM {table} WHERE {col2} {op} {n}"),
    (3, "Give the {col} of {table} {phrase}.\nSELECT {col} FROM {table}"),
    (3, "Which {word} has the {phrase} {col}? Show its {col2}.\nSELECT {col2} FROM {table} ORDER BY {col} {dir} LIMIT {k}"),
    (3, "What is the {phrase} {col} of {table} in {db}?\nSELECT {agg}({col}) FROM {table}"),
    (2, "Find the {col} of {table} joined with {word} records whose {col2} is not recorded.\nSELECT {col} FROM {table} WHERE {col2} IS NOT NULL"),
    (2, "Encode a {fam} problem with {k} variables as CNF.\n{change}"),
    (2, "Decide a {logic} {fam} instance: {col} + {col2} is {phrase} {n}.\n(assert ({op} (+ {col} {col2}) {n}))"),
    (1, "Fix `{fn}` so that test_{fn} passes: {col} must be {phrase} {n}.\nif {col} {op} {n}:"),
)  # fmt: skip

_SLOT = re.compile(r"\{(\w+)\}")


def _zipf_weights(n: int, s: float = 1.0, offset: float = 3.0) -> np.ndarray:
    w = 1.0 / (np.arange(n) + offset) ** s
    return w / w.sum()


def vocabularies() -> dict[str, tuple[list[str], np.ndarray]]:
    """Slot name -> (values, sampling weights); fixed, so corpora and queries share them."""
    rng = np.random.default_rng(20260824)
    words = list(_WORDS)
    idents = list(dict.fromkeys(w + s for w in words for s in _SUFFIXES))
    pairs = [f"{a}_{b}" for a in words for b in words if a != b]
    idents += [pairs[i] for i in rng.choice(len(pairs), 1500, replace=False)]
    rng.shuffle(idents)
    tables = list(dict.fromkeys(w + s for w in words for s in ("", "s", "_log", "_info", "_history")))
    rng.shuffle(tables)
    fns = [f"{v}_{w}" for v in ("get", "count", "find", "sort", "merge", "is", "max", "sum") for w in words]
    rng.shuffle(fns)
    nums = [str(i) for i in range(1000)]
    v: dict[str, tuple[list[str], np.ndarray]] = {
        "col": (idents, _zipf_weights(len(idents))),
        "table": (tables, _zipf_weights(len(tables))),
        "word": (words, _zipf_weights(len(words), 0.7)),
        "n": (nums, _zipf_weights(len(nums), 0.8, 5.0)),
        "k": (nums[1:60], _zipf_weights(59)),
        "phrase": (list(_PHRASES), _zipf_weights(len(_PHRASES), 0.6)),
        "agg": (list(_AGGS), np.full(len(_AGGS), 1 / len(_AGGS))),
        "op": (list(_OPS), np.full(len(_OPS), 1 / len(_OPS))),
        "dir": (["ASC", "DESC", "ascending", "descending"], np.full(4, 0.25)),
        "fam": (list(_FAMILIES), _zipf_weights(len(_FAMILIES), 0.5)),
        "change": (list(_CHANGES), _zipf_weights(len(_CHANGES), 0.5)),
        "logic": (list(_LOGICS), np.full(len(_LOGICS), 1 / len(_LOGICS))),
        "fn": (fns, _zipf_weights(len(fns))),
        "db": ([f"{w}_{i}" for w in words[:60] for i in range(5)], _zipf_weights(300)),
        "ratio": ([f"{r / 10:.1f}" for r in range(20, 60)], np.full(40, 1 / 40)),
    }
    for alias, base in (
        ("col2", "col"),
        ("op2", "op"),
        ("agg2", "agg"),
        ("dir2", "dir"),
        ("dir3", "dir"),
        ("k2", "k"),
    ):
        v[alias] = v[base]
    return v


@dataclass(frozen=True)
class _Template:
    text: str
    fixed: str  # the whitespace tokens without a slot, joined
    slot_tokens: tuple[tuple[str, str], ...]  # (token pattern with one "{slot}", slot name)
    composable: bool  # no token holds two slots (an n-gram could span both values)


def _compile(text: str) -> _Template:
    fixed, slots, composable = [], [], True
    for token in text.split():
        names = _SLOT.findall(token)
        if not names:
            fixed.append(token)
        else:
            slots.append((token, names[0]))
            composable &= len(names) == 1
    return _Template(text, " ".join(fixed), tuple(slots), composable)


class _Grammar:
    """Templates and vocabularies: draws texts as (template id, slot value indices) and renders them."""

    def __init__(self, templates: tuple[tuple[float, str], ...]) -> None:
        self.vocab = vocabularies()
        self.templates = [_compile(t) for _, t in templates]
        self.weights = np.asarray([w for w, _ in templates], dtype=float)
        self.weights /= self.weights.sum()
        self.slot_names = sorted({s for t in self.templates for _, s in t.slot_tokens})
        self.column = {name: j for j, name in enumerate(self.slot_names)}

    def draw(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Template ids (n,) and slot value indices (n, n_slots) for n texts."""
        tpl = rng.choice(len(self.templates), size=n, p=self.weights).astype(np.uint8)
        vals = np.empty((n, len(self.slot_names)), dtype=np.int16)
        for j, name in enumerate(self.slot_names):
            values, w = self.vocab[name]
            vals[:, j] = rng.choice(len(values), size=n, p=w)
        return tpl, vals

    def render(self, t: int, vals: np.ndarray) -> str:
        fields = {name: self.vocab[name][0][int(vals[j])] for j, name in enumerate(self.slot_names)}
        return self.templates[t].text.format(**fields)


class _Composer:
    """Raw n-gram count vectors of a grammar's pieces, hashed once (the `Embedder`'s hashing)."""

    def __init__(self, grammar: _Grammar) -> None:
        emb = Embedder()
        self.grammar, self.dim, self.embedder_id = grammar, emb.dim, emb.embedder_id
        self._hv = HashingVectorizer(
            analyzer="char_wb", ngram_range=emb.ngram_range, n_features=emb.dim,
            alternate_sign=False, norm=None, lowercase=True, dtype=np.float32,
        )  # fmt: skip
        if not all(t.composable for t in grammar.templates):
            raise ValueError("a composed template may hold at most one slot per whitespace token")
        self.fixed = self._raw([t.fixed for t in grammar.templates])
        self.tables: dict[str, np.ndarray] = {}
        for t in grammar.templates:
            for pattern, slot in t.slot_tokens:
                if pattern not in self.tables:
                    values = grammar.vocab[slot][0]
                    self.tables[pattern] = self._raw([pattern.replace("{" + slot + "}", v) for v in values])

    def _raw(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._hv.transform(texts).toarray(), dtype=np.float32)

    def compose(self, tpl: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """(n, dim) float32 L2-normalised vectors of the texts given by `draw`."""
        out = np.empty((len(tpl), self.dim), dtype=np.float32)
        templates, column = self.grammar.templates, self.grammar.column
        for t in np.unique(tpl):
            rows = np.flatnonzero(tpl == t)
            acc = np.repeat(self.fixed[t][None, :], rows.size, axis=0)
            for pattern, slot in templates[t].slot_tokens:
                acc += self.tables[pattern][vals[rows, column[slot]]]
            out[rows] = acc
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out


class SituationCorpus:
    """`n` synthetic record situations: `text(i)`, `embeddings(lo, hi)` (composed, exact up to
    float rounding), deterministic for a seed. Memory: ~35 bytes per record before embedding."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n = int(n)
        self._grammar = _Grammar(SITUATION_TEMPLATES)
        self._composer = _Composer(self._grammar)
        self.embedder_id, self.dim = self._composer.embedder_id, self._composer.dim
        self.template_ids, self.slot_values = self._grammar.draw(self.n, np.random.default_rng([seed, 1]))

    def text(self, i: int) -> str:
        """The situation text of record `i`."""
        return self._grammar.render(int(self.template_ids[i]), self.slot_values[i])

    def embeddings(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """(hi - lo, dim) float32, L2-normalised, for records [lo, hi)."""
        hi = self.n if hi is None else hi
        return self._composer.compose(self.template_ids[lo:hi], self.slot_values[lo:hi])

    def fill(self, out: np.ndarray, chunk: int = 32768) -> np.ndarray:
        """Write every embedding into `out` (n, dim), chunk by chunk (any float dtype)."""
        for lo in range(0, self.n, chunk):
            hi = min(self.n, lo + chunk)
            out[lo:hi] = self.embeddings(lo, hi)
        return out

    def composition_error(self, sample: int = 200) -> float:
        """max |composed − Embedder.embed(rendered text)| over a sample of records."""
        idx = np.linspace(0, self.n - 1, min(sample, self.n)).astype(int)
        direct = Embedder().embed([self.text(int(i)) for i in idx])
        composed = np.stack([self.embeddings(int(i), int(i) + 1)[0] for i in idx])
        return float(np.abs(direct - composed).max())


def query_texts(n: int, seed: int = 0) -> list[str]:
    """`n` task-like query texts (a question and a draft) over the corpus vocabularies."""
    grammar = _Grammar(QUERY_TEMPLATES)
    tpl, vals = grammar.draw(n, np.random.default_rng([seed, 2]))
    return [grammar.render(int(t), v) for t, v in zip(tpl, vals, strict=True)]
