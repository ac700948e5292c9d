"""CodeHumanEval (``cm_gym/CodeHumanEval-v0``): OpenAI HumanEval's 164 problems, each shown as its
docstring plus the canonical solution with one systematically injected bug (HumanEvalFix's
classes, `inject.py`), tested by the problem's own ``check`` asserts turned into cases that the
judge compares outside the program's process (`checks.py`). Real data under
``data_root()/"humaneval"`` (never copied into the package).

CodeHumanEvalSynth (``cm_gym/CodeHumanEvalSynth-v0``, `synth.py`): the same problems as synthesis
(prompt → program), judged by the same tests; the benchmark that published HumanEval completions
(``llm="recorded:gpt-4"``) answer."""

from __future__ import annotations

from cm_gym.domains.humaneval.domain import HumanEvalDomain
from cm_gym.domains.humaneval.loader import LAYOUT, load_humaneval_tasks
from cm_gym.domains.humaneval.synth import HumanEvalSynthDomain, load_synth_tasks
from cm_gym.domains.registry import register_benchmark

__all__ = ["HumanEvalDomain", "HumanEvalSynthDomain", "load_humaneval_tasks", "load_synth_tasks"]

register_benchmark(
    "CodeHumanEval",
    domain=HumanEvalDomain,
    load_tasks=load_humaneval_tasks,
    description="HumanEval problems with injected HumanEvalFix-class bugs; tests judged outside the sandbox (real data)",
    split_by_env=True,
    default_n_build=16,
    data_layout=LAYOUT,
)

register_benchmark(
    "CodeHumanEvalSynth",
    domain=HumanEvalSynthDomain,
    load_tasks=load_synth_tasks,
    description="HumanEval as synthesis (prompt → program), judged by the same tests; answered by recorded:gpt-4 (real data)",
    split_by_env=True,
    default_n_build=8,
    data_layout=LAYOUT,
)
