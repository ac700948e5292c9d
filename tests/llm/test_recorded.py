"""The recorded LLM (`llm="recorded:<system>"`): real published outputs as drafts, verbatim; the
ladder of real systems at later decisions; the simulator (marked) everywhere else; refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cm_gym.agent import BaseAgent, Cost, RecordView
from cm_gym.cli import make_parser
from cm_gym.core.types import AgentState, Attempt, Outcome, Task
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.base import DRAFT_ACTION, GENERATE_LOCAL_ALTERNATIVES, REVISE_WITH_RECORD, Completion
from cm_gym.llm.cached import CachedLLM
from cm_gym.llm.errors import LLMError
from cm_gym.llm.factory import make_llm
from cm_gym.llm.prompts import render
from cm_gym.llm.recorded import RecordedLLM, RecordingMissingError, is_cascade, ladder_of, recorded_task_ids
from cm_gym.llm.recordings import RecordingsError, load_recordings, spider_key
from cm_gym.llm.replies import ReplyCounts, delta, format_counts, reply_counts
from cm_gym.llm.simulated import SimulatedLLM

RAW = "Sure! Here is the query:\n```sql\nSELECT name FROM singer WHERE age > 30 ;\n```\nHope it helps."


def _sql(task_id: str, db: str, question: str, gold: str = "SELECT name FROM singer WHERE age >= 30") -> Task:
    return Task(task_id, "sql", question, db, gold)


def _recordings(root: Path, rows: list[dict]) -> Path:
    path = root / "spider" / "predictions.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return root


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    row = {
        "db_id": "concert",
        "question": "Who is older than 30?",
        "gold": "SELECT name FROM singer WHERE age > 30",
        "predictions": {"gpt-4-zero-shot": RAW, "gpt-4-few-shot": "SELECT name FROM singer WHERE age > 30"},
        "execution": {"gpt-4-zero-shot": "correct", "gpt-4-few-shot": "correct"},
    }
    other = dict(
        row, question="How many singers?", predictions={"gpt-4-few-shot": "SELECT count(*) FROM singer"}
    )
    return _recordings(tmp_path / "llm-outputs", [row, other])


def _failed(task: Task, n: int) -> AgentState:
    state = AgentState(task)
    for _ in range(n):
        state = state.with_attempt(Attempt("SELECT 1", Outcome(0.0, False, feedback="wrong")))
    return state


def test_first_draft_is_the_published_text_verbatim_and_the_domain_parses_it(root: Path) -> None:
    task = _sql("t1", "concert", "Who is older than 30?")
    llm = RecordedLLM("gpt-4-zero-shot", root=root)
    reply = llm.complete(DRAFT_ACTION, {"task": task, "state": AgentState(task)})
    assert reply.text == RAW and reply.provenance == "real:gpt-4-zero-shot"
    domain = get_domain("sql")
    draft = BaseAgent(llm, domain, evaluator=None).draft(AgentState(task), Cost())  # type: ignore[arg-type]
    assert draft == domain.parse_action(RAW) and "SELECT name FROM singer" in draft and "Sure" not in draft


def test_later_drafts_repeat_the_same_system_by_default(root: Path) -> None:
    task = _sql("t1", "concert", "Who is older than 30?")
    llm = RecordedLLM("gpt-4-zero-shot", root=root)
    assert llm.ladder == ("gpt-4-zero-shot",) and not llm.cascade and llm.name == "recorded:gpt-4-zero-shot"
    texts = [llm.complete(DRAFT_ACTION, {"task": task, "state": _failed(task, n)}) for n in range(4)]
    assert [c.provenance for c in texts] == ["real:gpt-4-zero-shot"] * 4  # a frozen model asked again
    assert {c.text for c in texts} == {RAW}


def test_the_cascade_is_named_and_climbs_the_ladder_then_repeats_its_top(root: Path) -> None:
    task = _sql("t1", "concert", "Who is older than 30?")
    for llm in (
        RecordedLLM("gpt-4-zero-shot+cascade", root=root),
        RecordedLLM("gpt-4-zero-shot", root=root, cascade=True),
    ):
        assert llm.cascade and llm.name == "recorded:gpt-4-zero-shot+cascade"
        assert llm.ladder == ("gpt-4-zero-shot", "gpt-4-few-shot")  # the rungs this folder has
        texts = [llm.complete(DRAFT_ACTION, {"task": task, "state": _failed(task, n)}) for n in range(4)]
        assert [c.provenance for c in texts] == ["real:gpt-4-zero-shot"] + ["real:gpt-4-few-shot"] * 3
        assert texts[1].text == "SELECT name FROM singer WHERE age > 30" == texts[3].text
    # string fields only (the HTTP server): the task comes from the lookup, the attempts from the text
    served = make_llm("recorded:gpt-4-zero-shot+cascade", root=root, task_lookup={"t1": task})
    strings = render(DRAFT_ACTION, {"task": task, "state": _failed(task, 1)}).fields
    assert served.complete(DRAFT_ACTION, strings).provenance == "real:gpt-4-few-shot"
    assert ladder_of("gpt-4-din-sql") == ("gpt-4-din-sql", "gpt-4-dail-sql", "gpt-4-dail-sql-sc")
    assert ladder_of("gpt-4o") == ("gpt-4o",) and ladder_of("gpt-4") == ("gpt-4", "gpt-4-reflexion")
    assert is_cascade("recorded:spider/gpt-4-zero-shot+cascade") and not is_cascade(
        "recorded:gpt-4-zero-shot"
    )
    covered = recorded_task_ids("recorded:gpt-4-zero-shot+cascade", [task], root=root)
    assert covered == (["t1"], [])


def test_the_cache_never_serves_cascade_replies_to_the_plain_system(root: Path, tmp_path: Path) -> None:
    task = _sql("t1", "concert", "Who is older than 30?")
    path = tmp_path / "c.sqlite"
    cascade = make_llm("recorded:gpt-4-zero-shot+cascade", root=root, cache_path=path)
    plain = make_llm("recorded:gpt-4-zero-shot", root=root, cache_path=path)
    assert cascade.cache_identity() != plain.cache_identity()  # type: ignore[attr-defined]
    assert cascade.cache_identity()["cascade"] is True  # type: ignore[attr-defined]
    later = {"task": task, "state": _failed(task, 1)}
    assert cascade.complete(DRAFT_ACTION, later).provenance == "real:gpt-4-few-shot"
    replay = plain.complete(DRAFT_ACTION, later)
    assert not replay.cached and replay.text == RAW and replay.provenance == "real:gpt-4-zero-shot"
    cascade.cache.close()  # type: ignore[attr-defined]
    plain.cache.close()  # type: ignore[attr-defined]


def test_other_templates_are_the_simulators_replies_marked_simulated(root: Path) -> None:
    task = _sql("t1", "concert", "Who is older than 30?")
    llm = RecordedLLM("gpt-4-zero-shot", seed=3, root=root)
    record = RecordView("r1", "a record", "SELECT a FROM t WHERE x > 3", "SELECT a FROM t WHERE x >= 3")
    fields = {"task": task, "state": AgentState(task), "draft": "SELECT name FROM singer WHERE age > 30",
              "record": record.rendered, "record_id": "r1", "record_a_minus": record.a_minus,
              "record_a_plus": record.a_plus}  # fmt: skip
    revised = llm.complete(REVISE_WITH_RECORD, fields)
    assert revised.provenance == "simulated"
    assert revised.text == SimulatedLLM(seed=3).complete(REVISE_WITH_RECORD, fields).text
    alts = llm.complete(
        GENERATE_LOCAL_ALTERNATIVES,
        {"task": task, "state": AgentState(task), "action": fields["draft"], "k": 4},
    )
    assert alts.provenance == "simulated"
    llm.complete(DRAFT_ACTION, {"task": task, "state": AgentState(task)})
    counts = reply_counts(llm)
    assert counts is not None and (counts["real"], counts["simulated"]) == (1, 2)
    assert counts["by_template"][REVISE_WITH_RECORD] == {"real": 0, "simulated": 1}
    assert counts["real_by_system"] == {"gpt-4-zero-shot": 1}
    assert "1 real (gpt-4-zero-shot 1); 2 simulated" in format_counts(counts)


def test_reply_counts_subtract_and_ignore_unmarked_replies() -> None:
    counts = ReplyCounts()
    counts.add(DRAFT_ACTION, Completion("x", 1, 1, provenance="real:a"))
    before = counts.as_dict()
    counts.add(DRAFT_ACTION, Completion("y", 1, 1, provenance="real:b"))
    counts.add(REVISE_WITH_RECORD, Completion("z", 1, 1, provenance="simulated"))
    counts.add(REVISE_WITH_RECORD, Completion("z", 1, 1))  # a backend that does not say: not counted
    d = delta(counts.as_dict(), before)
    assert d == {"real": 1, "simulated": 1, "real_by_system": {"b": 1},
                 "by_template": {DRAFT_ACTION: {"real": 1, "simulated": 0}, REVISE_WITH_RECORD: {"real": 0, "simulated": 1}}}  # fmt: skip
    assert reply_counts(SimulatedLLM()) is None


def test_a_task_without_a_recording_is_refused_not_simulated(root: Path) -> None:
    llm = RecordedLLM("gpt-4-zero-shot", root=root)
    unseen = _sql("t9", "concert", "How many singers?")  # only gpt-4-few-shot answered it
    with pytest.raises(
        RecordingMissingError, match=r"recorded:gpt-4-zero-shot has no published output for task 't9'"
    ):
        llm.complete(DRAFT_ACTION, {"task": unseen, "state": AgentState(unseen)})
    foreign = Task("c1", "code", "fix it", "repo", "def f(): pass")  # a domain with no recordings
    with pytest.raises(RecordingMissingError, match="key None"):
        llm.complete(DRAFT_ACTION, {"task": foreign})
    seen = _sql("t1", "concert", "Who is older than 30?")
    assert recorded_task_ids("recorded:gpt-4-zero-shot", [seen, unseen], root=root) == (["t1"], ["t9"])
    assert llm.replies.as_dict()["real"] == 0


def test_missing_outputs_file_and_unknown_system_are_one_clear_error(tmp_path: Path, root: Path) -> None:
    with pytest.raises(RecordingsError, match=r"recorded LLM outputs not found: .*dafny/outputs\.jsonl"):
        make_llm("recorded:gpt-4o", root=tmp_path)
    with pytest.raises(
        RecordingsError, match=r"no recorded outputs of system 'gpt-5'; known: .*spider/gpt-4-few-shot"
    ):
        make_llm("recorded:gpt-5", root=root)
    with pytest.raises(LLMError, match="needs a system name"):
        make_llm("recorded:", root=root)


def test_the_cache_keeps_the_mark_and_counts_replays(root: Path, tmp_path: Path) -> None:
    task = _sql("t1", "concert", "Who is older than 30?")
    llm = make_llm("recorded:gpt-4-zero-shot", root=root, cache_path=tmp_path / "c.sqlite")
    assert isinstance(llm, CachedLLM) and llm.cache_identity()["backend"] == "recorded"
    first = llm.complete(DRAFT_ACTION, {"task": task, "state": AgentState(task)})
    again = llm.complete(DRAFT_ACTION, {"task": task, "state": AgentState(task)})
    assert again.cached and again.text == first.text == RAW and again.provenance == "real:gpt-4-zero-shot"
    assert reply_counts(llm)["real"] == 2  # type: ignore[index]
    llm.cache.close()


def test_cli_parses_recorded_specs_on_every_command() -> None:
    parser = make_parser()
    for argv in (
        ["run", "--benchmark", "SpiderSQL", "--llm", "recorded:gpt-4-zero-shot"],
        ["run", "--benchmark", "SpiderSQL", "--llm", "recorded:gpt-4-zero-shot+cascade"],
        ["diagnose", "--benchmark", "Dafny", "--llm", "recorded:gpt-4o"],
        ["build", "--benchmark", "SQL", "--out", "x.sqlite", "--llm", "recorded:codex-din-sql"],
        ["serve-llm", "--llm", "recorded:gpt-4"],
        ["experiment", "table1", "--llm", "recorded:gpt-4"],
    ):
        assert parser.parse_args(argv).llm == argv[-1]
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--llm", "recorded:"])


@pytest.mark.data
def test_real_outputs_are_drafts_of_spider_dafny_and_humaneval_tasks(shared_data: Path) -> None:
    spider = get_benchmark("SpiderSQL").load()[:5]
    llm = make_llm("recorded:codex-few-shot")
    rows = load_recordings("spider")
    for task in spider:
        text = llm.complete(DRAFT_ACTION, {"task": task, "state": AgentState(task)}).text
        assert text == rows.get(spider_key(task.env_id, task.prompt), "codex-few-shot").text  # type: ignore[union-attr]
    dafny = get_benchmark("Dafny").load()
    outputs = load_recordings("dafny")
    by_file = {t.meta["file"]: t for t in dafny}
    row = next(r for r in outputs if r.text.startswith("I apologize") and r.key in by_file)  # prose and all
    model = make_llm(f"recorded:{row.system}")
    reply = model.complete(DRAFT_ACTION, {"task": by_file[row.key], "state": _failed(by_file[row.key], 2)})
    assert reply.text == row.text and reply.provenance == f"real:{row.system}"  # no Dafny ladder: repeated
    synth = get_benchmark("CodeHumanEvalSynth").load()[0]
    humaneval = load_recordings("humaneval")
    later = make_llm("recorded:gpt-4").complete(DRAFT_ACTION, {"task": synth, "state": _failed(synth, 1)})
    body = humaneval.get("HumanEval/0", "gpt-4").text  # type: ignore[union-attr]
    assert later.text == synth.meta["stub"] + body and later.provenance == "real:gpt-4"  # itself again
    gpt4 = make_llm("recorded:gpt-4+cascade")
    later = gpt4.complete(DRAFT_ACTION, {"task": synth, "state": _failed(synth, 1)})
    body = humaneval.get("HumanEval/0", "gpt-4-reflexion").text  # type: ignore[union-attr]
    assert later.text == synth.meta["stub"] + body and later.provenance == "real:gpt-4-reflexion"


@pytest.mark.data
def test_a_real_spider_failure_retried_is_the_same_published_sql_unless_the_cascade_is_asked(
    shared_data: Path,
) -> None:
    rows = load_recordings("spider")
    tasks = get_benchmark("SpiderSQL").load()
    wrong = next(
        t for t in tasks
        if rows.get(spider_key(t.env_id, t.prompt), "gpt-4-zero-shot").verdict != "correct"  # type: ignore[union-attr]
        and rows.get(spider_key(t.env_id, t.prompt), "gpt-4-few-shot").text  # type: ignore[union-attr]
        != rows.get(spider_key(t.env_id, t.prompt), "gpt-4-zero-shot").text  # type: ignore[union-attr]
    )  # fmt: skip
    key = spider_key(wrong.env_id, wrong.prompt)
    plain, cascade = make_llm("recorded:gpt-4-zero-shot"), make_llm("recorded:gpt-4-zero-shot+cascade")
    for n in (1, 2):
        again = plain.complete(DRAFT_ACTION, {"task": wrong, "state": _failed(wrong, n)})
        assert (
            again.text == rows.get(key, "gpt-4-zero-shot").text and again.provenance == "real:gpt-4-zero-shot"
        )  # type: ignore[union-attr]
    rungs = [cascade.complete(DRAFT_ACTION, {"task": wrong, "state": _failed(wrong, n)}) for n in (1, 2)]
    assert [r.provenance for r in rungs] == ["real:gpt-4-few-shot", "real:gpt-4-din-sql"]
    assert rungs[0].text == rows.get(key, "gpt-4-few-shot").text  # type: ignore[union-attr]
