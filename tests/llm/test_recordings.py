"""The reader of the published real LLM outputs (`cm_gym.llm.recordings`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cm_gym.llm.recordings import RecordingsError, load_recordings, spider_key


@pytest.mark.data
def test_reads_every_shared_file(shared_data: Path) -> None:
    spider = load_recordings("spider")
    assert len(spider.keys) == 642 and "gpt-4-zero-shot" in spider.systems and len(spider.systems) == 7
    row = spider.get(spider_key("concert_singer", "How many singers do we have?"), "gpt-4-zero-shot")
    assert row is not None and row.gold and row.verdict in {"correct", "wrong", "error"}
    wrong = [r for r in spider.for_system("gpt-4-zero-shot").values() if r.verdict != "correct"]
    assert len(wrong) == 161  # 149 wrong + 12 error (the data README's table)
    dafny = load_recordings("dafny")
    assert set(dafny.systems) == {"gpt-4o", "gpt-4-turbo", "gpt-3.5-turbo", "claude-3-opus", "codellama-7b"}
    assert len(dafny) == 2206 and all(k.endswith(".dfy") for k in dafny.keys)
    humaneval = load_recordings("humaneval")
    passed = sum(r.verdict == "pass" for r in humaneval.for_system("gpt-4").values())
    assert len(humaneval.keys) == 164 and passed == 140


def _write(root: Path, rel: str, lines: list[str]) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_missing_file_and_unknown_system_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RecordingsError, match="not found"):
        load_recordings("dafny", tmp_path)
    _write(
        tmp_path,
        "humaneval/samples.jsonl",
        [json.dumps({"task_id": "HumanEval/0", "model": "m", "completion": "x"})],
    )
    rec = load_recordings("humaneval", tmp_path)
    assert rec.get("HumanEval/0", "m") is not None and rec.get("HumanEval/0", "other") is None
    with pytest.raises(RecordingsError, match="known: m"):
        rec.for_system("other")
    with pytest.raises(RecordingsError, match="unknown recording kind"):
        load_recordings("bird", tmp_path)


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1, 2]",
        json.dumps({"task": "a.dfy", "model": "m"}),
        json.dumps({"task": 3, "model": "m", "llm_output": "", "success_on_attempt": "1"}),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path: Path, line: str) -> None:
    ok = json.dumps({"task": "a.dfy", "model": "m", "llm_output": "method M() {}", "success_on_attempt": "1"})
    _write(tmp_path, "dafny/outputs.jsonl", [ok, line])
    with pytest.raises(RecordingsError, match=r"outputs\.jsonl: line 2: malformed"):
        load_recordings("dafny", tmp_path)


def test_text_is_kept_verbatim(tmp_path: Path) -> None:
    raw = "Here is the query:\n```sql\nSELECT 1 ;\n```\n"
    row = {
        "db_id": "d",
        "question": "q?",
        "gold": "SELECT 1",
        "predictions": {"s": raw},
        "execution": {"s": "correct"},
    }
    _write(tmp_path, "spider/predictions.jsonl", [json.dumps(row)])
    out = load_recordings("spider", tmp_path).get(spider_key("d", "q?"), "s")
    assert out is not None and out.text == raw and out.gold == "SELECT 1" and out.verdict == "correct"
