"""Issue 33, item 5: ``--evaluator-option`` values are checked by type and range against the
evaluator they configure, and values that weaken a guard are refused unless
``--unsafe-evaluator-options`` is given (then recorded in every report). The 17 partial probes of
this round are kept here, each asserting the refusal."""

from __future__ import annotations

from typing import Any

import pytest

from cm_gym.cli.experiment import parse_evaluator_options
from cm_gym.domains.evaluator_options import EvaluatorOptionError, check_options
from cm_gym.studies.experiments import ExperimentConfig
from cm_gym.studies.experiments.runner import ExperimentError

#: (benchmark, option): refused whatever the flags (wrong type or range)
INVALID = [
    ("SQL", "budget_s=-5"),  # every honest query would be "infrastructure"
    ("SQL", "budget_s=NaN"),
    ("SQL", "budget_s=Infinity"),
    ("SQL", "budget_s=1e300"),
    ("SQL", "step_budget=1e300"),
    ("SQL", "row_cap=-1"),
    ("SQL", "row_cap=true"),
    ("SQL", "memory_mb=0"),
    ("Code", "per_test_timeout=-1"),
    ("Code", 'limits={"cpu_s": 1}'),  # a dict where limits are expected
    ("SQL", "step_budget=[1, 2]"),
    ("SMT", "rlimit=0"),  # z3 reads 0 as no limit at all
    ("SMT", "rlimit=-7"),
    ("SAT", "conflict_budget=2.5"),
    ("SAT", "conflict_budget=100000000000"),  # > 1000 x its default
    ("SAT", "isolated=0"),
    ("SAT", "isolation=none"),  # SAT has isolated=false for that: the evaluator refuses it
    ("SQL", "no_such_option=1"),
    ("SQL", "instances=-1"),  # more variants only strengthen, but the range still holds
    ("SQL", "instances=5000"),  # default 0 ("off") scales the absurd check as 1
    ("SQL", "instances=2.5"),
    ("SQL", "instance_seed=-1"),
    ("SQL", "verdict_on_instances=1"),
    ("SQL", "verdict_on_instances=true"),  # needs instances > 0: the evaluator refuses it
]
#: (benchmark, option): weakens a guard (refused unless --unsafe-evaluator-options)
WEAKENING = [
    ("SQL", "isolation=none"),
    ("Code", "isolation=none"),
    ("SAT", "isolated=false"),
    ("SMT", "isolated=false"),
    ("SQL", "budget_s=500"),
    ("SQL", "hang_guard_s=500"),
    ("SQL", "step_budget=200000000"),
    ("SQL", "partial_credit=true"),
    ("SQL", "digits=2"),
    ("SMT", "rlimit=50000000"),
    ("Code", "per_test_timeout=100"),  # its default is the task's own: not comparable
]
#: tighter than the defaults, or a neutral choice: accepted without the flag
SAFE = [
    ("SQL", "budget_s=30", {"budget_s": 30}),
    ("SQL", "isolation=worker", {"isolation": "worker"}),
    ("SQL", "step_budget=1000", {"step_budget": 1000}),
    ("SAT", "conflict_budget=7", {"conflict_budget": 7}),
    ("SAT", "isolated=true", {"isolated": True}),
    ("SAT", "isolation=worker", {"isolation": "worker"}),  # every check in the worker: stronger
    ("SMT", "rlimit=100000", {"rlimit": 100000}),
    ("SQL", "instances=10", {"instances": 10}),  # checks on more database variants: stronger
    ("SQL", "instance_seed=7", {"instance_seed": 7}),
]


@pytest.mark.parametrize(("benchmark", "option"), INVALID)
def test_invalid_values_are_refused_even_with_the_unsafe_flag(benchmark: str, option: str) -> None:
    for unsafe in (False, True):
        with pytest.raises(ExperimentError, match=option.split("=")[0]) as info:
            parse_evaluator_options([option], [benchmark], allow_unsafe=unsafe)
        assert "\n" not in str(info.value)


@pytest.mark.parametrize(("benchmark", "option"), WEAKENING)
def test_weakening_values_need_the_unsafe_flag_and_are_reported(benchmark: str, option: str) -> None:
    with pytest.raises(ExperimentError, match="--unsafe-evaluator-options"):
        parse_evaluator_options([option], [benchmark])
    options, weakening = parse_evaluator_options([option], [benchmark], allow_unsafe=True)
    assert len(weakening) == 1 and weakening[0].startswith(f"{benchmark}: {option.split('=')[0]}=")
    cfg = ExperimentConfig.make(quick=True, evaluator_options=options, unsafe_evaluator_options=weakening)
    assert cfg.describe()["unsafe_evaluator_options"] == list(weakening)


@pytest.mark.parametrize(("benchmark", "option", "parsed"), SAFE)
def test_safe_values_pass_without_the_flag(benchmark: str, option: str, parsed: dict[str, Any]) -> None:
    assert parse_evaluator_options([option], [benchmark]) == (parsed, ())
    assert "unsafe_evaluator_options" not in ExperimentConfig.make(quick=True).describe()


def _bare(cls: type) -> Any:
    """An evaluator instance without running its constructor (the tool may not be installed): the
    checks then compare with the declared defaults."""
    return cls.__new__(cls)


def test_dafny_and_math_options_by_their_declared_defaults() -> None:
    from cm_gym.domains.dafny.evaluator import DafnyEvaluator
    from cm_gym.domains.math.evaluator import MathEvaluator

    dafny, coq = _bare(DafnyEvaluator), _bare(MathEvaluator)
    for evaluator, option in [(dafny, {"rlimit": 0}), (dafny, {"workers": 100000}), (coq, {"tactic_timeout": 0}),
                              (coq, {"workers": 100000}), (dafny, {"time_limit": float("nan")})]:  # fmt: skip
        with pytest.raises(EvaluatorOptionError):
            check_options(evaluator, option)
    assert check_options(dafny, {"rlimit": 1000}).weakening == ()
    assert check_options(dafny, {"workers": 8}).weakening  # more processes than the default
    assert check_options(coq, {"coqc": "/tmp/evil"}).weakening  # another binary is no safe choice
