"""`cm_gym.core.lazy.lazy_module`: the solver libraries load on first use, exactly once, as the
same module an ``import`` gives; a missing module fails at once (issue 35)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cm_gym.core.lazy import lazy_module


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def test_an_imported_module_is_returned_as_it_is() -> None:
    import json

    assert lazy_module("json") is json


def test_a_missing_module_fails_now_not_at_first_use() -> None:
    with pytest.raises(ModuleNotFoundError, match="no_such_module_cm_gym"):
        lazy_module("no_such_module_cm_gym")


def test_the_module_executes_on_first_attribute_read_and_is_the_imported_one() -> None:
    code = (
        "import sys; from cm_gym.core.lazy import lazy_module\n"
        "m = lazy_module('z3'); before = 'z3.z3' in sys.modules\n"
        "ctx = m.Context(); after = 'z3.z3' in sys.modules\n"
        "import z3; print(before, after, z3 is m, isinstance(z3.Int('x', ctx=ctx), z3.ArithRef))"
    )
    assert _run(code) == "False True True True"


def test_a_sql_env_never_loads_the_solver_libraries() -> None:
    """``import cm_gym`` registers every domain; making and stepping a SQL env must not load z3
    or python-sat's solvers (12,000 objects and 59 ms a process before)."""
    code = (
        "import sys, gymnasium as gym, cm_gym\n"
        "env = gym.make('cm_gym/SQL-v0'); obs, info = env.reset(seed=0)\n"
        "env.step(0)\n"
        "print(sorted(m for m in ('z3.z3', 'pysat.solvers', 'pysat.card', 'sklearn', 'scipy') if m in sys.modules))"
    )
    assert _run(code) == "[]"


def test_the_smt_and_sat_domains_still_check() -> None:
    """The lazily loaded libraries work where they are used: every generated SMT and SAT
    reference of seed 0 checks as solved in a fresh process (z3 and python-sat load there)."""
    code = (
        "import sys\n"
        "from cm_gym.core.types import Action, AgentState\n"
        "from cm_gym.domains.smt.evaluator import SmtEvaluator\n"
        "from cm_gym.domains.smt.generated import generate_smt_tasks\n"
        "from cm_gym.domains.sat.evaluator import SatEvaluator\n"
        "from cm_gym.domains.sat.generated import generate_encoding_tasks\n"
        "before = 'z3.z3' in sys.modules or 'pysat.solvers' in sys.modules\n"
        "out = [before]\n"
        "for ev, tasks in ((SmtEvaluator(), generate_smt_tasks(0)), (SatEvaluator(), generate_encoding_tasks(0))):\n"
        "    out.append(all(ev.check(AgentState(t), Action(t.reference)).solved for t in tasks[:12]))\n"
        "    ev.close() if hasattr(ev, 'close') else None\n"
        "print(out)"
    )
    assert _run(code) == "[False, True, True]"
