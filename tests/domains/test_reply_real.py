"""The reply parsers on real model text (`<data root>/llm-outputs`, read with the recordings
reader): published Spider predictions, HumanEval completions and raw DafnyBench model outputs,
as given and wrapped in reply shapes. `bench/bench_reply_parsing.py` prints the full figures."""

from __future__ import annotations

import ast
import gzip
import json
from pathlib import Path

import pytest

from cm_gym.domains.code.domain import CodeDomain
from cm_gym.domains.dafny.domain import DafnyDomain
from cm_gym.domains.dafny.reply import DECLARATIONS
from cm_gym.domains.reply import prose_line, word_at
from cm_gym.domains.sql.domain import SQLDomain
from cm_gym.llm.recordings import load_recordings
from tests.domains.reply_shapes import SHAPES

pytestmark = pytest.mark.data
SHAPES_CHECKED = ("prose-around", "cut-at-max-tokens")  # every shape: bench/bench_reply_parsing.py


def test_every_spider_prediction_is_read_back_whole(shared_data: Path) -> None:
    domain = SQLDomain()
    rows = [r for r in load_recordings("spider", shared_data / "llm-outputs") if r.text.strip()]
    assert len(rows) > 4000
    for r in rows:
        sql = r.text.strip().rstrip(";").strip()
        assert domain.parse_action(r.text) == sql, r.text
        for shape in SHAPES_CHECKED:
            assert domain.parse_action(SHAPES[shape](sql, "sql", "SELECT 1", "query")) == sql, (shape, sql)


def test_every_humaneval_program_is_read_back(shared_data: Path) -> None:
    with gzip.open(shared_data / "humaneval" / "HumanEval.jsonl.gz", "rt", encoding="utf-8") as f:
        prompts = {row["task_id"]: row["prompt"] for row in (json.loads(line) for line in f if line.strip())}
    domain = CodeDomain()
    rows = list(load_recordings("humaneval", shared_data / "llm-outputs"))
    assert len(rows) == 328
    for r in rows:
        program = prompts[r.key] + r.text
        want = ast.dump(ast.parse(program))
        assert ast.dump(ast.parse(domain.parse_action(program))) == want, r.key
        for shape in SHAPES_CHECKED:
            got = domain.parse_action(SHAPES[shape](program.strip(), "python", "pass", "program"))
            assert ast.dump(ast.parse(got)) == want, (r.key, shape)


def test_dafny_outputs_give_programs_without_prose(shared_data: Path) -> None:
    """A found program starts at a declaration or a comment, keeps no prose line outside braces
    and is found again in itself; a reply without one has no declaration line at all (it is the
    model apologising or explaining)."""
    domain = DafnyDomain()
    rows = list(load_recordings("dafny", shared_data / "llm-outputs"))
    found = 0
    for r in rows:
        got = domain.extract_action(r.text)
        if not got.found:
            assert not any(word_at(line.lstrip(), 0) in DECLARATIONS for line in r.text.split("\n")), r.key
            continue
        found += 1
        program = got.action
        first = program.split("\n", 1)[0].lstrip()
        assert first.startswith(("//", "/*")) or word_at(first, 0) in DECLARATIONS, (r.key, first)
        assert not prose_line(program.rsplit("\n", 1)[-1]), r.key
        assert domain.extract_action(program).action == program
        for shape in SHAPES_CHECKED:
            assert domain.parse_action(SHAPES[shape](program, "dafny", "method M() {}", "program")) == program
    assert found >= 0.9 * len(rows)  # the rest: replies that are prose only (checked above)
