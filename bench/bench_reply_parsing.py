"""Parse success of every domain's reply parser on real model text (issue 22).

Real corpora (``<data root>/llm-outputs``, read with `cm_gym.llm.recordings.load_recordings`):

* Spider — the 642 × 7 published predictions (GPT-4, Codex; bare SQL as the systems returned it);
* DafnyBench — 2,206 raw ``llm_output`` texts of five models (programs, sometimes after an
  apology or with prose around them, sometimes prose only);
* HumanEval — 328 completions of GPT-4 (plain and Reflexion); ``prompt + completion`` is the
  program the model produced.

Each text is parsed as the raw reply, then wrapped in every shape of the reply-shape corpus
(`tests/domains/reply_shapes.py`: prose around fences, cut at max_tokens, repeated blocks, a
corrected first try, <think> sections, wrong-language chatter, …). Printed per domain: for raw
replies, how often a usable action was found (with the reasons of the failures) and how often it
is the whole reply (SQL without trailing semicolons; Python compared by AST; the rest is prose the
parser dropped, e.g. "I apologize … Here is the corrected code:"); per shape, how often the
action found in the raw reply comes back exactly when wrapped in that shape. Run: ``python bench/bench_reply_parsing.py [--json FILE]``.
"""

from __future__ import annotations

import argparse
import ast
import collections
import gzip
import json
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cm_gym.core.paths import data_root  # noqa: E402
from cm_gym.domains.code.domain import CodeDomain  # noqa: E402
from cm_gym.domains.dafny.domain import DafnyDomain  # noqa: E402
from cm_gym.domains.sql.domain import SQLDomain  # noqa: E402
from cm_gym.llm.recordings import load_recordings  # noqa: E402
from tests.domains.reply_shapes import SHAPES  # noqa: E402


def _same_python(a: str, b: str) -> bool:
    try:
        return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))
    except SyntaxError:
        return a.strip() == b.strip()


def _humaneval_prompts() -> dict[str, str]:
    path = data_root() / "humaneval" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return {row["task_id"]: row["prompt"] for row in (json.loads(line) for line in f if line.strip())}


def corpora() -> dict[str, tuple[Any, list[tuple[str, str, str]], Callable[[str, str], bool], str, str]]:
    """domain label -> (domain, [(system, reply, expected action)], same?, fence tag, prose name)."""
    sql = [
        (r.system, r.text, r.text.strip().rstrip(";").strip())
        for r in load_recordings("spider")
        if r.text.strip()
    ]
    dafny = [(r.system, r.text, r.text.strip()) for r in load_recordings("dafny")]
    prompts = _humaneval_prompts()
    code = [
        (r.system, prompts[r.key] + r.text, (prompts[r.key] + r.text).strip())
        for r in load_recordings("humaneval")
    ]
    return {
        "sql (Spider)": (SQLDomain(), sql, lambda a, b: a == b, "sql", "query"),
        "dafny (DafnyBench)": (DafnyDomain(), dafny, lambda a, b: a == b, "dafny", "program"),
        "python (HumanEval)": (CodeDomain(), code, _same_python, "python", "program"),
    }


def _rate(hits: int, n: int) -> str:
    return f"{hits}/{n} ({100.0 * hits / n:.1f}%)" if n else "0/0"


def bench(shapes: Iterable[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, (domain, rows, same, tag, what) in corpora().items():
        started = time.perf_counter()
        raw_found = raw_exact = 0
        actions: list[str] = []
        problems: collections.Counter[str] = collections.Counter()
        sources: collections.Counter[str] = collections.Counter()
        by_system: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
        for system, reply, expected in rows:
            got = domain.extract_action(reply)
            sources[got.source] += 1
            by_system[system][1] += 1
            action = domain.parse_action(reply)
            if got.found and domain.parse_problem(action) is None:
                raw_found += 1
                by_system[system][0] += 1
                actions.append(action)
            else:
                problems[got.problem or "an action that the domain cannot read"] += 1
            raw_exact += same(action, expected)
        shaped: dict[str, str] = {}
        wrong = actions[len(actions) // 2] if actions else ""
        for shape in shapes:
            hits = sum(same(domain.parse_action(SHAPES[shape](a, tag, wrong, what)), a) for a in actions)
            shaped[shape] = _rate(hits, len(actions))
        out[label] = {
            "texts": len(rows),
            "raw_usable": _rate(raw_found, len(rows)),
            "raw_whole_reply": _rate(raw_exact, len(rows)),
            "raw_sources": dict(sources),
            "raw_problems": dict(problems.most_common(5)),
            "raw_usable_by_system": {k: _rate(*v) for k, v in sorted(by_system.items())},
            "shapes_on_usable_actions": shaped,
            "seconds": round(time.perf_counter() - started, 1),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    result = bench(sorted(SHAPES))
    for label, r in result.items():
        print(f"== {label}: {r['texts']} real texts ({r['seconds']} s)")
        print(f"   raw reply -> usable action: {r['raw_usable']}; the whole reply: {r['raw_whole_reply']}")
        print(f"   found by: {r['raw_sources']}")
        for system, rate in r["raw_usable_by_system"].items():
            print(f"     {system:<22} {rate}")
        for problem, n in r["raw_problems"].items():
            print(f"   no action ({n}): {problem}")
        print("   each action found wrapped in a reply shape -> exactly that action back:")
        for shape, rate in r["shapes_on_usable_actions"].items():
            print(f"     {shape:<24} {rate}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
