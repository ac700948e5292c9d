"""Issue 33, item 2: one bounded JSON reader for every file and option cm_gym reads. The probes of
this round (a 3 GB sparse environment.json, one nested 200,000 deep, a predictions line nested
200,000 deep, ``--evaluator-option step_budget=[[…]]`` 30,000 deep, ``env change --out`` a
regular file) are each one clear `CmGymError`; and no module but the bounded reader calls
``json.load``/``json.loads`` outside a reviewed allow-list."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from cm_gym.core import boundedjson
from cm_gym.core.boundedjson import BoundedJSONError
from cm_gym.core.types import CmGymError

PACKAGE = Path(boundedjson.__file__).resolve().parents[1]
DEEP = "[" * 200_000 + "]" * 200_000

#: module → (json.load/loads calls allowed there, why). Everything else goes through boundedjson.
ALLOWED: dict[str, tuple[int, str]] = {
    "core/boundedjson.py": (2, "the bounded reader itself (after its caps)"),
    "llm/profiles.py": (1, "simulator profiles shipped inside the package"),
    "domains/math/proofs.py": (1, "the found-proof table shipped inside the package"),
    "llm/cache.py": (
        3,
        "rows cm_gym wrote into its own cache database (imports pass cache_io's bounded reader)",
    ),
    "llm/cache_io.py": (6, "values read back from cm_gym's own cache database while exporting / merging"),
    "studies/analysis/calibrate_cache.py": (1, "values of cm_gym's own response cache"),
    "evaluators/verdicts.py": (1, "rows of cm_gym's own verdict cache"),
    "evaluators/_program.py": (1, "the worker's config, written by its parent process a moment before"),
    "domains/calibration.py": (2, "cm_gym's own calibration cache (an unusable one is re-probed)"),
    "domains/humaneval/loader.py": (1, "cm_gym's own cache file of generated tasks"),
    "domains/humaneval/synth.py": (1, "the argument list of a condition cm_gym generated"),
    "domains/sat/evaluator.py": (1, "family parameters serialised by cm_gym itself"),
    "domains/environment.py": (1, "a json.dumps round trip of a Task in memory"),
    "domains/sql/loader.py": (
        1,
        "Spider's JSON files; cm_gym/domains/sql is edited on another branch (to swap)",
    ),
    "domains/sql/generated.py": (
        1,
        "the generated-SQL cache; cm_gym/domains/sql is edited on another branch",
    ),
    "domains/sql/conditions.py": (1, "the argument list of a condition matched by the grammar"),
    "studies/experiments/staleness_measure.py": (1, "a results file this study wrote"),
    "studies/experiments/units.py": (1, "a unit's state file the runner wrote"),
    "studies/experiments/unit.py": (1, "a unit's result.json the runner wrote"),
    "backends/ray/experiments.py": (1, "a unit's result.json the runner wrote"),
}


def _json_calls(path: Path) -> list[int]:
    """Line numbers of json.load / json.loads calls (also ``from json import loads``) in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases = {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "json"
        for a in node.names
        if a.name in ("load", "loads")
    }
    modules = {"json"} | {
        a.asname for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names
        if a.name == "json" and a.asname
    }  # fmt: skip
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in ("load", "loads") and isinstance(f.value, ast.Name):
            if f.value.id in modules:
                lines.append(node.lineno)
        elif isinstance(f, ast.Name) and f.id in aliases:
            lines.append(node.lineno)
    return lines


def test_no_json_load_outside_the_bounded_reader() -> None:
    found = {str(p.relative_to(PACKAGE)): _json_calls(p) for p in sorted(PACKAGE.rglob("*.py"))}
    found = {k: v for k, v in found.items() if v}
    unexpected = {k: v for k, v in found.items() if k not in ALLOWED or len(v) > ALLOWED[k][0]}
    assert not unexpected, f"use cm_gym.core.boundedjson (or justify in ALLOWED): {unexpected}"
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"ALLOWED lists modules without json.load(s) any more: {stale}"


def test_the_walker_sees_every_spelling(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        "import json\nimport json as j\nfrom json import loads as L\njson.loads('1')\nj.load(f)\nL('2')\n"
    )
    assert _json_calls(src) == [4, 5, 6]


def test_caps_and_types() -> None:
    with pytest.raises(BoundedJSONError, match="nested deeper than 64"):
        boundedjson.loads(DEEP)
    with pytest.raises(BoundedJSONError, match="larger than 10 bytes"):
        boundedjson.loads("[" + "1," * 20 + "1]", max_bytes=10)
    with pytest.raises(BoundedJSONError, match="is an array, not an object"):
        boundedjson.loads("[1]", expect=dict)
    with pytest.raises(BoundedJSONError, match="not UTF-8"):
        boundedjson.loads(b"\xff\xfe")
    assert boundedjson.loads('{"a": "[[[["}', max_depth=1, expect=dict) == {"a": "[[[["}
    with pytest.raises(BoundedJSONError, match="line 2"):
        list(boundedjson.iter_lines('{"a": 1}\n[1]\n'))


