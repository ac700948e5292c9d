"""SpiderSQL's default split is the paper's (App. D.2: tasks sampled by seed, shared ids removed,
databases recur); databases apart is the named "new environment" condition, and a run says which
split it used (issue 32)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cm_gym.core.splits import SPLIT_LABELS
from cm_gym.domains.registry import get_benchmark
from cm_gym.envs._loading import resolve_tasks
from cm_gym.protocol import ProtocolConfig
from cm_gym.protocol.config import ProtocolError
from cm_gym.protocol.stores import prepare, recorded_summary, split_summary

pytestmark = pytest.mark.data


def _envs(prepared, side: str) -> set[str]:  # type: ignore[no-untyped-def]
    return {prepared.tasks[i].env_id for i in getattr(prepared.split, side)}


def test_recorded_spider_runs_split_tasks_by_default_and_databases_on_request(shared_data: Path) -> None:
    llm = "recorded:gpt-4-zero-shot"
    paper = prepare(ProtocolConfig(benchmark="SpiderSQL", llm=llm))
    apart = prepare(ProtocolConfig(benchmark="SpiderSQL", llm=llm, split_by="databases"))
    assert paper.split_kind == "sampled" and apart.split_kind == "environments"
    n = len(get_benchmark("SpiderSQL").load())
    assert len(paper.split.eval) == round(0.4 * n)  # the seeded evaluation sample (all recorded)
    assert _envs(paper, "eval") & _envs(paper, "build")  # same environment, new request
    assert not _envs(apart, "eval") & (_envs(apart, "build") | _envs(apart, "train"))
    for prepared in (paper, apart):  # never a shared id
        assert not (set(prepared.split.build) | set(prepared.split.train)) & set(prepared.split.eval)
    summary = split_summary(ProtocolConfig(benchmark="SpiderSQL", llm=llm), paper)
    assert summary["kind"] == "sampled" and summary["label"] == SPLIT_LABELS["sampled"]
    assert summary["eval"] == len(paper.split.eval) and summary["seed"] == 12345
    cascade = ProtocolConfig(benchmark="SpiderSQL", llm=llm + "+cascade")
    info = recorded_summary(cascade, prepare(cascade))
    assert info is not None and info["system"] == "gpt-4-zero-shot" and info["cascade"] is True
    with pytest.raises(ProtocolError, match="unknown split"):
        ProtocolConfig(benchmark="SpiderSQL", split_by="by-moon").validate()


def test_the_env_takes_the_split_by_name(shared_data: Path) -> None:
    spec = get_benchmark("SpiderSQL")
    default, apart = resolve_tasks(spec, "eval"), resolve_tasks(spec, "eval", split_name="databases")
    assert {t.task_id for t in default} == set(prepare(ProtocolConfig(benchmark="SpiderSQL")).split.eval)
    assert len({t.env_id for t in apart}) < len({t.env_id for t in default})


def test_an_unknown_split_name_is_refused_before_any_work() -> None:
    import gymnasium as gym

    from cm_gym.envs._loading import EnvConfigError

    with pytest.raises(EnvConfigError, match="unknown split 'by-moon'"):
        gym.make("cm_gym/SQL-v0", split_by="by-moon")


def test_the_commands_take_the_split_and_the_a_minus_rule_by_name() -> None:
    from cm_gym.cli import make_parser

    parser = make_parser()
    run = parser.parse_args(
        ["run", "--benchmark", "SpiderSQL", "--split-by", "databases", "--admit-a-minus", "any"]
    )
    assert (run.split_by, run.admit_a_minus) == ("databases", "any")
    build = parser.parse_args(
        ["build", "--benchmark", "SpiderSQL", "--out", "s.sqlite", "--split-by", "Tasks"]
    )
    assert (build.split_by, build.admit_a_minus, build.split) == ("tasks", "auto", "build")
    for argv in (["run", "--split-by", "by-moon"], ["run", "--admit-a-minus", "sometimes"]):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
