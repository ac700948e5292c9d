"""ANN retrieval (faiss, the `ann` extra): filtered search over the eligible rows, exact re-ranking,
recall against brute force, the snapshot sidecar (verified, rebuilt when missing or corrupt), and
the exact fallback without faiss. Small stores (a few thousand records) with the realistic
synthetic situations of `cm_gym.memory.synthetic`."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest

from cm_gym.core.types import Task
from cm_gym.domains.conditions import parse_condition
from cm_gym.memory import ann as ann_mod
from cm_gym.memory.embedding import Embedder
from cm_gym.memory.errors import StoreError
from cm_gym.memory.index import RecordIndex, index_order, source_columns
from cm_gym.memory.record import Record
from cm_gym.memory.retrieval import Retriever
from cm_gym.memory.snapshot import FrozenStore, ann_path, manifest_path
from cm_gym.memory.store import RecordStore
from cm_gym.memory.synthetic import SituationCorpus, query_texts

pytest.importorskip("faiss", reason="the ANN tests need the `ann` extra: pip install 'cm-gym[ann]'")

N = 2000
# eligible shares of the conditions (by facet): from very selective to broad, like real stores
FACETS = (0.02, 0.08, 0.2, 0.3, 0.4)
K = 4


def _conditions(rng: np.random.Generator, n: int) -> list[str]:
    facet = rng.choice(len(FACETS), size=n, p=np.asarray(FACETS) / sum(FACETS))
    variant = rng.integers(0, 3, n)  # several distinct texts per facet: several spans per query
    return [
        f'feature_equals("facet", "{f}")' + (f' AND mentions_none("zz{v}")' if v else "")
        for f, v in zip(facet, variant, strict=True)
    ]


def _records(n: int, seed: int = 0) -> tuple[list[Record], np.ndarray]:
    corpus = SituationCorpus(n, seed=seed)
    rng = np.random.default_rng(seed)
    conds = _conditions(rng, n)
    u = np.where(rng.random(n) < 0.3, rng.uniform(-1, 1, n), 0.0)
    recs = [
        replace(
            Record.create(
                domain="memtoy",
                source_task_id=f"task-{int(s)}",
                env_id="db",
                situation=corpus.text(i),
                a_minus=f"a {i}",
                a_plus=f"b {i}",
                evidence={},
                condition=conds[i],
                contrast_key="k",
                delta=1.0,
                created_order=i,
            ),
            u=float(u[i]),
        )
        for i, s in enumerate(rng.integers(0, n // 3, n))
    ]
    return recs, corpus.embeddings()


def _tasks(n: int) -> list[Task]:
    texts = query_texts(n, seed=7)
    return [
        Task(
            task_id=f"task-{i}",  # task-i has records of its own in the store: they must not return
            domain="memtoy",
            prompt=t,
            env_id="db",
            reference="",
            features={"facet": str(i % len(FACETS))},
        )
        for i, t in enumerate(texts)
    ]


@dataclass
class Source:
    """An in-memory RecordSource that offers an ANN index."""

    records: list[Record]
    embeddings: np.ndarray
    domain: str = "memtoy"
    embedder_id: str = field(default_factory=lambda: Embedder().embedder_id)
    revision: int = 0
    layout_revision: int = 0
    ann_index: ann_mod.AnnIndex | None = None


@pytest.fixture(scope="module")
def source() -> Source:
    recs, emb = _records(N)
    src = Source(recs, emb)
    src.ann_index = ann_mod.build_for_source(src)
    return src


def _ids(got: list) -> list[str]:
    return [g.record.record_id for g in got]


def test_bitmap_helpers_match_numpy() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 7, 8, 9, 100, 1000):
        want = np.zeros(n, dtype=bool)
        spans = []
        for _ in range(6):
            s = int(rng.integers(0, n))
            e = int(rng.integers(s, n + 1))
            spans.append((s, e))
            want[s:e] = True
        bits = ann_mod.spans_bitmap(n, spans)
        assert np.array_equal(bits, np.packbits(want, bitorder="little"))
        off = rng.integers(0, n, 5)
        ann_mod.clear_rows(bits, off)
        want[off] = False
        assert np.array_equal(bits, np.packbits(want, bitorder="little"))


def test_composed_synthetic_embeddings_equal_the_embedder() -> None:
    corpus = SituationCorpus(400, seed=1)
    assert corpus.composition_error(60) < 1e-5
    assert len({corpus.text(i) for i in range(400)}) > 300  # varied, with some near-duplicates


@pytest.mark.parametrize("use_conditions", [True, False])
def test_ann_retrieval_is_eligible_exactly_scored_and_recalls_brute_force(
    source: Source, use_conditions: bool
) -> None:
    exact = Retriever(source, None, k=K, use_conditions=use_conditions, exact_max_rows=10**9)
    approx = Retriever(source, None, k=K, use_conditions=use_conditions, exact_max_rows=0)
    assert approx.ann is source.ann_index and exact.ann is source.ann_index
    emb = {r.record_id: source.embeddings[i] for i, r in enumerate(source.records)}
    hits = 0
    tasks = _tasks(40)
    embedder = Embedder()
    for t in tasks:
        q = embedder.embed_one(t.prompt)
        want, got = exact.retrieve(t, query=q), approx.retrieve(t, query=q)
        assert len(got) == len(want) == K
        kth = want[-1].rank_score
        hits += sum(g.rank_score >= kth - 1e-6 for g in got)
        for g in got:  # eligible first: never this task's own records, condition holds
            assert g.record.source_task_id != t.task_id
            if use_conditions:
                assert parse_condition(g.record.condition).holds(t)
            cos = float(emb[g.record.record_id] @ q)  # re-ranked exactly
            assert g.relevance == pytest.approx(cos, abs=1e-5)
            assert g.rank_score == pytest.approx(cos + 0.2 * g.record.u, abs=1e-5)
        assert [g.rank_score for g in got] == sorted((g.rank_score for g in got), reverse=True)
    assert hits / (K * len(tasks)) >= 0.95


def test_below_the_exact_threshold_results_are_the_exact_ones(source: Source) -> None:
    exact = Retriever(source, None, k=3, exact_max_rows=10**9)
    default = Retriever(source, None, k=3)  # N rows < EXACT_MAX_ROWS: never searches the index
    assert N < ann_mod.EXACT_MAX_ROWS
    for t in _tasks(15):
        assert _ids(default.retrieve(t, t.prompt)) == _ids(exact.retrieve(t, t.prompt))


def test_an_index_built_for_other_records_is_refused(
    source: Source, caplog: pytest.LogCaptureFixture
) -> None:
    shifted = [replace(r, u=0.5) for r in source.records]  # same records, other u: other ranking
    other = Source(shifted, source.embeddings, ann_index=source.ann_index)
    with caplog.at_level(logging.WARNING, logger="cm_gym.memory.retrieval"):
        ret = Retriever(other, None, exact_max_rows=0)
        assert ret.ann is None
    assert "built for other records" in caplog.text
    t = _tasks(1)[0]
    assert _ids(ret.retrieve(t, t.prompt)) == _ids(Retriever(other, None).retrieve(t, t.prompt))


def test_the_index_survives_pickling(source: Source) -> None:
    import pickle

    copy = pickle.loads(pickle.dumps(source.ann_index))
    assert copy.digest == source.ann_index.digest and copy.n == source.ann_index.n
    q = source.embeddings[7]
    assert np.array_equal(copy.search(q, 0.2, 16), source.ann_index.search(q, 0.2, 16))


def test_index_rows_follow_the_record_index_order(source: Source) -> None:
    idx = RecordIndex.build(source, lambda text: parse_condition(text))
    assert np.array_equal(idx.rows, index_order(source_columns(source)))
    assert idx.digest() == source.ann_index.digest


# -- snapshots --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A real store of 1,200 records frozen with an ANN sidecar (built once for the module)."""
    folder = tmp_path_factory.mktemp("ann_snapshot")
    recs, emb = _records(1200, seed=2)
    with RecordStore(folder / "work.sqlite", domain="memtoy", benchmark="MEMTOY") as store:
        for r, e in zip(recs, emb, strict=True):
            store.add(replace(r, u=0.0), embedding=e)
        store.freeze(folder / "snap.sqlite", ann=True)
    yield folder / "snap.sqlite"


