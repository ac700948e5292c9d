"""The solver libraries load where they are used, not at ``import cm_gym`` (issue 35): a SQL env
never loads z3, python-sat's solvers, scikit-learn or scipy; SMT and SAT checks still work in a
process that loaded none of them first. Each case runs in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


HEAVY = "('z3', 'pysat.solvers', 'pysat.card', 'sklearn', 'scipy')"


def test_importing_cm_gym_and_a_sql_env_load_no_solver_library() -> None:
    code = (
        "import sys, gymnasium as gym, cm_gym\n"
        f"after_import = sorted(m for m in {HEAVY} if m in sys.modules)\n"
        "env = gym.make('cm_gym/SQL-v0'); obs, info = env.reset(seed=0)\n"
        "env.step(0)\n"
        f"print(after_import, sorted(m for m in {HEAVY} if m in sys.modules))"
    )
    assert _run(code) == "[] []"


def test_smt_and_sat_checks_load_their_solvers_and_still_solve() -> None:
    """Every generated SMT and SAT reference of seed 0 among the first 12 checks as solved, in a
    process where neither library was loaded before."""
    code = (
        "import sys\n"
        "from cm_gym.core.types import Action, AgentState\n"
        "from cm_gym.domains.smt.evaluator import SmtEvaluator\n"
        "from cm_gym.domains.smt.generated import generate_smt_tasks\n"
        "from cm_gym.domains.sat.evaluator import SatEvaluator\n"
        "from cm_gym.domains.sat.generated import generate_encoding_tasks\n"
        "out = ['z3' in sys.modules or 'pysat.solvers' in sys.modules]\n"
        "for ev, tasks in ((SmtEvaluator(), generate_smt_tasks(0)), (SatEvaluator(), generate_encoding_tasks(0))):\n"
        "    out.append(all(ev.check(AgentState(t), Action(t.reference)).solved for t in tasks[:12]))\n"
        "print(out)"
    )
    assert _run(code) == "[False, True, True]"
