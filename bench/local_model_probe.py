"""Does a real local model follow cm_gym's prompts on a benchmark? Parse and change rates, live.

    python bench/local_model_probe.py --benchmark SQL --model qwen2.5-coder-1.5b --tasks 8

For `--tasks` tasks of the benchmark (first of each environment, in order): one DRAFT_ACTION, then
REVISE_WITH_RECORD calls — one showing a verified correction of the task's *own* mistake (a⁻ =
the model's draft when it failed, a⁺ = the reference), one showing the latest such correction of
an *earlier* task — and a GENERATE_LOCAL_ALTERNATIVES on a failed draft. Printed: the share of drafts that
parse to an action and are solved, the share of revisions that parse and that change the draft
(own correction: should change it; another task's: should mostly not), the share of those own
corrections that solve the task, and valid local edits per alternatives reply. These rates, not a
policy's score, are what the small-model prompts are adapted by. Replies go to `--cache` (default:
a throw-away file), so a rerun is free.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from cm_gym.agent import BaseAgent, Cost, RecordView
from cm_gym.core.types import Action, AgentState
from cm_gym.domains.registry import get_benchmark, get_domain
from cm_gym.llm.base import GENERATE_LOCAL_ALTERNATIVES
from cm_gym.llm.factory import make_llm
from cm_gym.llm.fields import render_record
from cm_gym.llm.parsers import parse_alternatives
from cm_gym.memory.alternatives import prompt_fields


def _record(a_minus: str, a_plus: str) -> RecordView:
    text = render_record(
        {"situation": "a verified correction", "condition": "", "a_minus": a_minus, "a_plus": a_plus,
         "evidence": {"score_minus": 0.0, "score_plus": 1.0}}
    )  # fmt: skip
    return RecordView("probe", text, a_minus, a_plus)


def probe(benchmark: str, model: str, n: int, cache: Path) -> dict[str, float]:
    spec = get_benchmark(benchmark)
    domain = get_domain(spec.domain_name)
    evaluator = domain.make_evaluator()
    tasks, seen = [], set()
    for t in spec.load():
        if t.env_id not in seen:
            seen.add(t.env_id)
            tasks.append(t)
        if len(tasks) == n:
            break
    llm = make_llm(f"local:{model}", cache_path=cache)
    agent = BaseAgent(llm, domain, evaluator)
    c: dict[str, float] = dict.fromkeys(
        ("drafts", "parsed", "solved", "own", "own_parsed", "own_changed", "own_solved", "other",
         "other_changed", "alt_replies", "alt_edits"), 0.0)  # fmt: skip
    correction: tuple[str, str] | None = None
    for task in tasks:
        state = AgentState(task)
        cost = Cost()
        draft = agent.draft(state, cost)
        outcome = evaluator.check(state.fork(), Action(draft))
        c["drafts"] += 1
        c["parsed"] += domain.parse_problem(draft) is None
        c["solved"] += outcome.solved
        if correction is not None:  # the verified correction of an earlier task's own mistake
            revised = agent.revise(state, draft, _record(*correction), cost)
            c["other"] += 1
            c["other_changed"] += domain.action_changed(draft, revised)
        if not outcome.solved:
            correction = (draft, task.reference)
            own = agent.revise(state, draft, _record(draft, task.reference), cost)
            c["own"] += 1
            c["own_parsed"] += domain.parse_problem(own) is None
            c["own_changed"] += domain.action_changed(draft, own)
            c["own_solved"] += evaluator.check(state.fork(), Action(own)).solved
            fields = prompt_fields(domain, state, "react", action=draft, feedback=outcome.feedback, k=4,
                                   decision_units="\n".join(domain.decision_units(draft)))  # fmt: skip
            reply = llm.complete(GENERATE_LOCAL_ALTERNATIVES, fields)
            c["alt_replies"] += 1
            c["alt_edits"] += len(parse_alternatives(reply.text, draft))
    inner = getattr(llm, "inner", None)
    if inner is not None and hasattr(inner, "close"):
        inner.close()
    return c


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--benchmark", action="append", default=None)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args()
    cache = args.cache or Path(tempfile.mkdtemp()) / "probe.sqlite"
    for name in args.benchmark or ["SQL", "SpiderSQL", "Code", "CodeHumanEvalSynth"]:
        c = probe(name, args.model, args.tasks, cache)
        d = max(c["drafts"], 1)
        o = max(c["own"], 1)
        print(
            f"{name:20} {args.model}: drafts {c['drafts']:.0f} parsed {c['parsed'] / d:.0%} solved "
            f"{c['solved'] / d:.0%} | own correction shown on {c['own']:.0f} failures: parsed "
            f"{c['own_parsed'] / o:.0%} changed {c['own_changed'] / o:.0%} solved {c['own_solved'] / o:.0%} | "
            f"another task's: changed {c['other_changed'] / max(c['other'], 1):.0%} | alternatives: "
            f"{c['alt_edits'] / max(c['alt_replies'], 1):.1f} valid edits per reply",
            flush=True,
        )


if __name__ == "__main__":
    main()
