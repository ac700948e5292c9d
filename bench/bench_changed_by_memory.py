"""How often the old and the new rule for "memory changed the action" disagree on the simulator's
revisions (issue 22).

Old rule: the revised text differs from the draft's. New rule (`Domain.action_changed`): the
parsed, normalised actions differ (SQL AST, Python AST, constraint / command sets, Dafny and Coq
tokens), and two replies without a usable action are no change. For the first tasks of each
benchmark, the simulator's first draft is revised by every local edit the simulator can make
(`Domain.edit_operators`: the same edits its apply / over-apply / disturb branches draw from) and
by the record transfer of each other task's reference (`apply_contrast`); printed per benchmark:
revisions, how many the old rule counts as changes, how many the new one does, and examples of
the disagreements. Run: ``python bench/bench_changed_by_memory.py [--tasks N] [BENCHMARK ...]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cm_gym.agent import BaseAgent, Cost  # noqa: E402
from cm_gym.core.types import AgentState  # noqa: E402
from cm_gym.domains.registry import get_benchmark, get_domain  # noqa: E402
from cm_gym.llm.simulated import SimulatedLLM  # noqa: E402

DEFAULT = (
    "SQL",
    "SpiderSQL",
    "SAT",
    "SATLIB",
    "SMT",
    "SMTLIB",
    "Code",
    "QuixBugs",
    "CodeHumanEval",
    "Dafny",
    "MiniF2F",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmarks", nargs="*", default=list(DEFAULT))
    parser.add_argument("--tasks", type=int, default=60, help="tasks per benchmark (default 60)")
    args = parser.parse_args()
    total_old = total_new = total = 0
    for name in args.benchmarks:
        spec = get_benchmark(name)
        domain = get_domain(spec.domain_name)
        tasks = spec.load_tasks()[: args.tasks]
        agent = BaseAgent(SimulatedLLM(seed=0, task_lookup={t.task_id: t for t in tasks}.get), domain, None)
        old = new = n = 0
        examples: list[tuple[str, str]] = []
        for i, task in enumerate(tasks):
            draft = agent.draft(AgentState(task), Cost())
            blind = dataclasses.replace(task, reference="")
            revisions = [e.text for e in domain.edit_operators(blind, draft)]
            other = tasks[(i + 1) % len(tasks)].reference
            try:
                moved = domain.apply_contrast(blind, draft, draft, other)
            except Exception:  # noqa: BLE001 - another task's action may not transfer at all
                moved = None
            revisions += [moved] if moved is not None else []
            for revised in revisions:
                n += 1
                was = revised.strip() != draft.strip()
                now = domain.action_changed(draft, revised)
                old += was
                new += now
                if was != now and len(examples) < 2:
                    examples.append((draft, revised))
        total, total_old, total_new = total + n, total_old + old, total_new + new
        print(
            f"{name:<14} {n:>6} revisions: old rule {old:>6} changes, new rule {new:>6} ({old - new} format-only)"
        )
        for draft, revised in examples:
            print(f"    e.g. {' '.join(draft.split())[:70]!r} -> {' '.join(revised.split())[:70]!r}")
    print(f"all            {total:>6} revisions: old rule {total_old:>6} changes, new rule {total_new:>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
