"""Database variants (the test-suite idea, issue 32 item 3): the generator keeps schema, keys and
references; the checker refuses accidental repairs and keeps true ones (on real GPT-4 drafts);
admission and the final verdict use it only when asked."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from cm_gym.core.types import Action, AgentState, Task
from cm_gym.domains.sql.evaluator import SQLEvaluator
from cm_gym.domains.sql.instances import InstanceCache, build_variant
from cm_gym.domains.sql.testsuite import tie_breaks
from cm_gym.memory.admission import instance_confirmation


def _dump(path: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(path)
    try:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: sorted(conn.execute(f'SELECT * FROM "{n}"'), key=repr) for n in names}
    finally:
        conn.close()


def _schema(path: Path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name"))
    finally:
        conn.close()


def test_variant_keeps_schema_keys_and_references_and_is_deterministic(tiny_db: Path, tmp_path: Path) -> None:
    before = hashlib.sha256(tiny_db.read_bytes()).hexdigest()
    a = build_variant(tiny_db, tmp_path / "a.sqlite", seed=1)
    b = build_variant(tiny_db, tmp_path / "b.sqlite", seed=1)
    others = [_dump(build_variant(tiny_db, tmp_path / f"s{s}.sqlite", seed=s)) for s in range(2, 8)]
    assert hashlib.sha256(tiny_db.read_bytes()).hexdigest() == before  # the source is never written
    assert _schema(a) == _schema(tiny_db)
    assert _dump(a) == _dump(b)  # deterministic by seed
    assert any(o != _dump(tiny_db) for o in others) and len({repr(o) for o in others}) > 1
    for dump in [_dump(a), *others]:
        ids = [r[0] for r in dump["people"]]
        assert len(ids) == len(set(ids)) and dump["people"]  # primary keys stay unique, tables non-empty
        assert len({r[0] for r in dump["pets"]}) == len(dump["pets"])
        assert {r[1] for r in dump["pets"] if r[1] is not None} <= set(ids)  # every reference resolves
        # NULL only where the original column holds one (people.score, people.boss_id)
        assert all(r[2] is not None and r[3] is not None and r[1] is not None for r in dump["people"])
        assert all(r[2] is not None and r[3] is not None for r in dump["pets"])


def test_instance_cache_builds_once_outside_the_data(tiny_db: Path, tmp_path: Path) -> None:
    cache = InstanceCache(3, seed=0, directory=tmp_path / "cache")
    paths = cache.variants(str(tiny_db))
    assert len(paths) == 3 and all(Path(p).is_file() and str(tmp_path / "cache") in p for p in paths)
    stamps = [Path(p).stat().st_mtime_ns for p in paths]
    again = InstanceCache(3, seed=0, directory=tmp_path / "cache").variants(str(tiny_db))
    assert again == paths and [Path(p).stat().st_mtime_ns for p in again] == stamps  # reused, not rebuilt
    assert not any(p.name.endswith(".tmp") for p in (tmp_path / "cache").rglob("*"))


def test_a_variant_that_cannot_be_built_is_left_out(tiny_db: Path, tmp_path: Path, monkeypatch) -> None:
    import sqlite3 as sq

    from cm_gym.domains.sql import instances

    def broken(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise sq.OperationalError("no such module: fts9")

    monkeypatch.setattr(instances, "build_variant", broken)
    assert InstanceCache(2, directory=tmp_path / "c").variants(str(tiny_db)) == []


def test_tie_breaks_only_for_limit_queries() -> None:
    assert tie_breaks("SELECT name FROM people ORDER BY age") is None
    assert tie_breaks("SELECT name FROM people LIMIT 2") == ("", "")
    asc, desc = tie_breaks("SELECT name, age FROM people ORDER BY age DESC LIMIT 1") or ("", "")
    assert "age DESC, 1" in asc and "2" in asc and "1 DESC, 2 DESC" in desc


def test_a_limit_that_cuts_a_tie_is_not_counted(make_task, tmp_path: Path) -> None:
    from cm_gym.domains.sql.testsuite import boundary_probe

    probe = boundary_probe("SELECT name FROM people ORDER BY age LIMIT 2")
    assert probe == ("SELECT age FROM people ORDER BY age ASC LIMIT 3", 2)
    assert boundary_probe("SELECT DISTINCT name FROM people ORDER BY age LIMIT 2") is None
    # ages 18, 18 tie for the second place on the tiny database itself (its own "variant")
    ev = SQLEvaluator(instances=1, instance_dir=str(tmp_path / "v"))
    assert (
        ev._checker.reference_on(
            str(make_task("x").meta["db_path"]), "SELECT name FROM people ORDER BY age LIMIT 2"
        )
        is None
    )
    assert (
        ev._checker.reference_on(
            str(make_task("x").meta["db_path"]), "SELECT name FROM people ORDER BY age LIMIT 1"
        )
        is not None
    )


def test_lucky_query_refused_on_variants_true_one_kept(make_task, tmp_path: Path) -> None:
    # On the tiny database, "age >= 18" and "age > 17" agree (integers) but "city <> 'Graz'" only
    # by luck of the rows: variants perturb ages and cities within their columns.
    task = make_task("SELECT name FROM people WHERE age >= 18 AND city <> 'Graz'")
    state = AgentState(task)
    ev = SQLEvaluator(instances=6, instance_dir=str(tmp_path / "v"))
    lucky = "SELECT name FROM people WHERE age >= 18 AND age <> 45"
    assert ev.check(state, Action(lucky)).solved  # right on the one instance
    wrong = "SELECT name FROM people WHERE age < 18"
    refused = ev.confirm_contrast(state, wrong, lucky)
    kept = ev.confirm_contrast(state, wrong, "SELECT name FROM people WHERE age > 17 AND NOT city = 'Graz'")
    assert refused is not None and not refused["confirmed"] and refused["instances_wrong"] > 0
    assert kept is not None and kept["confirmed"] and kept["instances_counted"] > 0
    assert SQLEvaluator().confirm_contrast(state, wrong, lucky) is None  # off by default


def test_verdict_on_instances_is_opt_in(make_task, tmp_path: Path) -> None:
    task = make_task("SELECT name FROM people WHERE age >= 18 AND city <> 'Graz'")
    state = AgentState(task)
    lucky = "SELECT name FROM people WHERE age >= 18 AND age <> 45"
    strict = SQLEvaluator(instances=6, instance_dir=str(tmp_path / "v"), verdict_on_instances=True)
    out = strict.check(state, Action(lucky))
    assert not out.solved and out.details["instances_wrong"] > 0 and "variants" in out.feedback
    assert strict.check(state, Action("SELECT name FROM people WHERE age > 17 AND city != 'Graz'")).solved
    assert SQLEvaluator(instances=6, instance_dir=str(tmp_path / "v")).check(state, Action(lucky)).solved
    with pytest.raises(ValueError):
        SQLEvaluator(verdict_on_instances=True)


def test_evaluator_with_variants_pickles(make_task, tmp_path: Path) -> None:
    import pickle

    task = make_task("SELECT name FROM people WHERE age >= 18 AND city <> 'Graz'")
    ev = SQLEvaluator(instances=2, instance_dir=str(tmp_path / "v"), verdict_on_instances=True)
    ev.check(AgentState(task), Action("SELECT name FROM people"))
    copy = pickle.loads(pickle.dumps(ev))
    assert copy._checker is not None and copy._checker.evaluator is copy  # checks run in the copy's sandbox
    assert copy.check(AgentState(task), Action(task.reference)).solved


def test_experiments_take_the_option_by_name() -> None:
    from cm_gym.cli.experiment import parse_evaluator_options

    options = parse_evaluator_options(["instances=10", "verdict_on_instances=true"], ["SQL"])
    assert options == ({"instances": 10, "verdict_on_instances": True}, ())  # none weakens a guard


def test_instance_confirmation_reaches_through_wrappers() -> None:
    class Inner:
        def confirm_contrast(self, state, a_minus, a_plus):  # noqa: ANN001, ANN201
            return {"confirmed": a_plus == "good"}

    class Wrapper:
        def __init__(self, inner) -> None:  # noqa: ANN001
            self.inner = inner

    state = AgentState(Task("t", "sql", "q", "e", "r"))
    assert instance_confirmation(Wrapper(Wrapper(Inner())), state, "a", "good") == {"confirmed": True}
    assert instance_confirmation(Wrapper(Inner()), state, "a", "bad") == {"confirmed": False}
    assert instance_confirmation(Wrapper(object()), state, "a", "bad") is None


def test_generated_databases_get_variants(gen_tasks: list[Task], tmp_path: Path) -> None:
    task = gen_tasks[0]
    ev = SQLEvaluator(instances=2, instance_dir=str(tmp_path / "v"))
    out = ev.confirm_contrast(AgentState(task), "SELECT 1", task.reference)
    assert out is not None and out["confirmed"]  # the reference matches itself wherever it is defined
    assert _schema(Path(ev._checker.cache.variants(task.meta["db_path"])[0])) == _schema(
        Path(task.meta["db_path"])
    )


@pytest.mark.data
def test_real_gpt4_accidental_repairs_refused_true_repair_kept(shared_data: Path, tmp_path: Path) -> None:
    """GPT-4 zero-shot's real drafts: two one-edit 'repairs' that return the gold result on the
    Spider database only by accident are refused; a real missing-DISTINCT repair is kept."""
    from cm_gym.domains.registry import get_benchmark, get_domain
    from cm_gym.domains.sql.edits import raw_edits
    from cm_gym.llm.recordings import load_recordings

    domain = get_domain("sql")
    rows = load_recordings("spider", shared_data / "llm-outputs")
    tasks = {t.prompt: t for t in get_benchmark("SpiderSQL").load()}
    ev = SQLEvaluator(instances=3, instance_dir=str(tmp_path / "v"))
    cases = {
        "What is the mobile phone number of the student named Timmothy Ward ?": ("= 'Timmothy'", False),
        "How many dog pets are raised by female students?": ("<> 'female'", False),
        "Find the first name of students who have cat or dog pet.": ("add DISTINCT", True),
    }
    for prompt, (marker, expected) in cases.items():
        task = tasks[prompt]
        draft = domain.parse_action(rows.get(domain.recording_key(task), "gpt-4-zero-shot").text)
        state = AgentState(task)
        assert not ev.check(state, Action(draft)).solved
        edit = next(e for e in raw_edits(draft, task.features["column_types"]) if marker in e.description)
        assert ev.check(state, Action(edit.text)).solved  # admitted on one instance today
        assert ev.confirm_contrast(state, draft, edit.text)["confirmed"] is expected, prompt