def _copy(snapshot: Path, to: Path) -> Path:
    for p in (snapshot, manifest_path(snapshot), ann_path(snapshot)):
        shutil.copy(p, to / p.name)
    return to / snapshot.name


def test_copy_snapshot_keeps_the_sidecar_under_the_copys_name(frozen: Path, tmp_path: Path) -> None:
    """`copy_snapshot` (how a run takes the shared default store, issue 36): the copy's manifest
    names its own sidecar, resealed, so the copy opens with its index and no rebuild."""
    from cm_gym.memory.snapshot import copy_snapshot

    copy = copy_snapshot(frozen, tmp_path / "run" / "snapshot.sqlite")
    entry = json.loads(manifest_path(copy.path).read_text())["ann"]
    assert entry["file"] == "snapshot.sqlite.ann" and ann_path(copy.path).is_file()
    assert copy.ann_problem == "" and copy.ann_index is not None and len(copy) == 1200
    assert copy_snapshot(frozen, copy.path).manifest == copy.manifest  # replaces, same content


def test_freeze_writes_a_verified_sidecar_that_retrieval_uses(frozen: Path) -> None:
    manifest = json.loads(manifest_path(frozen).read_text())
    entry = manifest["ann"]
    side = ann_path(frozen)
    assert entry["file"] == side.name and entry["bytes"] == side.stat().st_size
    assert entry["records"] == 1200 and entry["params"]["kind"] == ann_mod.INDEX_KIND
    snap = FrozenStore.open(frozen)
    ret = Retriever(snap, None, k=3, exact_max_rows=0)
    assert ret.ann is snap.ann_index and ret.ann.digest == entry["digest"]
    exact = Retriever(snap, None, k=3, exact_max_rows=10**9)
    hits = 0
    for t in _tasks(30):
        got, want = ret.retrieve(t, t.prompt), exact.retrieve(t, t.prompt)
        hits += sum(g.rank_score >= want[-1].rank_score - 1e-6 for g in got)
    assert hits / 90 >= 0.95


