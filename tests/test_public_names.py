"""The public surface the layer restructuring (issue 24) had to keep: the root package's names, the
registered Gymnasium ids and the CLI's commands."""

from __future__ import annotations

import argparse

import gymnasium as gym

import cm_gym
from cm_gym.cli import make_parser

ROOT_NAMES = [
    "Action",
    "AgentState",
    "DomainCheckError",
    "Outcome",
    "Split",
    "Task",
    "check_domain",
    "get_benchmark",
    "get_domain",
    "list_benchmarks",
    "register_benchmark",
]
GYM_IDS = {
    "cm_gym/Code-v0",
    "cm_gym/CodeHumanEval-v0",
    "cm_gym/Dafny-v0",
    "cm_gym/MiniF2F-v0",
    "cm_gym/QuixBugs-v0",
    "cm_gym/SAT-v0",
    "cm_gym/SATLIB-v0",
    "cm_gym/SMT-v0",
    "cm_gym/SMTLIB-v0",
    "cm_gym/SQL-v0",
    "cm_gym/SpiderSQL-v0",
}
COMMANDS = {
    "benchmarks",
    "build",
    "cache",
    "calibrate",
    "check-domain",
    "compare",
    "data",
    "diagnose",
    "env",
    "evaluate",
    "experiment",
    "memory",
    "run",
    "serve-llm",
    "setup-local-model",
    "tabulate",
    "train",
}
SUBCOMMANDS = {
    "cache": {"clear", "export", "import", "list", "stats"},
    "data": {"check"},
    "env": {"change", "families"},
    "memory": {"export", "freeze", "list", "reverify", "show", "stats", "verify"},
}


def _choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subs[0].choices) if subs else {}


def test_root_names_and_lazy_api() -> None:
    assert sorted(cm_gym.__all__) == ROOT_NAMES
    for name in [*ROOT_NAMES, "evaluate_policies", "__version__"]:
        assert getattr(cm_gym, name) is not None
    from cm_gym.domains.check import check_domain
    from cm_gym.protocol.evaluation import evaluate_policies

    assert cm_gym.check_domain is check_domain and cm_gym.evaluate_policies is evaluate_policies


def test_builtin_gym_ids_are_registered() -> None:
    assert {k for k in gym.registry if k.startswith("cm_gym/")} >= GYM_IDS
    assert {s.env_id for s in cm_gym.list_benchmarks()} >= GYM_IDS


def test_cli_commands() -> None:
    commands = _choices(make_parser())
    assert set(commands) == COMMANDS
    for name, expected in SUBCOMMANDS.items():
        assert set(_choices(commands[name])) == expected, name