@pytest.mark.parametrize("as_bytes", [False, True])
@pytest.mark.parametrize("max_depth", [1, 3, 8])
def test_the_depth_cap_is_exact_whether_or_not_counting_brackets_settles_it(
    as_bytes: bool, max_depth: int
) -> None:
    """`loads` skips the depth scan when the text opens no more brackets than the cap; with many
    brackets inside strings it scans: either way exactly depth <= cap is accepted."""
    for depth in (max_depth, max_depth + 1):
        nested = "[" * depth + "1" + "]" * depth
        for text in (nested, '{"s": "' + "[{" * 50 + '", "v": ' + nested[1:-1].join("[]") + "}"):
            data = text.encode() if as_bytes else text
            if depth + (text[0] == "{") <= max_depth:
                assert boundedjson.loads(data, max_depth=max_depth) == json.loads(text)
            else:
                with pytest.raises(BoundedJSONError, match="nested deeper"):
                    boundedjson.loads(data, max_depth=max_depth)


def test_load_file_refuses_fifos_folders_and_oversized_sparse_files(tmp_path: Path) -> None:
    sparse = tmp_path / "environment.json"
    with open(sparse, "wb") as fh:
        fh.truncate(3 * 1024**3)  # 3 GB, no blocks: a reader must not try to hold it
    with pytest.raises(BoundedJSONError, match="exceed the limit"):
        boundedjson.load_file(sparse)
    with pytest.raises(BoundedJSONError):
        boundedjson.load_file(tmp_path)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(BoundedJSONError):
        boundedjson.load_file(fifo)  # refused without blocking on the FIFO
    with pytest.raises(BoundedJSONError, match="cannot read|not found|No such"):
        boundedjson.load_file(tmp_path / "missing.json")


def test_option_values_are_bounded() -> None:
    assert boundedjson.loads_option("2000") == 2000 and boundedjson.loads_option("none") == "none"
    with pytest.raises(BoundedJSONError, match="nested deeper than 4"):
        boundedjson.loads_option("[" * 1000 + "]" * 1000)
    with pytest.raises(BoundedJSONError, match="longer than"):
        boundedjson.loads_option("1" * 100_000)


# -- the readers added last wave ------------------------------------------------------------------


def test_predictions_line_nested_200000_deep_is_a_recordings_error(tmp_path: Path) -> None:
    from cm_gym.llm.recordings import RecordingsError, load_recordings

    path = tmp_path / "spider" / "predictions.jsonl"
    path.parent.mkdir(parents=True)
    ok = {"db_id": "d", "question": "q", "gold": "SELECT 1", "predictions": {"s": "SELECT 1"}}
    path.write_text(json.dumps(ok) + "\n" + '{"db_id": ' + DEEP + "}\n", encoding="utf-8")
    with pytest.raises(RecordingsError, match=r"line 2: malformed row \(the row is nested deeper"):
        load_recordings("spider", tmp_path)


@pytest.mark.parametrize("shape", ["deep", "sparse", "array", "fifo"])
def test_reverify_env_reader_refuses_hostile_environment_json(tmp_path: Path, shape: str) -> None:
    from cm_gym.domains.environment import ENVIRONMENT_FILE, EnvironmentChangeError, load_environment

    path = tmp_path / ENVIRONMENT_FILE
    if shape == "deep":
        path.write_text('{"format": ' + DEEP + "}", encoding="utf-8")
    elif shape == "sparse":
        with open(path, "wb") as fh:
            fh.truncate(3 * 1024**3)
    elif shape == "array":
        path.write_text("[]", encoding="utf-8")
    else:
        os.mkfifo(path)
    with pytest.raises(EnvironmentChangeError, match="not a readable changed environment|not a changed"):
        load_environment(tmp_path)


def test_memory_reverify_command_with_deep_environment_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cm_gym.cli import main

    env = tmp_path / "env"
    env.mkdir()
    (env / "environment.json").write_text('{"format": ' + DEEP + "}", encoding="utf-8")
    from tests.envs.toy_env import build_toy_store

    store = build_toy_store(tmp_path / "store.sqlite")
    rc = main(["memory", "reverify", str(store), "--env", str(env), "--out", str(tmp_path / "new.sqlite")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("cm-gym: error:") and "Traceback" not in err, err
    assert "environment.json" in err and "nested deeper than" in err


@pytest.mark.parametrize("under", [False, True])
def test_env_change_out_a_regular_file_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], under: bool
) -> None:
    from cm_gym.cli import main

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = blocker / "sub" if under else blocker
    rc = main(["env", "change", "--benchmark", "SAT", "--family", "x", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "not a folder" in err and "NotADirectoryError" not in err, err
    assert blocker.read_text() == "not a folder"


def test_evaluator_option_nested_30000_deep_is_one_error() -> None:
    from cm_gym.cli.experiment import parse_evaluator_options

    for depth in (30_000, 1000):
        with pytest.raises(CmGymError, match="longer than|nested deeper"):
            parse_evaluator_options(["step_budget=" + "[" * depth + "]" * depth], ["SQL"])


def test_server_request_nested_deep_is_a_bad_request() -> None:
    import asyncio

    from cm_gym.llm._http import HTTPError
    from cm_gym.llm.server import LLMServer

    server = LLMServer.__new__(LLMServer)
    with pytest.raises(HTTPError, match="not valid JSON"):
        asyncio.run(server._chat(('{"messages": ' + "[" * 50_000 + "]" * 50_000 + "}").encode()))
