"""Fixtures of the memory tests: the toy domain and fake LLM of `memfakes`, and store factories."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from memfakes import FakeLLM, ToyDomain, make_tasks  # noqa: E402

from cm_gym.core.types import Task  # noqa: E402
from cm_gym.memory.record import Record  # noqa: E402
from cm_gym.memory.store import RecordStore  # noqa: E402


@pytest.fixture
def toy() -> ToyDomain:
    return ToyDomain()


@pytest.fixture
def toy_tasks() -> list[Task]:
    return make_tasks(12)


@pytest.fixture
def fake_llm() -> FakeLLM:
    return FakeLLM()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RecordStore]:
    s = RecordStore(tmp_path / "store.sqlite", domain="memtoy", benchmark="MEMTOY")
    yield s
    s.close()


RecordFactory = Callable[..., Record]


@pytest.fixture
def make_record() -> RecordFactory:
    """Build a valid record (content-hash id) with overridable fields."""

    counter = {"n": 0}

    def factory(**kw: object) -> Record:
        counter["n"] += 1
        n = counter["n"]
        fields: dict[str, object] = {
            "domain": "memtoy",
            "source_task_id": f"mt-src-{n}",
            "env_id": "db0",
            "situation": f"A numeric threshold comparison may omit its boundary value ({n}).",
            "a_minus": f"SELECT name FROM people WHERE age > {n}",
            "a_plus": f"SELECT name FROM people WHERE age >= {n}",
            "evidence": {
                "score_minus": 0.0,
                "score_plus": 1.0,
                "feedback_minus": "wrong rows",
                "feedback_plus": "ok",
            },
            "condition": "",
            "contrast_key": "cmp:GT->GTE",
            "delta": 1.0,
            "created_order": n,
        }
        stats = {k: kw.pop(k) for k in ("u", "uses", "helpful", "harmful", "neutral") if k in kw}
        fields.update(kw)
        return replace(Record.create(**fields), **stats)  # type: ignore[arg-type]

    return factory


@pytest.fixture
def memtoy_benchmark(monkeypatch: pytest.MonkeyPatch) -> str:
    """Register the toy domain as benchmark "MEMTOY" for this test only (undone afterwards, and
    without a Gymnasium id, so no other test ever sees it)."""
    from cm_gym.domains import registry

    registry.list_benchmarks()  # load the built-in plugins first
    spec = registry.BenchmarkSpec(
        name="MEMTOY",
        domain=ToyDomain,
        load_tasks=lambda **kw: make_tasks(40),
        description="toy benchmark of the memory tests",
        namespace="memtests",
    )
    monkeypatch.setitem(registry._BENCHMARKS, "MEMTOY", spec)
    monkeypatch.setitem(registry._DOMAIN_FACTORIES, "memtoy", ToyDomain)
    monkeypatch.setitem(registry._DOMAINS, "memtoy", ToyDomain())
    return "MEMTOY"