def test_small_snapshots_get_no_index(store: RecordStore, make_record, tmp_path: Path) -> None:
    for _ in range(5):
        store.add(make_record())
    snap = store.freeze(tmp_path / "small.sqlite")
    assert "ann" not in snap.manifest and not ann_path(tmp_path / "small.sqlite").exists()
    assert snap.ann_index is None and Retriever(snap, None).ann is None


@pytest.mark.parametrize("damage", ["missing", "modified", "unreadable"])
def test_a_missing_or_corrupt_sidecar_is_rebuilt_with_one_warning(
    frozen: Path, tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = _copy(frozen, tmp_path)
    side = ann_path(path)
    if damage == "missing":
        side.unlink()
    elif damage == "modified":
        data = bytearray(side.read_bytes())
        data[len(data) // 2] ^= 0xFF
        side.write_bytes(bytes(data))
    else:  # garbage whose hash the manifest was edited (and resealed) to match: not an index
        side.write_bytes(b"not a faiss index")
        m = json.loads(manifest_path(path).read_text())
        from cm_gym.memory.manifest import seal
        from cm_gym.memory.snapshot import file_sha256

        m["ann"].update(sha256=file_sha256(side), bytes=side.stat().st_size)
        manifest_path(path).write_text(json.dumps(seal(m)))
    with caplog.at_level(logging.WARNING, logger="cm_gym.memory.snapshot"):
        snap = FrozenStore.open(path)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "rebuilding the ANN index" in warnings[0].getMessage()
    assert {"missing": "is missing", "modified": "does not match", "unreadable": "unreadable"}[
        damage
    ] in warnings[0].getMessage()
    assert snap.ann_problem
    if damage == "missing":  # the rebuild (the same for every damage) runs once, at first use
        ret = Retriever(snap, None, k=3, exact_max_rows=0)
        assert ret.ann is not None and ret.ann.digest == snap.manifest["ann"]["digest"]
        t = _tasks(1)[0]
        assert len(ret.retrieve(t, t.prompt)) == 3
        assert not side.exists()  # rebuilt in memory only: the snapshot folder is not written


def test_without_faiss_snapshots_scan_exactly_and_say_so(
    frozen: Path, store: RecordStore, make_record, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    monkeypatch.setattr(ann_mod, "_installed", False)
    monkeypatch.setattr(ann_mod, "ANN_MIN_RECORDS", 3)
    for _ in range(4):
        store.add(make_record())
    with caplog.at_level(logging.INFO):
        snap = store.freeze(tmp_path / "s.sqlite")
    assert "ann" not in snap.manifest and "faiss-cpu is not installed" in caplog.text
    with pytest.raises(ann_mod.AnnUnavailableError, match="pip install"):
        store.freeze(tmp_path / "t.sqlite", ann=True)
    assert isinstance(ann_mod.AnnUnavailableError("x"), StoreError)
    caplog.clear()
    path = _copy(frozen, tmp_path)
    with caplog.at_level(logging.INFO):
        snap = FrozenStore.open(path)
        ret = Retriever(snap, None, k=3, exact_max_rows=0)
        assert ret.ann is None
        t = _tasks(1)[0]
        got = ret.retrieve(t, t.prompt)
    assert "has an ANN index but faiss-cpu is not installed" in caplog.text
    assert "scans all 1200 records exactly" in caplog.text
    monkeypatch.setattr(ann_mod, "_installed", True)
    assert _ids(got) == _ids(
        Retriever(FrozenStore.open(path), None, k=3, exact_max_rows=10**9).retrieve(t, t.prompt)
    )


def test_memory_commands_report_the_index(
    frozen: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from cm_gym.cli import main

    assert main(["memory", "verify", str(frozen)]) == 0
    assert "ANN index: sha256 matches manifest" in capsys.readouterr().out
    assert main(["memory", "stats", str(frozen)]) == 0
    assert ann_mod.INDEX_KIND in capsys.readouterr().out
    path = _copy(frozen, tmp_path)
    ann_path(path).write_bytes(ann_path(path).read_bytes()[:-10])  # truncated
    assert main(["memory", "verify", str(path)]) == 1
    assert "does not match the manifest" in capsys.readouterr().out
    out = tmp_path / "plain.sqlite"
    assert main(["memory", "freeze", str(frozen.with_name("work.sqlite")), str(out), "--ann", "off"]) == 0
    assert not ann_path(out).exists() and "ann" not in json.loads(manifest_path(out).read_text())


# -- the sealed manifest covers every parameter of the sidecar (issue 27) --------------------------
_EDITS = {
    "nlist_zero": ("params", "nlist", 0),
    "nlist_huge": ("params", "nlist", 10**9),
    "nlist_text": ("params", "nlist", "32"),
    "nlist_float": ("params", "nlist", 32.5),
    "seed_negative": ("params", "seed", -1),
    "seed_huge": ("params", "seed", 2**40),
    "seed_null": ("params", "seed", None),
    "kind": ("params", "kind", "HNSW/1"),
    "extra_param": ("params", "metric", "L2"),
    "dim": ("", "dim", 7),
    "records": ("", "records", 5),
    "file": ("", "file", "../elsewhere.ann"),
    "digest": ("", "digest", ["not", "a", "string"]),
}


@pytest.mark.parametrize("name", sorted(_EDITS))
def test_an_edited_sidecar_parameter_is_one_line_never_a_faiss_error(
    frozen: Path, tmp_path: Path, name: str, capsys: pytest.CaptureFixture
) -> None:
    from cm_gym.cli import main
    from cm_gym.memory.manifest import seal

    where, key, value = _EDITS[name]
    path = _copy(frozen, tmp_path)
    ann_path(path).unlink()  # the index must be rebuilt from the manifest's parameters
    m = json.loads(manifest_path(path).read_text())
    (m["ann"][where] if where else m["ann"])[key] = value
    manifest_path(path).write_text(json.dumps(m))  # edited by hand: the seal no longer matches
    with pytest.raises(StoreError, match="was modified"):
        FrozenStore.open(path)
    manifest_path(path).write_text(json.dumps(seal(m)))  # resealed: every field is checked anyway
    with pytest.raises(StoreError, match="ANN entry"):
        FrozenStore.open(path)
    assert main(["memory", "verify", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cm-gym: error:") and "\n" not in err and "ANN entry" in err


def test_a_failing_rebuild_is_one_warning_and_retrieval_scans_exactly(
    frozen: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = _copy(frozen, tmp_path)
    os.unlink(ann_path(path))
    os.mkfifo(ann_path(path))  # not a file: never opened, treated as missing
    snap = FrozenStore.open(path)
    assert "is missing" in snap.ann_problem

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("Error in faiss::Clustering: nx >= k")

    monkeypatch.setattr(ann_mod, "build_for_source", broken)
    with caplog.at_level(logging.WARNING, logger="cm_gym.memory.snapshot"):
        ret = Retriever(snap, None, k=3, exact_max_rows=0)
        assert ret.ann is None
        t = _tasks(1)[0]
        assert len(ret.retrieve(t, t.prompt)) == 3
    assert "could not be rebuilt" in caplog.text and "rebuilding it failed" in snap.ann_problem
